"""Output files that never lie: every command that writes files claims its
output paths here before any work, and writes them all together at the end.

* `claim(flag, path)` checks a path at once and raises `OutputError` (exit
  status 2) for a directory, a missing parent folder, a place that cannot be
  written, a FIFO, device or other non-regular file, or a second output naming
  the same file. `-` is standard output (one output at a time).
* `write({path: data})` writes every file to a temporary file beside its target
  and renames them into place only when all were written: if one write fails
  (disk full, ...) no target is changed and every temporary is removed. A
  symlink target is written through to the file it points at (the link stays
  a link); an existing file keeps its permission bits.
"""
from __future__ import annotations

import os
import signal
import stat
import sys
import tempfile

STDOUT = "-"


class OutputError(Exception):
    """An output path that cannot be written (exit status 2)."""

    def __init__(self, message: str, hint: str = ""):
        self.message = message
        self.hint = hint
        super().__init__(message)

    def render(self) -> str:
        text = f"memconflict: error: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


def _write(fh, data) -> None:
    """Write one output's bytes, a binary model (engine.core.dumpio.ModelFile, written in
    place), or its pieces in order (an iterable, made as it is written); a seam: the
    tests make it fail like a full disk."""
    from engine.core.dumpio import write_data
    write_data(fh, data)
    fh.flush()
    os.fsync(fh.fileno())


