"""Which pack a command uses (engine/core/resources.py, Note [pack discovery]):
--rules/PACK > $MEMCONFLICT_RULES > [tool.memconflict] rules in the nearest
pyproject.toml/memconflict.toml upwards > the installed pack; and `rules init`."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from harness import A2A, VERSION

from engine.cli import main
from engine.core.resources import ENV_RULES, default_pack_dir

ROOT = Path(__file__).resolve().parents[1]
# the README's "teach the pack a new collective" edit, as it is written into rules/ge/rw.yaml
README_RULE = ("    - id: rw/in/alltoall-inplace\n"
               "      when: node.type == \"HcomAllToAllInplace\"\n"
               "      value: ScopeWriteable\n")


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(ENV_RULES, raising=False)


def pack_at(folder: Path) -> Path:
    shutil.copytree(default_pack_dir(), folder)
    return folder


def checked(capsys, *argv) -> str:
    """The folder `rules check` reports having loaded (its output starts with it)."""
    assert main(["rules", "check", *argv]) == 0
    return capsys.readouterr().out.split(": pack ", 1)[0]


def error(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    return capsys.readouterr().err


def write_config(folder: Path, name: str, rules: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / name
    cfg.write_text(f'[project]\nname = "x"\n\n[tool.memconflict]\nrules = "{rules}"\n', encoding="utf-8")
    return cfg


def a2a_graph(tmp_path: Path) -> Path:
    g = tmp_path / "a2a.yaml"
    g.write_text(A2A, encoding="utf-8")
    return g


def add_readme_rule(pack: Path) -> None:
    rw = pack / "rw.yaml"
    text = rw.read_text(encoding="utf-8")
    anchor = "    - id: rw/in/read\n"
    assert anchor in text
    rw.write_text(text.replace(anchor, README_RULE + anchor, 1), encoding="utf-8")


# ---- precedence ------------------------------------------------------------------------
def test_default_is_the_installed_pack(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert Path(checked(capsys)).resolve() == default_pack_dir().resolve()


def test_pyproject_upwards_relative_to_the_file(tmp_path, monkeypatch, capsys):
    pack_at(tmp_path / "proj" / "rules" / "mine")
    write_config(tmp_path / "proj", "pyproject.toml", "rules/mine")
    (tmp_path / "proj" / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "proj" / "src" / "deep")
    assert Path(checked(capsys)).resolve() == (tmp_path / "proj" / "rules" / "mine").resolve()


def test_memconflict_toml_and_the_nearest_file_wins(tmp_path, monkeypatch, capsys):
    pack_at(tmp_path / "outer")
    pack_at(tmp_path / "a" / "inner")
    write_config(tmp_path, "pyproject.toml", "outer")
    write_config(tmp_path / "a", "memconflict.toml", "inner")
    monkeypatch.chdir(tmp_path / "a")
    assert Path(checked(capsys)).resolve() == (tmp_path / "a" / "inner").resolve()
    monkeypatch.chdir(tmp_path)
    assert Path(checked(capsys)).resolve() == (tmp_path / "outer").resolve()


def test_a_pyproject_without_the_table_is_passed_over(tmp_path, monkeypatch, capsys):
    pack_at(tmp_path / "p")
    write_config(tmp_path, "pyproject.toml", "p")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text('[project]\nname = "memconflict-user"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path / "sub")
    assert Path(checked(capsys)).resolve() == (tmp_path / "p").resolve()


def test_env_beats_config_and_the_argument_beats_env(tmp_path, monkeypatch, capsys):
    for name in ("cfg", "env", "arg"):
        pack_at(tmp_path / name)
    write_config(tmp_path, "pyproject.toml", "cfg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_RULES, str(tmp_path / "env"))
    assert checked(capsys) == "env"
    assert checked(capsys, "arg") == "arg"
    monkeypatch.delenv(ENV_RULES)
    assert checked(capsys) == "cfg"


def test_every_pack_command_uses_discovery(tmp_path, monkeypatch, capsys):
    pack = pack_at(tmp_path / "p")
    add_readme_rule(pack)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_RULES, str(pack))
    g = a2a_graph(tmp_path)
    assert main(["rules", "show"]) == 0
    assert "rw/in/alltoall-inplace" in capsys.readouterr().out
    assert main(["explain", str(g), "c_Identity0", "--passes", "mem_rw_conflict"]) == 0
    assert "rw/in/alltoall-inplace" in capsys.readouterr().out
    for argv in (["pipeline"], ["rules", "functions"], ["symbols", str(g)],
                 ["convert", str(g), str(tmp_path / "g.pbtxt")], ["vars", "plan", str(tmp_path / "g.pbtxt")]):
        assert main(argv) == 0, argv
    capsys.readouterr()
    monkeypatch.setenv(ENV_RULES, str(tmp_path / "gone"))
    for argv in (["pipeline"], ["rules", "functions"], ["symbols", str(g)], ["convert", str(g), str(tmp_path / "h.pbtxt")],
                 ["vars", "plan", str(tmp_path / "g.pbtxt")], ["run", str(g)], ["explain", str(g), "x"]):
        assert f"${ENV_RULES}: error: rule pack folder" in error(capsys, *argv), argv
    assert not (tmp_path / "h.pbtxt").exists()


# ---- the checkout: an edit to its rules/ge takes effect ----------------------------------
def test_readme_edit_in_a_checkout_takes_effect(tmp_path, monkeypatch, capsys):
    checkout = tmp_path / "checkout"
    pack = pack_at(checkout / "rules" / "ge")
    shutil.copy(ROOT / "pyproject.toml", checkout / "pyproject.toml")     # the project's own config
    add_readme_rule(pack)
    (checkout / "work").mkdir()
    monkeypatch.chdir(checkout / "work")
    g, rj = a2a_graph(tmp_path), tmp_path / "r.json"
    assert main(["rules", "check"]) == 0
    assert capsys.readouterr().out.startswith(f"{checkout / 'rules' / 'ge'}: pack ge ")
    assert main(["run", str(g), "--passes", "mem_rw_conflict", "--report-json", str(rj)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(f"with pack ge {VERSION} ({checkout / 'rules' / 'ge'})")
    report = json.loads(rj.read_text())
    assert report["pack"]["path"] == str(checkout / "rules" / "ge")
    (ins,) = report["insertions"]
    assert ins["type"] == "Identity" and ins["reason"]["input_rule"].startswith(
        f"rw/in/alltoall-inplace ({checkout / 'rules' / 'ge' / 'rw.yaml'}:")


def test_pack_path_in_json_and_html_is_relative_under_the_cwd(tmp_path, monkeypatch, capsys):
    pack_at(tmp_path / "rules" / "mine")
    monkeypatch.chdir(tmp_path)
    rj, rh = tmp_path / "r.json", tmp_path / "r.html"
    g = ROOT / "tests" / "cases" / "rw" / "RW-01.yaml"
    assert main(["run", str(g), "--rules", "rules/mine", "--passes", "mem_rw_conflict", "--quiet",
                 "--report-json", str(rj), "--report-html", str(rh)]) == 0
    assert json.loads(rj.read_text())["pack"] == {"name": "ge", "version": VERSION, "schema_version": 1,
                                                  "path": "rules/mine"}
    assert "in <code>rules/mine</code>" in rh.read_text()


# ---- errors --------------------------------------------------------------------------------
def test_configured_folder_missing_or_not_a_pack(tmp_path, monkeypatch, capsys):
    (tmp_path / "empty").mkdir()
    cfg = write_config(tmp_path, "pyproject.toml", "nowhere")
    monkeypatch.chdir(tmp_path)
    err = error(capsys, "rules", "check")
    assert err.startswith(f"{cfg}:5: error: rule pack folder '{tmp_path / 'nowhere'}' does not exist")
    assert "hint:" in err
    write_config(tmp_path, "pyproject.toml", "empty")
    assert error(capsys, "run", "x.yaml").startswith(f"{cfg}:5: error: '{tmp_path / 'empty'}' is not a rule pack")
    monkeypatch.setenv(ENV_RULES, str(tmp_path / "empty"))
    assert error(capsys, "pipeline").startswith(f"${ENV_RULES}: error: '{tmp_path / 'empty'}' is not a rule pack")
    assert error(capsys, "run", "x.yaml", "--rules", "nope").startswith("--rules: error: rule pack folder 'nope'")
    assert error(capsys, "rules", "show", "nope").startswith("PACK: error: rule pack folder 'nope'")


def test_bad_config_files(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "memconflict.toml").write_text("[tool.memconflict]\nrules = [1]\n", encoding="utf-8")
    assert "memconflict.toml:2: error: [tool.memconflict] rules must be a folder path string" in error(
        capsys, "rules", "check")
    (tmp_path / "memconflict.toml").write_text("[tool.memconflict\nrules = 'x'\n", encoding="utf-8")
    assert "memconflict.toml: error: invalid TOML" in error(capsys, "rules", "check")


# ---- rules init ------------------------------------------------------------------------------
def test_rules_init_writes_a_checkable_overlay_that_takes_edits(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["rules", "init", "mine"]) == 0
    assert capsys.readouterr().out.startswith(f"mine: new pack mine on ge {VERSION}")
    manifest = (tmp_path / "mine" / "pack.yaml").read_text()
    assert "\nbase: " in manifest and "include: [changes.yaml]" in manifest
    assert checked(capsys, "mine") == "mine"
    g, rj = a2a_graph(tmp_path), tmp_path / "r.json"
    changes = tmp_path / "mine" / "changes.yaml"
    text = changes.read_text()
    assert "# Changes to the base pack" in text
    changes.write_text(text.replace("overlay: []\n", "overlay:\n", 1).replace(
        "#  - add: rw_conflict.input_rules", "  - add: rw_conflict.input_rules", 1).replace(
        "#    before: rw/in/read\n#    items:\n#      - id: rw/in/my-inplace-op\n#        when: node.type == \"MyInplaceOp\"\n"
        "#        value: ScopeWriteable\n",
        "    before: rw/in/read\n    items:\n      - id: rw/in/my-inplace-op\n        when: node.type == \"HcomAllToAllInplace\"\n"
        "        value: ScopeWriteable\n", 1), encoding="utf-8")
    assert checked(capsys, "mine") == "mine"
    assert main(["run", str(g), "--rules", "mine", "--passes", "mem_rw_conflict", "--quiet",
                 "--report-json", str(rj)]) == 0
    (ins,) = json.loads(rj.read_text())["insertions"]
    assert ins["reason"]["input_rule"].startswith("rw/in/my-inplace-op (mine/changes.yaml:")


def test_rules_init_bases_on_the_discovered_pack_relatively(tmp_path, monkeypatch, capsys):
    pack_at(tmp_path / "rules" / "ge")
    write_config(tmp_path, "pyproject.toml", "rules/ge")
    monkeypatch.chdir(tmp_path)
    assert main(["rules", "init", "rules/mine"]) == 0
    assert "\nbase: ../ge\n" in (tmp_path / "rules" / "mine" / "pack.yaml").read_text()
    capsys.readouterr()
    assert checked(capsys, "rules/mine") == "rules/mine"


def test_rules_init_refuses_a_non_empty_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine\n")
    assert error(capsys, "rules", "init", "taken").startswith("taken: error: already exists and is not an empty folder")
    assert sorted(p.name for p in (tmp_path / "taken").iterdir()) == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    assert main(["rules", "init", "empty"]) == 0
