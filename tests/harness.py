"""Runs annotated graph fixtures: a YAML graph with an `expect:` block.

Set-up keys (`passes` is required, the others optional):
  passes: [ids]                  passes to run, in order
  given_desc: {"n:in:i" | "n:out:i": {field: value}}   set TensorDescriptor fields before the passes run
                                 (fields the YAML graph format cannot express, e.g. data_offset)
  offsets: {n: {input_i|output_i: [ints]}}   memory offsets as memory assignment would leave them
Checks (all optional):
  status: 0|1                    1 = a pass fails as GE's does
  message: "pass P failed at node 'n': ..."   the failure's exact text (required with status 1, only there)
  inserted: N                    number of inserted nodes
  inserted_types: {T: N}         inserted nodes by type
  type_count: {T: N}             nodes of type T in the whole model afterwards
  graph_nodes: {graph: N}        direct node count of a graph afterwards
  order: {graph: [names]}        a graph's direct nodes afterwards, in list order
  ids: {graph: {n: id}}          the topological ids of a graph's nodes afterwards
  producer_type: {"n:i": T}      type of the node feeding input i of n
  producer_not_type: {"n:i": T}
  producer: {"n:i": "m:j"}       exact producer anchor
  ctrl_in: {n: [names]}          n's control predecessors, in order (types with "type:" prefix)
  ctrl_out: {n: [names]}         n's control successors, in order
  attr: {n: {key: value|absent}}
  producer_desc: {"n:i": {reuse_input: b, reuse_input_index: k, absent_attrs: [..]}}
  rerun_inserted: N              a second run on the output inserts N nodes
  desc: {"n:in:i" | "n:out:i": {field: value}}   TensorDescriptor fields (reuse_input, data_offset, ...)
  desc_field: {"n:in:i" | "n:out:i": {field: value}}   the same (older spelling)
  desc_attr: {"n:in:i" | "n:out:i": {key: value|absent}}   tensor descriptor attributes
  producer_attr: {"n:i": {key: value|absent}}   attributes of the node feeding input i of n
  symbol_count / anchor_count: N  size of the symbol table a pass left in ctx.symbols
  symbol_of: {"n:out:i": name}   symbol_size: {name: N}
  diagnostics: [codes]
  graph_type_count: {graph: {T: N}}   nodes of type T among a graph's direct nodes
  rule_of: {n: rule_id}         the rule that inserted node n
  ports: {n: [[inputs], [outputs]]}   n's port names
  named: {n: T}                  a node named n exists (in any graph) and has type T
  absent: [names]                no node of these names exists
An unknown key (or an unknown field of given_desc, offsets, desc, desc_field, producer_desc)
fails the fixture, naming the file, the line and the closest known key.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.passes.context import RunContext
from engine.core.errors import Loc, PassFailure, did_you_mean
from engine.proto import ge_ir_pb2 as pb
from engine.passes.catalog import load_pack
from engine.core.attrs import attr_value
from engine.passes.manager import check_graph, resolve_passes, run_passes
from engine.pack.options import run_options
from engine.core.yamlgraph import load_yaml_graph
from engine.core.yamlloc import load_yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = HERE / "cases"


@functools.cache
def shared_pack():
    """The default pack, loaded once per test process (with the repository root as the working
    directory, so its locations read rules/ge/rw.yaml:42). Read it, never edit it: tests that
    change a pack load their own copy (the pack_copy fixture)."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return load_pack()
    finally:
        os.chdir(cwd)


def shared_fixtures() -> Path:
    """`../shared/fixtures` of the repository: the nearest ancestor folder that has
    shared/fixtures (a git worktree may sit deeper than the main checkout)."""
    for d in ROOT.parents:
        if (d / "shared" / "fixtures").is_dir():
            return d / "shared" / "fixtures"
    return ROOT.parent / "shared" / "fixtures"


ENV_DUMPS = "MEMCONFLICT_GE_DUMPS"


def ge_dumps() -> Path:
    """The folder of real GE dumps: $MEMCONFLICT_GE_DUMPS, else ../shared/fixtures/ge-dumps."""
    return Path(os.environ[ENV_DUMPS]) if os.environ.get(ENV_DUMPS) else shared_fixtures() / "ge-dumps"


def _dumps_reason() -> str:
    return (f"the real GE dumps are not here: {ge_dumps()} has no *.txt dump (a plain clone lacks "
            f"../shared/fixtures/ge-dumps; set {ENV_DUMPS}=FOLDER to point at them)")


