"""Start-up: command modules are imported only for their command (Note [lazy command
modules] in engine/cli/__init__.py), and the table that says which module defines a
command names them all."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine import cli

ROOT = Path(__file__).resolve().parents[1]


def test_command_table_names_every_command_of_every_module():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(cli.COMMAND_MODULES)
    for command, module in cli.COMMAND_MODULES.items():
        alone = next(a for a in cli.build_parser((module,))._actions if a.dest == "command")
        assert command in alone.choices, (command, module)
    assert set(cli.COMMAND_MODULES.values()) == set(cli.MODULE_ORDER)


def test_a_command_imports_only_its_module():
    code = ("import sys; from engine.cli import main; main(['pipeline']); "
            "print(sorted(m for m in sys.modules if m.startswith(('engine.cli.', 'engine.diff', 'engine.cli.vars'))))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    loaded = res.stdout.strip().splitlines()[-1]
    assert "engine.cli.rules" in loaded
    assert "engine.cli.diff" not in loaded and "engine.cli.vars" not in loaded and "engine.diff" not in loaded


def test_help_and_unknown_commands_still_see_every_command(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["nonsense"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    for command in cli.COMMAND_MODULES:
        assert command in err
