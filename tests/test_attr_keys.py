"""Note [attribute key sets] (engine/core/attrs.py): a node's cached attribute keys follow
every write the engine makes, and the verify mode catches a write that forgets to say so."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gen_graph import make_model, write_model
from engine.core import attrs
from engine.core.attrs import attr_keys, node_attr, set_attr, set_node_attr
from engine.core.dumpio import load_model
from engine.dsl.library import _attr_true
from harness import ge_dumps

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "train_step.pbtxt"


def _first_node(model):
    return next(iter(model.all_nodes()))


def test_set_node_attr_is_seen_by_every_reader():
    model = load_model(EXAMPLE)
    n = _first_node(model)
    key = "_memconflict_test_flag"
    assert not n.has_attr(key) and not _attr_true(n, key) and node_attr(n, key) is None
    assert key not in attr_keys(n)
    set_node_attr(n, key, True)
    assert n.has_attr(key) and _attr_true(n, key) and node_attr(n, key) is True
    assert n.attr(key).b is True


def test_equal_key_sets_are_one_object():
    model = load_model(EXAMPLE)
    by_keys: dict = {}
    for n in model.all_nodes():
        by_keys.setdefault(frozenset(n.op.attr), []).append(attr_keys(n))
    shared = [sets for sets in by_keys.values() if len(sets) > 1]
    assert shared, "the example has nodes with equal attribute keys"
    for sets in shared:
        assert all(s is sets[0] for s in sets)


def test_verify_mode_catches_a_write_that_forgot_attrs_changed(monkeypatch):
    monkeypatch.setattr(attrs, "VERIFY_CACHES", True)
    monkeypatch.setattr(attrs, "_SHADOW", {})
    model = load_model(EXAMPLE)
    n = _first_node(model)
    assert not n.has_attr("_memconflict_unsaid")
    set_attr(n.op.attr, "_memconflict_unsaid", 1)        # the raw write, without attrs_changed
    with pytest.raises(AssertionError, match="_memconflict_unsaid"):
        n.has_attr("anything")
    set_node_attr(n, "_memconflict_said", 2)              # says so: reads go on
    assert n.has_attr("_memconflict_said")


def _run(env_extra: dict, src: Path, out_dir: Path) -> list[bytes]:
    env = dict(os.environ, MEMCONFLICT_CACHE="off", **env_extra)
    outs = [out_dir / ("out" + (".pb" if src.suffix == ".pb" else ".pbtxt")), out_dir / "r.json"]
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(src), "--out", str(outs[0]),
                           "--report-json", str(outs[1])], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [p.read_bytes() for p in outs]


@pytest.mark.parametrize("src", [EXAMPLE, "generated"] + sorted(ge_dumps().glob("*.txt"))[:2],
                         ids=lambda p: getattr(p, "name", p))
def test_pipeline_in_verify_mode_writes_the_same_bytes(src, tmp_path):
    """The whole default pipeline with every cached read checked against the op (a
    forgotten attrs_changed raises), and its outputs equal to the cached run's; "generated"
    is a training step as current GE dumps are (peer-index attributes, a hub node)."""
    if src == "generated":
        src = tmp_path / "step.pb"
        write_model(make_model(2000, dump_attrs=True, hub=0.4), src)
    (tmp_path / "v").mkdir()
    (tmp_path / "c").mkdir()
    verified = _run({"MEMCONFLICT_VERIFY_CACHES": "1"}, src, tmp_path / "v")
    cached = _run({"MEMCONFLICT_VERIFY_CACHES": "0"}, src, tmp_path / "c")
    assert verified == cached


def test_objects_that_only_carry_an_op_are_read_from_the_op():
    """An importer's op builder (something with `.op`, no graph node) has no key set: the
    readers go to its op as before."""
    from types import SimpleNamespace
    from engine.dsl.library import _has_attr
    from engine.proto import ge_ir_pb2 as pb
    op = pb.OpDef(name="b", type="Conv2D")
    set_attr(op.attr, "flag", True)
    builder = SimpleNamespace(op=op)
    assert _attr_true(builder, "flag") and not _attr_true(builder, "absent")
    assert _has_attr(builder, "flag") and not _has_attr(builder, "absent")
    assert node_attr(builder, "flag") is True and node_attr(builder, "absent") is None