class Outputs:
    """The output paths of one command, checked up front and written all or nothing."""

    def __init__(self) -> None:
        self._claims: dict[str, tuple[str, str]] = {}     # path as given → (flag, real target)
        self._stdout_flag: str | None = None
        self._early: list[str] = []         # temporaries of staged outputs not yet written

    @property
    def uses_stdout(self) -> bool:
        return self._stdout_flag is not None

    def text_stream(self):
        """Where a command's human-readable text goes: stderr when stdout carries an output."""
        return sys.stderr if self.uses_stdout else sys.stdout

    def claim(self, flag: str, path: str | None) -> None:
        if path is None:
            return
        if path == STDOUT:
            if self._stdout_flag is not None:
                raise OutputError(f"{flag} -: standard output is already taken by {self._stdout_flag} -",
                                  "only one output may be written to standard output; give the other a file name")
            self._stdout_flag = flag
            self._claims[path] = (flag, STDOUT)
            return
        real = _check_target(flag, path)
        for other, (oflag, oreal) in self._claims.items():
            if oreal != STDOUT and _same_file(real, oreal):
                raise OutputError(f"{flag} '{path}' and {oflag} '{other}' name the same file",
                                  "give each output its own file")
        self._claims[path] = (flag, real)

    def stage(self, path: str, data) -> "bytes | Staged":
        """Write one output's temporary file now (its data need not stay in memory until
        `write`, which renames it with the others); standard output's data is kept as bytes.
        A command that stages calls `discard` when it ends without `write`."""
        flag, real = self._claims[path]
        if real == STDOUT:
            return data if isinstance(data, (bytes, bytearray)) else b"".join(data)
        tmp = self._write_temporary(path, real, data)
        self._early.append(tmp)
        return Staged(tmp)

    def discard(self) -> None:
        """Remove the temporaries of staged outputs that were never written."""
        for tmp in self._early:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        self._early = []

    def _write_temporary(self, path: str, real: str, data) -> str:
        folder = os.path.dirname(real) or "."
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".tmp", dir=folder)
        except OSError as exc:
            raise OutputError(f"cannot write '{path}': {exc.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as fh:
                _write(fh, data)
            os.chmod(tmp, _mode_for(real))
        except BaseException as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise OutputError(f"cannot write '{path}': {exc.strerror or exc}") from None
            raise
        return tmp

    def write(self, outputs: list[tuple[str, bytes]]) -> None:
        """Write every claimed output; all targets change together, or none does. An
        output's data is bytes, an iterable of them (written as it is made), or what
        `stage` returned for it."""
        staged: list[tuple[str, str, str]] = []    # (temporary, real target, path as given)
        stdout_data: bytes | None = None
        try:
            for path, data in outputs:
                flag, real = self._claims[path]
                if real == STDOUT:
                    stdout_data = data if isinstance(data, (bytes, bytearray)) else b"".join(data)
                    continue
                if isinstance(data, Staged):
                    staged.append((data.path, real, path))
                    self._early.remove(data.path)
                    continue
                staged.append((self._write_temporary(path, real, data), real, path))
            # Note [renames together]: Ctrl-C is held back while the targets are renamed
            # (microseconds), so an interrupt leaves all of them or none of them changed.
            with _HeldSigint():
                for tmp, real, path in staged:
                    try:
                        os.replace(tmp, real)
                    except OSError as exc:
                        raise OutputError(f"cannot write '{path}': {exc.strerror}") from None
                    staged = [s for s in staged if s[0] != tmp]
        finally:
            for tmp, _, _ in staged:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            self.discard()          # staged outputs this write did not name
        if stdout_data is not None:
            sys.stdout.flush()
            out = getattr(sys.stdout, "buffer", None)
            if out is not None:
                out.write(stdout_data)
                out.flush()
            else:
                sys.stdout.write(stdout_data.decode("utf-8", errors="replace"))
                sys.stdout.flush()


class Staged:
    """An output whose temporary file `stage` has written."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path


class _HeldSigint:
    """SIGINT noted, not acted on, inside the block; afterwards the previous handler gets it.

    Note [held interrupt]: blocking SIGINT with the calling thread's signal mask holds it
    only while no other thread leaves it unblocked: a process-directed signal goes to any
    thread that accepts it, and Python then runs the handler (a KeyboardInterrupt) in the main
    thread at its next check, in the middle of the renames. A handler that only notes the
    signal is safe wherever and whenever it runs; the previous handler gets the signal here,
    once the renames are done (an ignored SIGINT, as in a shell's background job, stays
    ignored). Off the main thread, where handlers cannot be set, the signal mask is the
    fallback."""

    def __enter__(self):
        self.seen, self.mask = False, None
        try:
            self.previous = signal.signal(signal.SIGINT, self._note)
        except (ValueError, OSError, AttributeError):       # not the main thread
            self.previous = None
            try:
                self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            except (AttributeError, OSError, ValueError):
                pass
        return self

    def _note(self, signum, frame) -> None:
        self.seen = True

    def __exit__(self, *exc) -> None:
        if self.mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
        if self.previous is None:
            return
        signal.signal(signal.SIGINT, self.previous)
        if self.seen and callable(self.previous):
            self.previous(signal.SIGINT, None)          # Python's default raises KeyboardInterrupt


def _check_target(flag: str, path: str) -> str:
    """The real file `path` writes to (symlinks followed), or OutputError."""
    shown = f"{flag} '{path}'"
    if path == "" or path.endswith(os.sep):
        raise OutputError(f"{shown} is a folder, not a file", "name a file in it, e.g. out/graph.pbtxt")
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{shown} cannot be written: {exc.strerror}", "check the path") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{shown} is a folder, not a file", f"name a file in it, e.g. {os.path.join(path, 'out.pbtxt')}")
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                    else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise OutputError(f"{shown} is {kind}; outputs are written only to regular files",
                              "name a regular file, or '-' for standard output")
        if not os.access(real, os.W_OK):
            raise OutputError(f"{shown} is not writable", "check its permissions, or choose another file")
    folder = os.path.dirname(real) or "."
    if not os.path.isdir(folder):
        what = "does not exist" if not os.path.exists(folder) else "is not a folder"
        raise OutputError(f"{shown}: folder '{os.path.dirname(path) or folder}' {what}",
                          f"create it first (mkdir -p {os.path.dirname(path) or folder})")
    try:     # the one honest test of a writable place (/proc, read-only mounts, permissions)
        fd, probe = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".probe", dir=folder)
    except OSError as exc:
        raise OutputError(f"{shown} cannot be written: {exc.strerror} in folder '{folder}'",
                          "choose a folder you can write to") from None
    os.close(fd)
    os.unlink(probe)
    return real


def _same_file(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _mode_for(real: str) -> int:
    try:
        return stat.S_IMODE(os.stat(real).st_mode)     # an existing file keeps its permissions
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask

