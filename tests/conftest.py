import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import shutil

import pytest


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the golden decision files (*.golden) from this run instead of comparing")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture
def pack_copy(tmp_path, monkeypatch):
    """A copy of the default pack under tmp_path/pack, with the cwd at tmp_path."""
    from engine.core.resources import default_pack_dir

    dst = tmp_path / "pack"
    shutil.copytree(default_pack_dir(), dst)
    monkeypatch.chdir(tmp_path)
    return dst
