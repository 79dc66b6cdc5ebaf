import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hashlib
import os
import shutil

import pytest


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the golden decision files (*.golden) from this run instead of comparing")


def pytest_configure(config):
    # the tests neither read nor fill the user's compiled-pack cache (engine/pack/cache.py);
    # tests/test_pack_cache.py turns it on in a folder of its own
    os.environ["MEMCONFLICT_CACHE"] = "off"
    _share_pack_loads()


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture(scope="session")
def default_pack():
    """The shipped pack, loaded once per test session. Read it, never edit it: a test that
    changes a pack edits a copy (pack_copy) and loads that."""
    from harness import shared_pack

    return shared_pack()


@pytest.fixture
def pack_copy(tmp_path, monkeypatch):
    """A copy of the default pack under tmp_path/pack, with the cwd at tmp_path."""
    from engine.core.resources import default_pack_dir

    dst = tmp_path / "pack"
    shutil.copytree(default_pack_dir(), dst)
    monkeypatch.chdir(tmp_path)
    return dst


# Note [shared pack loads]: loading a pack takes 0.6-1 s, and the CLI-driven tests (run, diff,
# vars) load the same unchanged pack again on every call. Within the test process,
# engine.passes.catalog.load_pack is wrapped so that a second load of the same folder, from the
# same working directory (locations are shown relative to it) and with byte-identical files
# (the folder's and those of sibling packs, which an overlay may read) returns the pack loaded
# first. An edited copy differs in its bytes and is loaded afresh; a failed load is never kept.
# Packs are not changed after loading (module-level PACKs are already shared by many runs).
# MEMCONFLICT_TEST_PACK_CACHE=0 turns this off.
_LOADED: dict = {}


def _pack_digest(folder: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    dirs = [folder] + sorted(d for d in folder.parent.iterdir() if d != folder and (d / "pack.yaml").is_file())
    for d in dirs:
        for f in sorted(p for p in d.rglob("*") if p.is_file()):
            h.update(f"{f}\0{f.stat().st_size}\0".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _share_pack_loads() -> None:
    if os.environ.get("MEMCONFLICT_TEST_PACK_CACHE") == "0":
        return
    from engine.core.resources import default_pack_dir
    from engine.passes import catalog

    load = catalog.load_pack
    if getattr(load, "shared", False):
        return

    def shared_load_pack(path=None):
        folder = Path(path) if path is not None else default_pack_dir()
        if not (folder / "pack.yaml").is_file():
            return load(path)                   # not a pack: let the loader report it
        key = (os.getcwd(), str(path), str(folder.resolve()), _pack_digest(folder.resolve()))
        if key not in _LOADED:
            _LOADED[key] = load(path)
        return _LOADED[key]

    shared_load_pack.shared = True
    shared_load_pack.__doc__ = load.__doc__
    catalog.load_pack = shared_load_pack
