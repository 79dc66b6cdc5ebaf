"""Outputs that never lie (engine/cli/outputs.py) and the exit statuses
(engine/cli/__init__.py): refused output paths, all-or-nothing writes,
symlinks written through, `-` as standard output, Ctrl-C, internal errors,
`run --fail-on` and `--version`."""
from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path

import pytest

import engine
import engine.cli.outputs as outputs
import engine.passes.manager as manager
from engine.cli import main

ROOT = Path(__file__).resolve().parents[1]
RW01 = ROOT / "tests" / "cases" / "rw" / "RW-01.yaml"
TRAIN = ROOT / "examples" / "train_step.pbtxt"
RUN = ["run", RW01, "--passes", "mem_rw_conflict"]


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def leftovers(folder: Path) -> list[str]:
    """Temporary files the writer may have left in `folder`."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ---- refused paths: exit 2 before any work ----------------------------------------------
@pytest.fixture
def no_work(monkeypatch):
    """Fail loudly if a pass runs: the path checks must come first."""
    def boom(*a, **k):
        raise AssertionError("a pass ran before the output paths were checked")
    monkeypatch.setattr(manager, "run_passes", boom)


def test_directory_is_refused(tmp_path, capsys, no_work):
    code, _, err = run(RUN + ["--out", tmp_path], capsys)
    assert code == 2
    assert err.startswith(f"memconflict: error: --out '{tmp_path}' is a folder, not a file\n")
    assert "hint:" in err and "Traceback" not in err


def test_missing_parent_is_refused(tmp_path, capsys, no_work):
    target = tmp_path / "nope" / "r.json"
    code, _, err = run(RUN + ["--report-json", target], capsys)
    assert code == 2
    assert f"folder '{tmp_path / 'nope'}' does not exist" in err and "mkdir -p" in err
    assert not (tmp_path / "nope").exists()


def test_unwritable_place_is_refused(capsys, no_work):
    code, _, err = run(RUN + ["--report-html", "/proc/memconflict-x.html"], capsys)
    assert code == 2
    assert err.startswith("memconflict: error: --report-html '/proc/memconflict-x.html' cannot be written")


def test_fifo_is_refused_and_stays_a_fifo(tmp_path, capsys, no_work):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, _, err = run(RUN + ["--out", fifo], capsys)
    assert code == 2
    assert "is a FIFO; outputs are written only to regular files" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_device_is_refused_and_stays_a_device(capsys, no_work):
    before = os.stat("/dev/null")
    code, _, err = run(RUN + ["--out", "/dev/null"], capsys)
    assert code == 2
    assert "memconflict: error: --out '/dev/null' is a device" in err
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys, no_work, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(RUN + ["--out", "a.json", "--report-json", "./a.json"], capsys)
    assert code == 2
    assert "--report-json './a.json' and --out 'a.json' name the same file" in err
    (tmp_path / "real").write_text("x")
    os.symlink(tmp_path / "real", tmp_path / "link")
    code, _, err = run(RUN + ["--report-json", "real", "--report-html", "link"], capsys)
    assert code == 2 and "name the same file" in err


def test_two_stdout_outputs_are_refused(capsys, no_work):
    code, _, err = run(RUN + ["--out", "-", "--report-json", "-"], capsys)
    assert code == 2
    assert "standard output is already taken by --out -" in err


@pytest.mark.parametrize("command", [
    ["convert", RW01],
    ["diff", "rules/ge", "rules/ge", "--quiet", "--json"],
    ["diff", "rules/ge", "rules/ge", "--quiet", "--html"],
    ["vars", "plan", TRAIN, "--json"],
    ["vars", "plan", TRAIN, "--save-state"],
])
def test_every_writing_command_refuses_a_folder(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, _, err = run(command + [tmp_path], capsys)
    assert code == 2
    assert err.startswith("memconflict: error: ") and "is a folder, not a file" in err
    assert "Traceback" not in err


# ---- what is written --------------------------------------------------------------------
def test_symlink_is_written_through(tmp_path, capsys):
    real = tmp_path / "real.json"
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "link.json"
    os.symlink("real.json", link)
    code, _, _ = run(RUN + ["--report-json", link, "--quiet"], capsys)
    assert code == 0
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert json.loads(real.read_text())["insertions"][0]["name"] == "const1_Identity0"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640      # an existing file keeps its mode
    assert leftovers(tmp_path) == []


def test_dash_is_standard_output(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(RUN + ["--report-json", "-", "--out", "g.pbtxt"], capsys)
    assert code == 0
    assert json.loads(out)["insertions"][0]["name"] == "const1_Identity0"
    assert "1 node(s) inserted" in err           # the summary moves to stderr
    assert not (tmp_path / "-").exists()
    assert 'name: "const1_Identity0"' in (tmp_path / "g.pbtxt").read_text()


def test_convert_to_standard_output(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(["convert", RW01, "-"], capsys)
    assert code == 0
    assert 'name: "const1"' in out and not (tmp_path / "-").exists()


def test_disk_full_on_the_last_output_changes_nothing(tmp_path, capsys, monkeypatch):
    graph, rj, html = tmp_path / "g.pbtxt", tmp_path / "r.json", tmp_path / "r.html"
    rj.write_text("previous report\n")
    real_write = outputs._write
    calls = []

    def full_disk(fh, data):
        if not isinstance(data, bytes):         # the reports come as pieces (Note [streamed JSON])
            data = b"".join(data)
        calls.append(len(data))
        if len(calls) == 3:                      # the last output, --report-html
            fh.write(data[:100])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(fh, data)

    monkeypatch.setattr(outputs, "_write", full_disk)
    code, out, err = run(RUN + ["--out", graph, "--report-json", rj, "--report-html", html], capsys)
    assert code == 2 and len(calls) == 3
    assert err == f"memconflict: error: cannot write '{html}': No space left on device\n"
    assert not graph.exists() and not html.exists()   # earlier outputs not left behind
    assert rj.read_text() == "previous report\n"      # a pre-existing target unchanged
    assert leftovers(tmp_path) == []                  # temporaries removed
    assert out == ""


# ---- exit statuses ----------------------------------------------------------------------
def test_ctrl_c_exits_130_and_leaves_no_outputs(tmp_path, capsys, monkeypatch):
    def interrupted(ctx, specs, **_):
        raise KeyboardInterrupt
    monkeypatch.setattr(manager, "run_passes", interrupted)
    graph, rj = tmp_path / "g.pbtxt", tmp_path / "r.json"
    code, _, err = run(RUN + ["--out", graph, "--report-json", rj], capsys)
    assert code == 130
    assert err.splitlines()[-1] == "memconflict: interrupted" and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_while_writing_removes_temporaries(tmp_path, capsys, monkeypatch):
    real_write = outputs._write
    calls = []

    def interrupted(fh, data):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real_write(fh, data)

    monkeypatch.setattr(outputs, "_write", interrupted)
    code, _, err = run(RUN + ["--out", tmp_path / "g.pbtxt", "--report-json", tmp_path / "r.json", "--quiet"], capsys)
    assert code == 130 and err == "memconflict: interrupted\n"
    assert list(tmp_path.iterdir()) == []


def test_internal_error_exits_4_with_the_traceback_saved(tmp_path, capsys, monkeypatch):
    def broken(ctx, specs, **_):
        raise ZeroDivisionError("division by zero\nsecond line")
    monkeypatch.setattr(manager, "run_passes", broken)
    code, _, err = run(RUN + ["--out", tmp_path / "g.pbtxt", "--quiet"], capsys)
    assert code == 4
    m = re.fullmatch(r"memconflict: internal error: ZeroDivisionError: division by zero second line "
                     r"\(traceback saved to (\S+); please report it\)\n", err)
    assert m, err
    saved = Path(m.group(1))
    try:
        text = saved.read_text()
        assert "Traceback (most recent call last)" in text and "in broken" in text
        assert f"memconflict {engine.__version__}" in text
    finally:
        saved.unlink()
    assert list(tmp_path.iterdir()) == []


def test_memory_error_names_the_graph_and_its_nodes(capsys, monkeypatch):
    def exhausted(ctx, specs, **_):
        raise MemoryError
    monkeypatch.setattr(manager, "run_passes", exhausted)
    code, _, err = run(RUN + ["--quiet"], capsys)
    assert code == 4
    assert err.startswith(f"memconflict: out of memory on graph ") and re.search(r"\(\d+ nodes\)", err)
    assert "RW-01.yaml" in err and len(err.splitlines()) == 1


def test_fail_on_exits_3_and_still_writes(tmp_path, capsys):
    rj = tmp_path / "r.json"
    code, _, err = run(["run", TRAIN, "--fail-on", "W18888", "--report-json", rj, "--quiet"], capsys)
    assert code == 3
    assert "memconflict: --fail-on: 1 W18888 diagnostic(s)" in err
    assert json.loads(rj.read_text())["summary"]["by_code"]["W18888"] == 1
    assert run(["run", TRAIN, "--fail-on", "warnings", "--quiet"], capsys)[0] == 3
    assert run(RUN + ["--fail-on", "insertions", "--quiet"], capsys)[0] == 3
    assert run(RUN + ["--fail-on", "W99999", "--fail-on", "warnings", "--quiet"], capsys)[0] == 0
    code, _, err = run(RUN + ["--fail-on", "nonsense"], capsys)
    assert code == 2 and "unknown --fail-on 'nonsense'" in err


def test_version(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0
    assert out.splitlines()[0] == f"memconflict {engine.__version__}"
    assert out.splitlines()[1].startswith("default pack: ge ")


def test_help_documents_the_exit_statuses(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "exit status:" in out
    for code in ("0 ", "1 ", "2 ", "3 ", "4 ", "130 "):
        assert f"\n  {code}" in out


def test_ctrl_c_during_the_renames_is_held_until_all_are_done(tmp_path, capsys, monkeypatch):
    import signal
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)      # arrives between the two renames
        real_replace(src, dst)

    monkeypatch.setattr(outputs.os, "replace", replace)
    graph, rj = tmp_path / "g.pbtxt", tmp_path / "r.json"
    # a shell's background job starts with SIGINT ignored (and Python keeps it so): Ctrl-C's
    # usual handler for this test, whatever started pytest
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code, _, err = run(RUN + ["--out", graph, "--report-json", rj, "--quiet"], capsys)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(calls) == 2 and code == 130 and err == "memconflict: interrupted\n"
    assert graph.exists() and rj.exists()        # all targets changed, not one of two
    assert leftovers(tmp_path) == []


# ---- a binary --out is written before the reports are made (Note [spilled graphs]) --------
def test_binary_out_is_staged_and_renamed_with_the_others(tmp_path, capsys, monkeypatch):
    """The model's temporary file exists while the report is built (its bytes are not
    held until the end), and the targets still appear only together."""
    import engine.report.model as report_model
    graph, rj = tmp_path / "g.pb", tmp_path / "r.json"
    seen = []
    real_build = report_model.build_report

    def build(*a, **k):
        seen.append((leftovers(tmp_path), graph.exists()))
        return real_build(*a, **k)
    monkeypatch.setattr(report_model, "build_report", build)
    code, _, _ = run(RUN + ["--out", graph, "--report-json", rj, "--quiet"], capsys)
    assert code == 0
    (temps, target_there), = seen
    assert len(temps) == 1 and temps[0].startswith(".g.pb.") and not target_there
    assert graph.exists() and rj.exists() and leftovers(tmp_path) == []


def test_a_failure_after_staging_leaves_no_temporary(tmp_path, capsys, monkeypatch):
    import engine.report.model as report_model

    def broken(*a, **k):
        raise MemoryError
    monkeypatch.setattr(report_model, "build_report", broken)
    code, _, _ = run(RUN + ["--out", tmp_path / "g.pb", "--report-json", tmp_path / "r.json"], capsys)
    assert code != 0
    assert list(tmp_path.iterdir()) == []


def test_the_json_report_is_written_before_the_page_is_made(tmp_path, capsys, monkeypatch):
    """Each output goes to its temporary as soon as it is made (the JSON bytes are not held
    while the HTML page is rendered); the targets appear together at the end."""
    import engine.report.html as html
    graph, rj, page = tmp_path / "g.pbtxt", tmp_path / "r.json", tmp_path / "r.html"
    seen = []
    real_render = html.render_html_pieces

    def render(*a, **k):
        seen.append((leftovers(tmp_path), rj.exists()))
        return real_render(*a, **k)
    monkeypatch.setattr(html, "render_html_pieces", render)
    code, _, _ = run(RUN + ["--out", graph, "--report-json", rj, "--report-html", page, "--quiet"], capsys)
    assert code == 0
    ((temps, target_there),) = seen
    assert sorted(t.split(".")[1] for t in temps) == ["g", "r"] and not target_there
    assert graph.exists() and rj.exists() and page.exists() and leftovers(tmp_path) == []


# ---- Note [no report unless written] (engine/cli/run.py) ---------------------------------
@pytest.mark.parametrize("extra, built", [([], False), (["--out", "{tmp}/g.pb"], False), (["--runtime"], False),
                                          (["--report-json", "{tmp}/r.json"], True), (["--format", "json"], True),
                                          (["--sarif", "{tmp}/s.sarif"], True)])
def test_the_report_is_built_only_for_an_output_made_from_it(extra, built, tmp_path, capsys, monkeypatch):
    """A run that writes no form of the report (JSON, HTML, SARIF, a JSON or SARIF stream)
    builds none, and its text summary is the same as a run that does."""
    import engine.report.model as model
    calls = []
    real = model.build_report
    monkeypatch.setattr(model, "build_report", lambda *a: calls.append(a) or real(*a))
    code, out, _ = run(RUN + [x.format(tmp=tmp_path) for x in extra], capsys)
    assert code == 0
    assert bool(calls) == built
    if not built:
        code, with_report, _ = run(RUN + [x.format(tmp=tmp_path) for x in extra] + ["--report-json", tmp_path / "x.json"],
                                   capsys)
        mask = lambda s: re.sub(r"\d+\.\d+s", "", s)
        assert mask(out) == mask(with_report)
