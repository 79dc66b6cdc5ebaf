"""The compiled-pack cache (engine/pack/cache.py): a cached load parses and compiles
nothing, gives the same run, follows
every edit of the pack, still reports its errors, and survives a broken or
unwritable cache folder."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness import errors_of, line_of

from engine.core import yamlloc
from engine.dsl import compiler, parser
from engine.pack.loader import load_pack as load_pack_uncached

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "train_step.pbtxt"


@pytest.fixture
def cache_on(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("MEMCONFLICT_CACHE", "on")
    monkeypatch.setenv("MEMCONFLICT_CACHE_DIR", str(folder))
    return folder


def fresh_load(path):
    """A load as a new process would do it: empty parse memo and code cache."""
    from engine.passes import catalog
    parser.PARSED.clear()
    compiler._CODE.clear()
    return load_pack_uncached(path, catalog.REGISTRY)


def _registry():
    from engine.passes import catalog
    return catalog.REGISTRY


def test_second_load_parses_and_compiles_nothing(cache_on, pack_copy, monkeypatch):
    first = fresh_load(pack_copy)
    files = list(cache_on.glob("pack-*.cache"))
    assert len(files) == 1
    parser.PARSED.clear()
    compiler._CODE.clear()

    def no_parse(*_a, **_k):
        raise AssertionError("parsed although cached")
    monkeypatch.setattr(parser, "_parse_expr", no_parse)
    before = compiler.COMPILES[0]
    again = load_pack_uncached(pack_copy, _registry())
    assert compiler.COMPILES[0] == before
    assert [str(s.gate) for s in again.pipeline] == [str(s.gate) for s in first.pipeline]
    assert again.rule_ids == first.rule_ids


def test_an_edit_takes_effect_and_errors_are_still_reported(cache_on, pack_copy):
    fresh_load(pack_copy)
    passes = pack_copy / "passes.yaml"
    text = passes.read_text()
    passes.write_text(text.replace('option_true("context.hostExecFlag")', 'option_true("context.hostExecFlag") and false'))
    pack = fresh_load(pack_copy)
    step = next(s for s in pack.pipeline if s.pass_id == "inplace_support_check")
    assert "context.hostExecFlag\") and false" in str(step.gate)
    assert len(list(cache_on.glob("pack-*.cache"))) == 2          # keyed by content
    passes.write_text(text.replace('option_true("context.hostExecFlag")', 'option_true(context.hostExecFlag)'))
    parser.PARSED.clear()
    compiler._CODE.clear()
    assert f"passes.yaml:{line_of(passes, 'option_true(context')}:" in errors_of(pack_copy)
    assert len(list(cache_on.glob("pack-*.cache"))) == 2          # a failed load stores nothing


def test_broken_or_unwritable_cache_is_passed_over(cache_on, pack_copy, tmp_path, monkeypatch):
    fresh_load(pack_copy)
    (f,) = cache_on.glob("pack-*.cache")
    f.write_bytes(b"garbage")
    assert fresh_load(pack_copy).passes                             # loads, parsing afresh
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MEMCONFLICT_CACHE_DIR", str(blocker / "sub"))
    assert fresh_load(pack_copy).passes


def test_cached_and_uncached_runs_give_identical_reports(tmp_path):
    env_on = {"MEMCONFLICT_CACHE": "on", "MEMCONFLICT_CACHE_DIR": str(tmp_path / "c")}
    outs = []
    for k, env in enumerate(({"MEMCONFLICT_CACHE": "off"}, env_on, env_on)):
        rj = tmp_path / f"r{k}.json"
        res = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(EXAMPLE), "--report-json", str(rj), "--quiet"],
                             cwd=ROOT, env={**_env(), **env}, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        outs.append(rj.read_bytes())
    assert len(list((tmp_path / "c").glob("pack-*.cache"))) == 1
    assert outs[0] == outs[1] == outs[2]


def _env() -> dict:
    import os
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMCONFLICT_CACHE")}


def test_yaml_errors_keep_pyyamls_wording_at_the_same_place():
    from engine.core.errors import InputError
    with pytest.raises(InputError) as exc:
        yamlloc.load_yaml("x.yaml", "a: *nope\n")
    assert exc.value.render().startswith("x.yaml:1:4: error: YAML syntax: found undefined alias 'nope'")
