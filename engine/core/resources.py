"""Where the shipped rule packs, grammars and report templates live.

In a source checkout (or an editable install) they are the top-level folders
`rules/`, `grammars/`, `reports/`; a wheel carries them as `engine/_data/<name>`.
"""
from __future__ import annotations

import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent.parent      # the engine package


def data_dir(name: str) -> Path:
    installed = _HERE / "_data" / name
    if installed.is_dir():
        return installed
    return _HERE.parent / name


def default_pack_dir() -> Path:
    return data_dir("rules") / "ge"


def grammar_path(name: str) -> Path:
    return data_dir("grammars") / name


def user_cache_dir(part: str = "") -> Path | None:
    """memconflict's folder in the user's cache (None when turned off): `$MEMCONFLICT_CACHE_DIR`,
    else `$XDG_CACHE_HOME/memconflict`, else `~/.cache/memconflict`; `MEMCONFLICT_CACHE=off`
    turns every cache off (the compiled-pack cache, engine/pack/cache.py; compiled templates)."""
    if os.environ.get("MEMCONFLICT_CACHE", "").lower() in ("off", "0", "no", "false"):
        return None
    explicit = os.environ.get("MEMCONFLICT_CACHE_DIR")
    if explicit:
        base = Path(explicit)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")) / "memconflict"
    return base / part if part else base


def template_cache(part: str):
    """A jinja2 bytecode cache in the user cache folder (None when caching is off or the
    folder cannot be made): compiled templates are reused across runs."""
    folder = user_cache_dir(part)
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    from jinja2 import FileSystemBytecodeCache
    return FileSystemBytecodeCache(str(folder))


# ---- which pack a command uses (Note [pack discovery]) ----------------------------
ENV_RULES = "MEMCONFLICT_RULES"
CONFIG_FILES = ("pyproject.toml", "memconflict.toml")

# Note [pack discovery]
# ~~~~~~~~~~~~~~~~~~~~~
# Like a linter's configuration: `--rules DIR` (or a command's PACK argument), else
# the environment variable MEMCONFLICT_RULES, else `[tool.memconflict] rules = "..."`
# in the nearest pyproject.toml or memconflict.toml found upwards from the working
# directory (relative to that file), else the installed default pack. A configured
# folder that is missing or holds no pack.yaml is an error naming where it was set.


def find_pack(explicit: str | Path | None, option: str = "--rules") -> tuple[Path, str]:
    """The pack folder a command uses and where it was chosen (`--rules`, the env
    var, `pyproject.toml:LINE`, or `default`)."""
    from engine.core.errors import InputError, Loc, Problem
    if explicit is not None:
        folder, loc = Path(explicit), Loc(option)
        if folder.is_file():
            folder = folder.parent
    elif os.environ.get(ENV_RULES):
        folder, loc = Path(os.environ[ENV_RULES]), Loc(f"${ENV_RULES}")
    else:
        found = _config_rules(Path.cwd())
        if found is None:
            return default_pack_dir(), "default"
        folder, loc = found
    if not folder.is_dir():
        raise InputError(Problem(loc, f"rule pack folder '{folder}' does not exist",
                                 "name a folder holding pack.yaml (e.g. rules/ge), or make one with "
                                 "`memconflict rules init DIR`"))
    if not (folder / "pack.yaml").is_file():
        raise InputError(Problem(loc, f"'{folder}' is not a rule pack: no pack.yaml in it",
                                 "a pack is a folder with pack.yaml (name, version, schema_version, include)"))
    return folder, str(loc)


def _config_rules(start: Path):
    """(folder, Loc of the `rules` line) from the nearest config file upwards that sets
    tool.memconflict.rules, or None."""
    import tomllib

    from engine.core.errors import InputError, Loc, Problem
    for d in (start, *start.parents):
        for name in CONFIG_FILES:
            cfg = d / name
            if not cfg.is_file():
                continue
            text = cfg.read_text(encoding="utf-8")
            if "memconflict" not in text:
                continue
            try:
                data = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise InputError(Problem(Loc(str(cfg)), f"invalid TOML: {exc}",
                                         "fix the file, or pass --rules DIR")) from None
            table = data.get("tool", {}).get("memconflict")
            if not isinstance(table, dict) or "rules" not in table:
                continue
            loc = Loc(str(cfg), _key_line(text, "rules"))
            if not isinstance(table["rules"], str) or not table["rules"]:
                raise InputError(Problem(loc, "[tool.memconflict] rules must be a folder path string",
                                         'e.g. rules = "rules/ge"'))
            return cfg.parent / table["rules"], loc
    return None


def _key_line(text: str, key: str) -> int:
    """The line of `key = ...` inside the [tool.memconflict] table (0: not found)."""
    inside = False
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith("["):
            inside = s.replace(" ", "") in ("[tool.memconflict]",)
        elif inside and s.split("=", 1)[0].strip() == key:
            return n
    return 0
