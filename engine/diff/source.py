"""Where the two packs of a diff come from: a folder, or `REV:path` in the
current git repository (read with `git ls-tree` / `git show` into a temporary
folder; nothing is checked out).

Note [snapshot]: a folder is copied to a temporary folder too, and the pack is
loaded from the copy. An overlay is copied with its bases (`base:`, at the same
relative places; for `REV:path` read at the same revision). The diff reads the pack's YAML more than once (the loader,
the located tables, workers that load it again); a pack being edited meanwhile
would otherwise be diffed as a mix of two versions.

A `PackSource` remembers how to show its files: the copy's paths are printed as
the user named the pack — `rules/ge/rw.yaml:12`, `REV:rules/ge/rw.yaml:12`.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.errors import InputError, Loc, Problem, display_path
from engine.pack.overlay import base_chain, base_of


@dataclass
class PackSource:
    spec: str                 # as given on the command line
    folder: Path              # where the pack's files are read from (a temporary copy)
    prefix: str = ""          # display_path() of the copy's root ...
    shown: str = ""           # ... and what replaces it: "REV:" or "rules/"
    label: str = ""           # the pack folder as shown: "rules/ge", "REV:rules/ge"
    tmp: str | None = None
    pack: object = field(default=None, repr=False)

    def show(self, file: str) -> str:
        """A file name as the engine prints it → as the user should read it."""
        if self.prefix and file.startswith(self.prefix + "/"):
            return self.shown + file[len(self.prefix) + 1:]
        return file

    def show_text(self, text: str) -> str:
        """Free text (a diagnostic, a reason) citing the copy's files."""
        return text.replace(self.prefix + "/", self.shown) if self.prefix and self.prefix in text else text

    def show_loc(self, loc: Loc | None) -> str:
        if loc is None:
            return ""
        return self.show(loc.file) + (f":{loc.line}" if loc.line > 0 else "")

    def close(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _git(args: list[str], cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True)


def _bad(spec: str, message: str, hint: str) -> InputError:
    return InputError(Problem(Loc(spec), message, hint))


def open_source(spec: str) -> PackSource:
    """A folder if `spec` names one, else `REV:path`."""
    if Path(spec).name == "pack.yaml" and Path(spec).is_file():
        return _snapshot(spec, Path(spec).parent)
    if Path(spec).is_dir():
        return _snapshot(spec, Path(spec))
    rev, sep, path = spec.partition(":")
    if not sep or not rev:
        raise _bad(spec, f"'{spec}' is neither a pack folder nor REV:path",
                   "give a folder holding pack.yaml, or a git revision and path such as HEAD~1:rules/ge")
    return _from_git(spec, rev, path.strip("/") or ".")


def _snapshot(spec: str, folder: Path) -> PackSource:
    """Copy the pack and its bases (`base:`), keeping their relative places."""
    chain = [p.resolve() for p in base_chain(folder)] or [folder.resolve()]
    top = Path(os.path.commonpath(chain))
    tmp = tempfile.mkdtemp(prefix="memconflict-diff-")
    try:
        copy = Path(tmp, top.name or "pack")
        for src in chain:
            dst = copy / src.relative_to(top)
            dst.mkdir(parents=True, exist_ok=True)
            for f in sorted(src.iterdir()):      # a pack is one folder of files
                if f.is_file():
                    shutil.copyfile(f, dst / f.name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shown = display_path(top) + "/" if top != folder.resolve() else display_path(folder) + "/"
    return PackSource(spec, copy / folder.resolve().relative_to(top), display_path(copy), shown,
                      display_path(folder), tmp)


def _from_git(spec: str, rev: str, path: str) -> PackSource:
    top = _git(["rev-parse", "--show-toplevel"])
    if top.returncode != 0:
        raise _bad(spec, "REV:path needs a git repository, and the working directory is not in one",
                   "run memconflict diff inside the repository, or give pack folders")
    root = top.stdout.decode().strip()
    ok = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=root)
    if ok.returncode != 0:
        raise _bad(spec, f"unknown git revision '{rev}'", "check it with `git log --oneline` (e.g. HEAD~1, a tag, a hash)")
    commit = ok.stdout.decode().strip()
    # paths in the spec are relative to the repository root (as in `git show REV:path`)
    names = _ls_tree(root, commit, path)
    if not names:
        raise _bad(spec, f"revision '{rev}' has no folder '{path}'",
                   f"list what it has with `git ls-tree --name-only {rev} -- {Path(path).parent}`")
    tmp = tempfile.mkdtemp(prefix="memconflict-diff-")
    try:
        todo, done = [path], set()
        while todo:                      # the pack, then its bases (`base:`) at the same revision
            folder = todo.pop()
            done.add(folder)
            for name in names if folder == path else _ls_tree(root, commit, folder):
                blob = _git(["show", f"{commit}:{name}"], cwd=root)
                if blob.returncode != 0:
                    raise _bad(spec, f"cannot read '{name}' at revision '{rev}'", blob.stderr.decode().strip())
                target = Path(tmp, name)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(blob.stdout)
            base = base_of(Path(tmp, folder))
            if base is not None:
                up = os.path.normpath(os.path.join(folder, base))
                if up not in done and not up.startswith(".."):   # outside the repository: the loader says so
                    todo.append(up)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return PackSource(spec, Path(tmp, path), display_path(tmp), f"{rev}:", f"{rev}:{path}", tmp)


def _ls_tree(root: str, commit: str, path: str) -> list[str]:
    listing = _git(["ls-tree", "-r", "-z", "--name-only", commit, "--", path], cwd=root)
    return [n for n in listing.stdout.decode().split("\0") if n] if listing.returncode == 0 else []


def load_source(src: PackSource):
    """Load the pack strictly; errors cite the user's names for its files."""
    from engine.passes.catalog import load_pack

    if not (src.folder / "pack.yaml").is_file():
        raise _bad(src.spec, f"'{src.spec}' is not a rule pack: it has no pack.yaml",
                   "a pack is a folder with pack.yaml (name, version, schema_version, include)")
    try:
        src.pack = load_pack(src.folder)
    except InputError as exc:
        raise InputError([Problem(Loc(src.show(p.loc.file), p.loc.line, p.loc.col), p.message, p.hint)
                          for p in exc.problems]) from None
    return src.pack
