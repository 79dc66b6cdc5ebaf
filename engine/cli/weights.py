"""`run --option ge.externalWeight=1|2 --out OUT`: the external-weight export of GraphManager::Build
(engine/varmgr/export.py), its weight files written into OUT's folder `weight/` together with
the command's other outputs (engine/cli/outputs.py): all or none, and a `weight/` folder the
command made is removed again when the write fails.
"""
from __future__ import annotations

import os
import sys

from engine.core.errors import InputError, Loc, PassFailure, Problem


class WeightExport:
    """What one run exports; `mode` None = the option is unset or 0."""

    def __init__(self, ctx, out: str | None):
        cfg = ctx.pack.configs.get("var_policy")
        self.ext = getattr(cfg.policy, "external", None) if cfg is not None else None
        self.mode = self.ext.export.mode(ctx.options.get(self.ext.export.option)) if self.ext else None
        self.out = out
        self.files: list[tuple[str, bytes]] = []
        self.converted = []
        if self.mode is not None and out == "-":
            raise InputError(Problem(Loc("--out"), f"{self.ext.export.option} writes weight files beside --out, "
                                     "which is standard output here", "give --out a file name"))

    def apply(self, ctx) -> None:
        """Build's ConvertConstToFileConst, before the variables are placed (as in GE)."""
        if self.mode is None:
            return
        if self.out is None:
            sys.stderr.write(f"memconflict: note: {self.ext.export.option} is set but there is no --out: "
                             "no weights exported\n")
            return
        from engine.varmgr.export import export_weights
        from engine.varmgr.records import VarError
        weight_dir = ctx.options.get(self.ext.export.weight_dir_option) or None
        try:
            self.files, self.converted = export_weights(ctx.model, self.ext, self.mode, self.out, weight_dir)
        except VarError as exc:
            raise PassFailure("external weight export", exc.message, exc.var) from None

    def write(self, files, outputs: list[tuple[str, bytes]]) -> None:
        """Claim the weight files (making their folder) and write everything together."""
        made = self._make_folder(os.path.dirname(self.files[0][0]) or ".") if self.files else []
        try:
            for path, _ in self.files:
                files.claim("weight file", path)
            files.write(outputs + self.files)
        except BaseException:
            for folder in reversed(made):
                try:
                    os.rmdir(folder)
                except OSError:
                    pass
            raise

    @staticmethod
    def _make_folder(folder: str) -> list[str]:
        """CreateDirectory (parents too); returns the folders made, outermost first."""
        made = []
        path = os.path.abspath(folder)
        while not os.path.isdir(path) and not os.path.lexists(path):
            made.append(path)
            path = os.path.dirname(path)
        made.reverse()
        for p in made:
            try:
                os.mkdir(p)
            except OSError as exc:
                from engine.cli.outputs import OutputError
                raise OutputError(f"cannot make the weight folder '{folder}': {exc.strerror}") from None
        return made

    def summary(self) -> str | None:
        if not self.converted:
            return None
        names = sorted({c.file for c in self.converted})
        return (f"external weights ({self.ext.export.option}: {self.mode}): {len(self.converted)} constants -> "
                f"FileConstant, {len(names)} file(s) in {os.path.dirname(self.files[0][0]) or '.'}: "
                + ", ".join(names))


def refuse_in_batch(ctx) -> None:
    """Several graphs (`--out-dir`): the export is not done, and saying so beats ignoring it."""
    export = WeightExport(ctx, None)
    if export.mode is not None:
        raise InputError(Problem(Loc(f"--option {export.ext.export.option}"),
                                 f"{export.ext.export.option} is not supported when running several graphs",
                                 "run each graph on its own with --out OUT.pbtxt"))
