"""The `memconflict` command line: one module per command group.

Exit status (EXIT_STATUSES, also in `--help` and README.md): 0 ran; 1 a pass
failed where GE returns a failure; 2 unusable input or arguments (output paths
included, checked before any work); 3 `run --fail-on` findings; 4 internal
error (traceback saved to a file); 130 interrupted. Outputs are written only
after every step succeeded, all together (engine/cli/outputs.py), so no partial
file is left behind.
"""
from __future__ import annotations

import argparse
import sys

from engine import __version__
from engine.core.errors import InputError, PassFailure
from engine.cli import diff, rules, run, runtime_mem, vars
from engine.cli.common import CURRENT_GRAPH, _Parser
from engine.cli.outputs import OutputError

EXIT_STATUSES = """\
exit status:
  0    ran (warnings included)
  1    a pass failed where GE fails (the message names the node); diff: a --fail-on gate holds
  2    unusable input or arguments, an output path that cannot be written, or a failed write
       (no output is changed)
  3    run --fail-on CODE|insertions|warnings: the run has such findings (outputs still written)
  4    internal error or out of memory (the traceback is saved to a file in the temp folder)
  130  interrupted (Ctrl-C); no output file is left behind
"""


class _VersionShown(Exception):
    pass


class _Version(argparse.Action):
    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and the default pack's name and version")

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        raise _VersionShown()


def version_text() -> str:
    from engine.passes.catalog import load_pack
    pack = load_pack(None)
    return f"memconflict {__version__}\ndefault pack: {pack.name} {pack.version}"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="memconflict", description="Find and fix memory conflicts in GE graphs, by rule packs.",
                epilog=EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run.add_commands(sub)
    rules.add_commands(sub)
    vars.add_commands(sub)
    diff.add_command(sub)
    # Note [runtime group]: a minimal `runtime` group for memtrace/placement; the group itself
    # belongs to engine/cli/runtime.py (cond/events/io-reuse), which calls runtime_mem.register.
    rt = sub.add_parser("runtime", help="GE's runtime side: allocator traces, placement copies")
    runtime_mem.register(rt.add_subparsers(dest="runtime_command", required=True, parser_class=_Parser))
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _VersionShown:
        return 0
    try:
        return args.func(args)
    except InputError as exc:
        sys.stderr.write(exc.render() + "\n")
        return 2
    except OutputError as exc:
        sys.stderr.write(exc.render() + "\n")
        return 2
    except PassFailure as exc:
        sys.stderr.write(f"memconflict: {exc}\n")
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("memconflict: interrupted\n")
        return 130
    except MemoryError:
        graph = CURRENT_GRAPH.get("path")
        where = f" on graph {graph}" if graph else ""
        if "nodes" in CURRENT_GRAPH:
            where += f" ({CURRENT_GRAPH['nodes']} nodes)"
        elif graph:
            where += " (while loading it; node count not known)"
        sys.stderr.write(f"memconflict: out of memory{where}; try a machine with more memory "
                         f"or fewer passes (--passes)\n")
        return 4
    except Exception as exc:
        path = save_traceback(exc)
        msg = " ".join(str(exc).split())
        sys.stderr.write(f"memconflict: internal error: {type(exc).__name__}: {msg} "
                         f"(traceback saved to {path}; please report it)\n")
        return 4


def save_traceback(exc: BaseException) -> str:
    """Write the traceback of `exc` to a new file in the temp folder; its path."""
    import os
    import tempfile
    import traceback
    text = f"memconflict {__version__}\nargv: {sys.argv!r}\n\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        fd, path = tempfile.mkstemp(prefix="memconflict-traceback-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as err:
        return f"<not saved: {err.strerror}>"
    return path