# Note [plain clone]: every test that reads the shared GE dumps carries this mark, so a clone
# without ../shared/fixtures skips them (with the reason above) instead of failing.
needs_ge_dumps = pytest.mark.skipif(not any(ge_dumps().glob("*.txt")), reason=_dumps_reason())


SETUP_KEYS = ("passes", "given_desc", "offsets")
CHECK_KEYS = ("status", "message", "inserted", "inserted_types", "type_count", "graph_nodes", "order", "ids",
              "producer_type", "producer_not_type", "producer", "ctrl_in", "ctrl_out", "attr", "producer_desc",
              "rerun_inserted", "desc", "desc_field", "desc_attr", "producer_attr", "symbol_count", "anchor_count",
              "symbol_of", "symbol_size", "diagnostics", "graph_type_count", "rule_of", "ports", "named", "absent")
DESC_FIELDS = tuple(pb.TensorDescriptor.DESCRIPTOR.fields_by_name)
OFFSET_FIELDS = ("input_i", "output_i")
PRODUCER_DESC_FIELDS = ("reuse_input", "reuse_input_index", "absent_attrs")
FIELDS_OF = {"given_desc": DESC_FIELDS, "desc": DESC_FIELDS, "desc_field": DESC_FIELDS,
             "offsets": OFFSET_FIELDS, "producer_desc": PRODUCER_DESC_FIELDS}


def _where(path: Path, value, key) -> str:
    loc = getattr(value, "key_locs", {}).get(key) or Loc(str(path))
    file = Path(loc.file)
    if file.is_absolute() and file.is_relative_to(ROOT):
        loc = Loc(file.relative_to(ROOT).as_posix(), loc.line, loc.col)
    return str(loc)


def check_expect_keys(path: Path, expect) -> None:
    """Fail on a key the harness does not know: a misspelt check would otherwise pass silently."""
    if not isinstance(expect, dict) or "passes" not in expect:
        pytest.fail(f"{_where(path, expect, None)}: the fixture has no `expect: {{passes: [...]}}`", pytrace=False)
    problems = []
    for key in expect:
        if key not in SETUP_KEYS + CHECK_KEYS:
            problems.append(f"{_where(path, expect, key)}: unknown expectation key '{key}' in expect: "
                            f"{did_you_mean(str(key), SETUP_KEYS + CHECK_KEYS, 'expectation keys')}")
    for key, known in FIELDS_OF.items():
        for ref, fields in (expect.get(key) or {}).items():
            for field in fields if isinstance(fields, dict) else ():
                if field not in known:
                    problems.append(f"{_where(path, fields, field)}: unknown field '{field}' in {key}['{ref}']: "
                                    f"{did_you_mean(str(field), known, key + ' fields')}")
    if "message" in expect and expect.get("status", 0) != 1:
        problems.append(f"{_where(path, expect, 'message')}: `message:` is the failure's text; "
                        "give it with `status: 1` only")
    if expect.get("status", 0) == 1 and "message" not in expect:
        problems.append(f"{_where(path, expect, 'status')}: a failure case states its message: "
                        "add `message: \"pass P failed at node 'n': ...\"`")
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def case_files(sub: str = "") -> list[Path]:
    return sorted((CASES / sub).rglob("*.yaml"))


@dataclass
class CaseRun:
    ctx: RunContext
    expect: dict
    status: int
    failure: PassFailure | None      # the failure that stopped the run (status 1)


def run_case(path: Path, pack=None, passes=None, extra_options=None):
    """Run a fixture's passes: (ctx, expect, status)."""
    r = run_fixture(path, pack, passes, extra_options)
    return r.ctx, r.expect, r.status


def run_fixture(path: Path, pack=None, passes=None, extra_options=None) -> CaseRun:
    pack = pack or shared_pack()
    model, file_options = load_yaml_graph(path, pack)
    options = run_options(pack.options, extra_options or {}, file_options)
    expect = load_yaml(path).get("expect")
    check_expect_keys(path, expect)
    for ref, fields in (expect.get("given_desc") or {}).items():
        name, side, idx = ref.rsplit(":", 2)
        node = find(model, name)
        d = (node.op.input_desc if side == "in" else node.op.output_desc)[int(idx)]
        for field, value in fields.items():
            setattr(d, field, value)
    ids = passes or list(expect.get("passes") or [])
    for name, fields in (expect.get("offsets") or {}).items():
        node = find(model, name)
        for field, values in fields.items():
            getattr(node.op, field).extend(values)
    ctx = RunContext(pack, model, options)
    check_graph(ctx)
    failure = None
    try:
        run_passes(ctx, resolve_passes(pack, ids, options))
    except PassFailure as exc:
        failure = exc
    return CaseRun(ctx, expect, 0 if failure is None else 1, failure)


