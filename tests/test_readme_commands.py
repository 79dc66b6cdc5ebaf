"""The README's set-up commands stay true: the main job's `memconflict` part runs on the
shipped example from a plain checkout layout and writes the three outputs it names."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if line.startswith("    python3 -m venv .venv")]


def test_two_setup_commands_one_runs_the_example_one_the_tests():
    main_job, tests = setup_commands()
    assert "pip install ." in main_job and "memconflict run examples/" in main_job
    assert "pip install '.[test]'" in tests and tests.endswith("-m pytest")


def test_the_main_jobs_memconflict_steps_work_in_a_copy(tmp_path):
    main_job = setup_commands()[0]
    steps = [s.strip() for s in main_job.split("&&")]
    work = tmp_path / "clone"
    work.mkdir()
    shutil.copytree(ROOT / "examples", work / "examples")
    for step in steps:
        if step.startswith(("python3 -m venv", ".venv/bin/pip install")):
            continue                                     # the environment is this test run's
        argv = shlex.split(step)
        if argv[0] == ".venv/bin/memconflict":
            argv = [sys.executable, "-m", "engine.cli"] + argv[1:]
        res = subprocess.run(argv, cwd=work, capture_output=True, text=True,
                             env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MEMCONFLICT_CACHE": "off"})
        assert res.returncode == 0, (step, res.stderr)
    outs = re.findall(r"--(?:out|report-json|report-html) (\S+)", main_job)
    assert len(outs) == 3 and all((work / o).stat().st_size > 0 for o in outs)
