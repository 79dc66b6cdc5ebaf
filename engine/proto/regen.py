"""Regenerate the Python modules of the .proto files in this folder.

    python -m engine.proto.regen            # rewrite engine/proto/*_pb2.py
    python -m engine.proto.regen --check    # exit 1 if a checked-in module is stale

Uses the protoc shipped in grpcio-tools (pinned in pyproject.toml), so the output
is reproducible byte for byte.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent  # the folder holding the `engine` package


def proto_files() -> list[Path]:
    return sorted(HERE.glob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Run protoc on every .proto here; return the generated files (under out_dir)."""
    rel = [str(p.relative_to(ROOT)) for p in proto_files()]
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}", f"--python_out={out_dir}", *rel]
    subprocess.run(cmd, check=True)
    return sorted((out_dir / "engine" / "proto").glob("*_pb2.py"))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    check = "--check" in argv
    with tempfile.TemporaryDirectory() as tmp:
        stale = []
        for gen in generate(Path(tmp)):
            target = HERE / gen.name
            fresh = gen.read_bytes()
            if check:
                if not target.exists() or target.read_bytes() != fresh:
                    stale.append(target.name)
            else:
                target.write_bytes(fresh)
        if stale:
            print("stale generated modules: " + ", ".join(stale) + " (run: python -m engine.proto.regen)")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