def find(model, name: str):
    for g in model.graph_order:
        n = g.find(name)
        if n is not None:
            return n
    raise AssertionError(f"no node named {name}")


def anchor(model, ref: str):
    name, _, idx = ref.rpartition(":")
    return find(model, name).ins[int(idx)]


def desc(model, ref: str):
    """"n:in:i" / "n:out:i" → that tensor descriptor."""
    name, side, idx = ref.rsplit(":", 2)
    node = find(model, name)
    return (node.op.input_desc if side == "in" else node.op.output_desc)[int(idx)]


def check_expectations(ctx, expect, status, failure: PassFailure | None = None) -> None:
    model = ctx.model
    assert status == expect.get("status", 0), f"status {status}"
    if "message" in expect:
        assert failure is not None and str(failure) == expect["message"], f"failure: {failure}"
    if "inserted" in expect:
        assert len(ctx.insertions) == expect["inserted"], [i.name for i in ctx.insertions]
    for t, n in (expect.get("inserted_types") or {}).items():
        assert sum(1 for i in ctx.insertions if i.type == t) == n, (t, [i.name for i in ctx.insertions])
    for t, n in (expect.get("type_count") or {}).items():
        got = sum(1 for x in model.all_nodes() if x.type == t)
        assert got == n, f"{got} nodes of type {t}, expected {n}"
    for g, n in (expect.get("graph_nodes") or {}).items():
        assert model.graphs[g].count == n, f"graph {g} has {model.graphs[g].count} nodes, expected {n}"
    for g, want in (expect.get("order") or {}).items():
        got = [x.name for x in model.graphs[g].node_list()]
        assert got == list(want), f"graph {g} in the order {got}"
    for g, want in (expect.get("ids") or {}).items():
        got = {x.name: x.id for x in model.graphs[g].node_list()}
        assert got == dict(want), f"graph {g} ids {got}"
    for ref, t in (expect.get("producer_type") or {}).items():
        a = anchor(model, ref)
        assert a.peer is not None and a.peer.node.type == t, f"{ref} fed by {a.peer}"
    for ref, t in (expect.get("producer_not_type") or {}).items():
        a = anchor(model, ref)
        assert a.peer is None or a.peer.node.type != t, f"{ref} fed by {a.peer}"
    for ref, want in (expect.get("producer") or {}).items():
        a = anchor(model, ref)
        assert a.peer is not None and f"{a.peer.node.name}:{a.peer.idx}" == want, f"{ref} fed by {a.peer}"
    for name, preds in (expect.get("ctrl_in") or {}).items():
        got = [("type:" + p.type) if any(str(x).startswith("type:") for x in preds) else p.name
               for p in find(model, name).in_ctrl]
        assert got == list(preds), f"{name} control inputs {got}"
    for name, attrs in (expect.get("attr") or {}).items():
        node = find(model, name)
        for key, want in attrs.items():
            if want == "absent":
                assert key not in node.op.attr, f"{name} has {key}"
            else:
                assert attr_value(node.attr(key)) == want, f"{name}.{key} = {attr_value(node.attr(key))}"
    for ref, attrs in (expect.get("producer_attr") or {}).items():
        src = anchor(model, ref).peer
        assert src is not None, f"{ref} has no producer"
        for key, want in attrs.items():
            if want == "absent":
                assert key not in src.node.op.attr, f"{src.node.name} has {key}"
            else:
                got = attr_value(src.node.attr(key))
                assert got == want, f"{src.node.name}.{key} = {got}"
    for ref, spec in (expect.get("producer_desc") or {}).items():
        src = anchor(model, ref).peer
        for d in (src.node.op.input_desc[0], src.desc):
            if "reuse_input" in spec:
                assert d.reuse_input == spec["reuse_input"]
            if "reuse_input_index" in spec:
                assert d.reuse_input_index == spec["reuse_input_index"]
            for key in spec.get("absent_attrs", []):
                assert key not in d.attr, f"{key} still on {src.node.name}"
    for ref, fields in (expect.get("desc") or {}).items():
        name, side, idx = ref.rsplit(":", 2)
        node = find(model, name)
        d = (node.op.input_desc if side == "in" else node.op.output_desc)[int(idx)]
        for field, want in fields.items():
            assert getattr(d, field) == want, f"{ref}.{field} = {getattr(d, field)}, expected {want}"
    table = ctx.symbols
    if "symbol_count" in expect:
        assert len(table.anchors) == expect["symbol_count"], table.to_json()
    if "anchor_count" in expect:
        assert len(table.of) == expect["anchor_count"], table.to_json()
    for ref, want in (expect.get("symbol_of") or {}).items():
        name, side, idx = ref.rsplit(":", 2)
        node = find(model, name)
        a = (node.ins if side == "in" else node.outs)[int(idx)]
        assert table.of.get(a) == want, f"{ref} in symbol {table.of.get(a)}"
    for sym, n in (expect.get("symbol_size") or {}).items():
        assert len(table.anchors[sym]) == n, table.to_json()
    for g, counts in (expect.get("graph_type_count") or {}).items():
        for t, n in counts.items():
            got = sum(1 for x in model.graphs[g].nodes() if x.type == t)
            assert got == n, f"graph {g}: {got} nodes of type {t}, expected {n}"
    for name, (ins, outs) in (expect.get("ports") or {}).items():
        node = find(model, name)
        got = [[node.input_name(i) for i in range(len(node.ins))], [node.output_name(i) for i in range(len(node.outs))]]
        assert got == [list(ins), list(outs)], f"{name} ports {got}"
    for name, rid in (expect.get("rule_of") or {}).items():
        got = [i.rule for i in ctx.insertions if i.name == name]
        assert got == [rid], f"{name} inserted by {got}"
    for name, t in (expect.get("named") or {}).items():
        assert find(model, name).type == t, f"{name} is a {find(model, name).type}, expected {t}"
    for name in expect.get("absent") or []:
        assert all(g.find(name) is None for g in model.graph_order), f"{name} exists"
    for name, succs in (expect.get("ctrl_out") or {}).items():
        got = [s.name for s in find(model, name).out_ctrl]
        assert got == list(succs), f"{name} control outputs {got}"
    for ref, attrs in (expect.get("desc_attr") or {}).items():
        d = desc(model, ref)
        for key, want in attrs.items():
            if want == "absent":
                assert key not in d.attr, f"{ref} has {key}"
            else:
                got = attr_value(d.attr[key]) if key in d.attr else None
                assert got == want, f"{ref}.{key} = {got}"
    for ref, fields in (expect.get("desc_field") or {}).items():
        d = desc(model, ref)
        for key, want in fields.items():
            assert getattr(d, key) == want, f"{ref}.{key} = {getattr(d, key)}"
    if "diagnostics" in expect:
        assert [d.code for d in ctx.diagnostics] == list(expect["diagnostics"])


