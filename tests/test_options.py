"""Options declared in the pack (`rules/ge/options.yaml`, engine/pack/options.py):
unknown keys and badly typed values are exit 2, values are typed and canonical,
declared defaults reach the rules, `option("typo")` fails at pack load, and
`memconflict pipeline` lists them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import errors_of, line_of, shared_pack
from test_overlay import overlay

from engine.cli import main
from engine.core.errors import InputError, Loc
from engine.pack.options import resolve_options
from engine.varmgr.policy_load import default_policy

ROOT = Path(__file__).resolve().parents[1]
IS01C = ROOT / "tests" / "cases" / "inplace_check" / "IS-01c.yaml"


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def pass_ids(report_path: Path) -> list[str]:
    return [p["id"] for p in json.loads(report_path.read_text())["passes"]]


def test_unknown_option_is_exit_2_with_did_you_mean_and_no_output(tmp_path, capsys):
    rj = tmp_path / "r.json"
    code, _, err = run(["run", IS01C, "--option", "context.hostExecFlg=1", "--report-json", rj], capsys)
    assert code == 2
    assert "--option: error: unknown option 'context.hostExecFlg'" in err
    assert "did you mean 'context.hostExecFlag'?" in err
    assert not rj.exists()


@pytest.mark.parametrize("spelling", ["1", "true", "on", "YES", "True"])
def test_bool_spellings_all_mean_on(tmp_path, capsys, spelling):
    rj = tmp_path / "r.json"
    code, _, _ = run(["run", IS01C, "--option", f"context.hostExecFlag={spelling}", "--report-json", rj, "--quiet"], capsys)
    assert code == 0
    report = json.loads(rj.read_text())
    assert report["options"] == {"context.hostExecFlag": "1"}          # canonical text
    assert "inplace_support_check" in pass_ids(rj)                     # the gate saw "on"


@pytest.mark.parametrize("spelling", ["0", "false", "off", "No"])
def test_bool_spellings_off_keep_the_gated_pass_off(tmp_path, capsys, spelling):
    rj = tmp_path / "r.json"
    assert run(["run", IS01C, "--option", f"context.hostExecFlag={spelling}", "--report-json", rj, "--quiet"], capsys)[0] == 0
    assert "inplace_support_check" not in pass_ids(rj)


@pytest.mark.parametrize("item, message", [
    ("context.hostExecFlag=yes please", "bad value 'yes please': expected a bool"),
    ("ge.oo.level=O4", "bad value 'O4': expected one of O0, O1, O2, O3"),
    ("soc.AICoreSpec.padding_size=-1", "-1 is out of range [0, 4294967295]"),
    ("soc.AICoreSpec.padding_size=32k", "expected a decimal integer"),
])
def test_badly_typed_value_is_exit_2(capsys, item, message):
    code, _, err = run(["run", IS01C, "--option", item], capsys)
    assert code == 2 and message in err
    assert "hint:" in err


def test_option_in_a_yaml_graph_is_checked_at_its_line(tmp_path, capsys):
    g = tmp_path / "g.yaml"
    g.write_text(IS01C.read_text().replace("graphs:\n", "options: {ge.exec.atomicCleanPolicy: '2'}\ngraphs:\n", 1))
    code, _, err = run(["run", g], capsys)
    assert code == 2
    line = line_of(g, "atomicCleanPolicy")
    assert f"g.yaml:{line}:" in err and "option 'ge.exec.atomicCleanPolicy': bad value '2'" in err


def test_command_line_option_overrides_the_graph_file(tmp_path, capsys):
    g = tmp_path / "g.yaml"
    g.write_text(IS01C.read_text().replace("graphs:\n", "options: {context.hostExecFlag: true}\ngraphs:\n", 1))
    rj = tmp_path / "r.json"
    assert run(["run", g, "--report-json", rj, "--quiet"], capsys)[0] == 0
    assert "inplace_support_check" in pass_ids(rj)                     # YAML `true` is a bool "1"
    assert run(["run", g, "--option", "context.hostExecFlag=off", "--report-json", rj, "--quiet"], capsys)[0] == 0
    assert "inplace_support_check" not in pass_ids(rj)


def test_a_declared_default_reaches_the_rules(pack_copy, tmp_path, capsys):
    """Changing an option's default in an overlay turns the gated pass on without --option."""
    ov = overlay(pack_copy.parent, {"o.yaml": "overlay:\n  - replace: options[context.hostExecFlag].default\n    value: true\n"})
    rj = tmp_path / "r.json"
    code, _, err = run(["run", IS01C, "--rules", ov, "--report-json", rj, "--quiet"], capsys)
    assert code == 0, err
    assert "inplace_support_check" in pass_ids(rj)
    assert json.loads(rj.read_text())["options"] == {}                 # the report lists what was given


def test_rule_naming_an_undeclared_option_fails_at_load(pack_copy):
    passes = pack_copy / "passes.yaml"
    passes.write_text(passes.read_text().replace('option_true("context.hostExecFlag")', 'option_true("context.hostExecFlg")'))
    text = errors_of(pack_copy)
    line = line_of(passes, "context.hostExecFlg")
    assert f"passes.yaml:{line}:" in text
    assert "unknown Option 'context.hostExecFlg'" in text and "did you mean 'context.hostExecFlag'?" in text


def test_bad_declarations_are_located(pack_copy):
    opts = pack_copy / "options.yaml"
    opts.write_text(opts.read_text().replace("type: bool\n    default: false\n    mirrors: OPTION_FEATURE",
                                             "type: boolean\n    default: false\n    mirrors: OPTION_FEATURE", 1)
                    .replace('default: "0"\n    mirrors: ATOMIC', 'default: "7"\n    mirrors: ATOMIC', 1))
    text = errors_of(pack_copy)
    assert f"options.yaml:{line_of(opts, 'type: boolean')}:" in text and "unknown type 'boolean'" in text
    bad_default = line_of(opts, 'default: "7"')
    assert f"options.yaml:{bad_default}:" in text and "bad default: expected one of 0, 1" in text


def test_pipeline_lists_options_with_this_runs_values(capsys):
    code, out, _ = run(["pipeline", "--option", "context.hostExecFlag=on"], capsys)
    assert code == 0
    row = next(line for line in out.splitlines() if line.strip().startswith("context.hostExecFlag ")).split()
    assert row == ["context.hostExecFlag", "bool", "0", "1"]
    assert "mirrors OPTION_FEATURE_BASE_REFRESHABLE" in out
    assert run(["pipeline", "--option", "nope=1"], capsys)[0] == 2


def test_a_pack_without_options_accepts_any_key_as_text():
    assert resolve_options({}, {"anything": "yes"}) == {"anything": "yes"}
    with pytest.raises(InputError):
        resolve_options(shared_pack().options, {"anything": "yes"}, {"anything": Loc("x.yaml", 3, 4)})


def test_every_option_the_variable_policy_reads_is_declared():
    declared = shared_pack().options
    policy = default_policy()
    import dataclasses
    keys = [getattr(policy.options, f.name) for f in dataclasses.fields(policy.options)] + [policy.size_rule.padding_option]
    keys = [k for k in keys if isinstance(k, str)]          # the policy keeps each key's location beside it
    assert len(keys) >= 3
    for key in keys:
        assert key in declared, key
