"""The run report links each variable-pass insertion to its variable and planned address
(engine/report/varlinks.py): JSON `insertions[].variable`, a step of the HTML card."""
import json
from pathlib import Path

from engine.cli import main
from engine.report.explain import is_rejected_step

CASE = Path(__file__).resolve().parents[1] / "cases" / "variables" / "own-prepare-refswitch.yaml"
BASE = 137_438_953_472


def report(tmp_path, *extra) -> dict:
    out = tmp_path / "r.json"
    assert main(["run", str(CASE), "--passes", "variable_prepare", "--quiet", "--report-json", str(out),
                 "--report-html", str(tmp_path / "r.html"), *extra]) == 0
    return json.loads(out.read_text())


def test_variable_insertions_name_their_variable_and_address(tmp_path):
    r = report(tmp_path)
    by_name = {i["name"]: i for i in r["insertions"]}
    link = by_name["var_TO_assign_REF_0"]["variable"]
    assert link == {"name": "var", "node": "var", "graph": "root", "address": BASE, "memory_type": "HBM",
                    "var_key": "var0_0", "planned_in": "a fresh session"}
    assert "variable" not in by_name["Identity_assign_TO_refmerge_0"]      # its facts name no variable
    record = by_name["var_TO_assign_REF_0"]
    # the last step of the decision path, before the card's rejected alternatives
    decision = [s for s in record["explanation"] if not is_rejected_step(record, s)]
    assert len(decision) < len(record["explanation"])
    step = decision[-1]["text"]
    assert step == f"the variable is var: planned at {BASE} (HBM, VarKey var0_0) in a fresh session"
    html = (tmp_path / "r.html").read_text()
    assert step in html
    # the page's variables table: an anchor per variable, its address and the insertions naming it
    assert (f'<tr><td><a id="var-var" href="#var-var">var</a></td><td>var0_0</td><td>HBM</td>'
            f'<td class="num">{BASE}</td><td>a fresh session</td><td>var_TO_assign_REF_0</td></tr>') in html
    assert [s["id"] for s in r["sections"]][-1] == "variables"


def test_the_fresh_placement_leaves_the_output_graph_as_it_was(tmp_path):
    out, plain = tmp_path / "o.pbtxt", tmp_path / "plain.pbtxt"
    report(tmp_path, "--out", str(out))
    assert f"{BASE}" not in out.read_text()
    assert main(["run", str(CASE), "--passes", "variable_prepare", "--quiet", "--out", str(plain)]) == 0
    assert out.read_bytes() == plain.read_bytes()


def test_fresh_placement_restores_every_field_it_wrote():
    from engine.core.dumpio import serialize_model
    from engine.passes.catalog import load_pack
    from engine.core.io import load_graph
    from engine.passes.context import RunContext
    from engine.report.varlinks import _fresh_plan
    pack = load_pack(None)
    model, _ = load_graph(str(CASE), pack)
    node = model.root.find("var")
    node.op.output_i.extend([7])
    before = serialize_model(model)
    plan, why = _fresh_plan(RunContext(pack, model, {}))
    assert why is None and plan.entries[0].address == BASE
    assert serialize_model(model) == before


def test_with_var_state_the_link_is_the_runs_own_placement(tmp_path):
    state = tmp_path / "s.pb"
    r = report(tmp_path, "--var-state", str(state))
    link = next(i["variable"] for i in r["insertions"] if "variable" in i)
    assert link["address"] == BASE and link["planned_in"] == "the run's session (--var-state)"
    r = report(tmp_path, "--var-state", str(state), "--session", "3")
    assert next(i["variable"] for i in r["insertions"] if "variable" in i)["address"] == BASE


def test_a_run_without_a_report_does_not_place_the_graph(tmp_path, monkeypatch):
    import engine.report.varlinks as varlinks

    def boom(ctx):
        raise AssertionError("placed although no report is written")
    monkeypatch.setattr(varlinks, "_fresh_plan", boom)
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))        # the exit-4 traceback file goes here
    assert main(["run", str(CASE), "--passes", "variable_prepare", "--quiet", "--out", str(tmp_path / "o.pbtxt")]) == 0
    # with a report it does place (the stand-in fails: exit 4, internal error)
    assert main(["run", str(CASE), "--passes", "variable_prepare", "--quiet", "--report-json", str(tmp_path / "r.json")]) == 4


def test_the_fresh_placement_saves_only_the_nodes_it_writes(monkeypatch):
    """Note [placement journal]: on the shipped training step the placement journals the
    nodes whose offsets or sizes it writes, not the whole graph, and still restores them."""
    from engine.core.dumpio import serialize_model
    from engine.core.io import load_graph
    from engine.passes.catalog import load_pack
    from engine.passes.context import RunContext
    from engine.report.varlinks import _fresh_plan
    from engine.varmgr import placement
    pack = load_pack(None)
    model, _ = load_graph(str(Path(__file__).resolve().parents[2] / "examples" / "train_step.pbtxt"), pack)
    before = serialize_model(model)
    journaled = []
    real = placement.Journal.restore

    def restore(self):
        journaled.append({node.name for node, *_ in self.saved.values()})
        real(self)
    monkeypatch.setattr(placement.Journal, "restore", restore)
    plan, why = _fresh_plan(RunContext(pack, model, {}))
    assert why is None and plan.entries
    (saved,) = journaled
    assert {e.node for e in plan.entries} <= saved          # every placed node was saved first
    assert len(saved) < model.node_count() / 2
    assert serialize_model(model) == before