# ---- editing copies of the default pack (tests of pack strictness) -------------------------
def edit(path, old: str, new: str) -> None:
    """Replace the first `old` in a pack file (which must contain it)."""
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def errors_of(pack_dir) -> str:
    """The rendered errors of loading a pack that must fail."""
    import pytest
    from engine.core.errors import InputError

    with pytest.raises(InputError) as exc:
        load_pack(pack_dir)
    return exc.value.render()


def line_of(path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


# A Const feeding the README's example collective (HcomAllToAllInplace), for rule-edit tests
A2A = """\
graphs:
  root:
    nodes:
      c: {type: Const, outputs: 1}
      a2a: {type: HcomAllToAllInplace, inputs: 1, outputs: 1}
      out: {type: NetOutput, inputs: 1, outputs: 0}
    edges:
      - c -> a2a
      - a2a:0 -> out:0
"""


def repeated_ctrl(data: bytes) -> int:
    """The `src:-1` entries of a saved binary model that repeat an earlier one of their op
    (Note [repeated control edges] in engine/core/surgery.py)."""
    md = pb.ModelDef()
    md.ParseFromString(data)
    k = 0
    for g in md.graph:
        for op in g.op:
            ctrl = [e for e in op.input if e.endswith(":-1")]
            k += len(ctrl) - len(set(ctrl))
    return k


def shipped_version() -> str:
    """The shipped pack's version (rules/ge/pack.yaml): what the CLI prints for it, read here so
    that a pack release edits no test."""
    import yaml
    return str(yaml.safe_load((Path(__file__).resolve().parent.parent / "rules" / "ge" / "pack.yaml").read_text())["version"])


VERSION = shipped_version()
