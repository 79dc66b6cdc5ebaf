"""The fixture harness and the golden files guard the suite: a misspelt expectation, an
unknown set-up field or a changed decision fails, naming the file and what to do."""
from __future__ import annotations

import pytest

from golden import check_golden, render_decisions, render_value
from harness import CASES, ROOT, VERSION, check_expectations, edit, run_fixture

GRAPH = """doc: a read-only constant into a collective that writes its input
graphs:
  root:
    nodes:
      c: Const
      ar: {{type: HcomAllReduce, inputs: 1, outputs: 1, attrs: {{_input_mutable: true}}}}
    edges: [c -> ar]
expect:
  passes: [mem_rw_conflict]
{expect}
"""


def fixture(tmp_path, expect: str):
    path = tmp_path / "case.yaml"
    path.write_text(GRAPH.format(expect=expect), encoding="utf-8")
    return path


def failure_of(fn, *args) -> str:
    with pytest.raises(pytest.fail.Exception) as exc:
        fn(*args)
    return str(exc.value)


def test_the_well_spelt_fixture_passes(tmp_path):
    r = run_fixture(fixture(tmp_path, "  inserted: 1\n  producer_type: {\"ar:0\": Identity}"))
    check_expectations(r.ctx, r.expect, r.status, r.failure)


def test_unknown_expectation_key_names_file_line_and_the_close_key(tmp_path):
    path = fixture(tmp_path, "  insertd: 5")
    msg = failure_of(run_fixture, path)
    assert msg == f"{path}:10:3: unknown expectation key 'insertd' in expect: did you mean 'inserted'?"


def test_unknown_set_up_field_names_the_close_field(tmp_path):
    msg = failure_of(run_fixture, fixture(tmp_path, "  offsets: {ar: {input_offset: [8]}}"))
    assert msg.endswith(":10:18: unknown field 'input_offset' in offsets['ar']: did you mean 'input_i'?")
    msg = failure_of(run_fixture, fixture(tmp_path, "  given_desc: {\"ar:in:0\": {data_ofset: 512}}"))
    assert "unknown field 'data_ofset' in given_desc['ar:in:0']: did you mean 'data_offset'?" in msg


def test_every_unknown_key_is_reported_at_once(tmp_path):
    msg = failure_of(run_fixture, fixture(tmp_path, "  statuss: 0\n  producer_typ: {\"ar:0\": Identity}"))
    assert msg.splitlines() == [
        f"{tmp_path / 'case.yaml'}:10:3: unknown expectation key 'statuss' in expect: did you mean 'status'?",
        f"{tmp_path / 'case.yaml'}:11:3: unknown expectation key 'producer_typ' in expect: "
        "did you mean 'producer_type'?"]


def test_message_is_for_failures_only(tmp_path):
    msg = failure_of(run_fixture, fixture(tmp_path, "  message: boom"))
    assert "`message:` is the failure's text; give it with `status: 1` only" in msg


def test_a_failure_case_must_state_its_message(tmp_path):
    msg = failure_of(run_fixture, fixture(tmp_path, "  status: 1"))
    assert msg.endswith(":10:3: a failure case states its message: add `message: \"pass P failed at node 'n': ...\"`")


def test_message_must_match_the_failure_exactly():
    r = run_fixture(CASES / "subgraph" / "own-while-no-body.yaml")
    assert r.status == 1
    right = "pass subgraph failed at node 'w': the While has no body subgraph"
    check_expectations(r.ctx, {**r.expect, "message": right}, r.status, r.failure)
    with pytest.raises(AssertionError, match="failure: pass subgraph failed at node 'w'"):
        check_expectations(r.ctx, {**r.expect, "message": right.replace("'w'", "'d'")}, r.status, r.failure)


def test_golden_mismatch_fails_with_a_diff_and_the_refresh_command(tmp_path):
    golden = tmp_path / "case.golden"
    golden.write_text("status 0\n", encoding="utf-8")
    check_golden(golden, "status 0\n", False, "tests/test_cases.py")
    msg = failure_of(check_golden, golden, "pass p ok +1 -0\nstatus 0\n", False, "tests/test_cases.py")
    assert "+pass p ok +1 -0\n" in msg and " status 0\n" in msg
    assert "refresh with `python -m pytest tests/test_cases.py --update-golden`" in msg
    assert golden.read_text() == "status 0\n"
    check_golden(golden, "pass p ok +1 -0\nstatus 0\n", True, "tests/test_cases.py")
    assert golden.read_text() == "pass p ok +1 -0\nstatus 0\n"


def test_missing_golden_file_says_how_to_write_it(tmp_path):
    msg = failure_of(check_golden, tmp_path / "x.golden", "status 0\n", False, "tests/test_cases.py")
    assert "no golden file; write it with `python -m pytest tests/test_cases.py --update-golden`" in msg


def test_reason_values_render_sorted_and_quoted_only_when_needed():
    assert render_value({"b": [1, True, None], "a": "rules/ge/rw.yaml:42", "c": "two words"}) == \
        '{a=rules/ge/rw.yaml:42, b=[1, true, null], c="two words"}'
    assert render_value(f"{ROOT}/rules/ge/rw.yaml:42") == "rules/ge/rw.yaml:42"


def test_rendered_locations_are_repository_relative_from_any_working_directory(tmp_path, monkeypatch):
    path = CASES / "rw" / "RW-01.yaml"
    monkeypatch.chdir(tmp_path)
    text = render_decisions(run_fixture(path).ctx)
    assert "loc=rules/ge/rw.yaml:53 " in text and "cell_loc=rules/ge/rw.yaml:12," in text and str(ROOT) not in text


def test_unknown_top_level_key_is_an_input_error_naming_file_and_key(tmp_path):
    from engine.core.errors import InputError

    path = tmp_path / "case.yaml"
    path.write_text(GRAPH.format(expect="") + "optoins: {ge.featureBaseRefreshable: '1'}\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        run_fixture(path)
    text = exc.value.render()
    assert f"{path}:11:1: error: graph file: unknown key 'optoins'" in text and "did you mean 'options'?" in text


def test_shared_pack_loads_are_keyed_by_folder_bytes_and_working_directory(pack_copy, tmp_path, monkeypatch):
    """Note [shared pack loads] (conftest.py): a repeated load of an unchanged pack is shared, an
    edited one (even by a same-size edit) is loaded afresh, and a failed load is not kept."""
    from engine.core.errors import InputError
    from engine.passes import catalog

    if not getattr(catalog.load_pack, "shared", False):
        pytest.skip("MEMCONFLICT_TEST_PACK_CACHE=0")
    first = catalog.load_pack(pack_copy)
    assert catalog.load_pack(pack_copy) is first and first.version == VERSION
    edit(pack_copy / "pack.yaml", f'version: "{VERSION}"', 'version: "99.0.1"')
    second = catalog.load_pack(pack_copy)
    assert second is not first and second.version == "99.0.1"
    edit(pack_copy / "pack.yaml", 'version: "99.0.1"', "version: [")
    for _ in range(2):
        with pytest.raises(InputError):
            catalog.load_pack(pack_copy)
    edit(pack_copy / "pack.yaml", "version: [", 'version: "99.0.1"')
    assert catalog.load_pack(pack_copy) is second
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert catalog.load_pack(pack_copy) is not second      # its locations read differently from here
