"""The one attribute codec (engine/core/attrs.py): every kind writes and reads back."""
import pytest

from engine.core.attrs import KINDS, attr_kind, attr_value, typed_attr, value_kind, write_attr
from engine.proto import ge_ir_pb2 as pb

LV = pb.AttrDef.ListValue


@pytest.mark.parametrize("value, kind, field", [
    ("x", "s", "s"), (3, "i", "i"), (0.5, "f", "f"), (True, "b", "b"), (b"\x00\x01", "bt", "bt"),
    (["a", "b"], "list_s", "list"), ([1, 2], "list_i", "list"), ([0.5, 2], "list_f", "list"),
    ([True, False], "list_b", "list"), ([b"x"], "list_bt", "list"), ([], "list_i", "list"),
    ([[1, 2], [3]], "list_list_int", "list_list_int"), ([[0.5], [1]], "list_list_float", "list_list_float"),
])
def test_round_trip(value, kind, field):
    assert value_kind(value) == kind
    a = pb.AttrDef()
    write_attr(a, value)
    assert attr_kind(a) == field
    want = [float(x) for x in value] if kind == "list_f" else value
    if kind == "list_list_float":
        want = [[float(x) for x in row] for row in value]
    assert attr_value(a) == want


def test_forced_kinds():
    a = pb.AttrDef()
    write_attr(a, 9, "dt")
    assert attr_kind(a) == "dt" and attr_value(a) == 9
    write_attr(a, [], "list_s")          # an empty string list (GE's _datadump_original_op_names)
    assert a.list.val_type == LV.VT_LIST_STRING and attr_value(a) == []
    write_attr(a, [1, 2], "list_dt")
    assert a.list.val_type == LV.VT_LIST_DATA_TYPE and list(a.list.dt) == [1, 2]
    assert set(KINDS) >= {"s", "i", "f", "b", "dt", "bt", "list_list_int", "list_list_float"}


def test_rewrite_replaces_the_old_value():
    a = pb.AttrDef()
    write_attr(a, ["a"])
    write_attr(a, 1)
    assert attr_kind(a) == "i" and not a.HasField("list")


@pytest.mark.parametrize("bad", [["a", 1], [[1], ["x"]], {"k": 1}, None])
def test_rejects(bad):
    with pytest.raises(ValueError):
        write_attr(pb.AttrDef(), bad)


def test_typed_attr_reads_only_the_kind_asked_for():
    op = pb.OpDef()
    write_attr(op.attr["s"], "v")
    write_attr(op.attr["i"], 4)
    assert typed_attr(op.attr, "s", "s") == "v" and typed_attr(op.attr, "s", "i") is None
    assert typed_attr(op.attr, "i", "i", "dt") == 4 and typed_attr(op.attr, "absent", "s") is None
