"""Where a setting comes from when a call or a command does not give it: the environment, then the
``[tool.trustjudge]`` table of the nearest ``pyproject.toml`` that has one (from the working folder up).

What is given explicitly (an argument, a command-line option) always wins; then ``TRUSTJUDGE_JUDGE`` /
``TRUSTJUDGE_STORE``; then the project's table::

    [tool.trustjudge]
    judge = "fast"                       # a judge name, or one of the aliases below
    store = "judgments.sqlite"           # relative to the pyproject.toml's folder
    scale = 5                            # the score scale (a top value or a range, "0-5")
    [tool.trustjudge.aliases]
    fast = "llamacpp/smollm2-135m"       # Judge("fast"), --judge fast

An alias is resolved wherever a judge name is taken (an alias naming another is followed). A bad table is
a :class:`~trustjudge.ConfigError` naming the file and the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .backends import DEFAULT_JUDGE
from .errors import ConfigError

__all__ = ["JUDGE_ENV", "STORE_ENV", "Settings", "judge_name", "project_settings", "store_path"]

JUDGE_ENV = "TRUSTJUDGE_JUDGE"
STORE_ENV = "TRUSTJUDGE_STORE"
KEYS = ("judge", "store", "scale", "aliases")


@dataclass(frozen=True)
class Settings:
    """The ``[tool.trustjudge]`` table of a project (all ``None`` / empty where there is none)."""

    path: Path | None = None
    """The pyproject.toml the settings were read from."""
    judge: str | None = None
    store: Path | None = None
    """Resolved against the pyproject.toml's folder."""
    scale: int | str | None = None
    aliases: dict[str, str] = field(default_factory=dict)


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]  # Python 3.11+
    except ImportError:  # Python 3.10: tomli, the same parser under its PyPI name (a dependency there)
        import tomli as tomllib
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read as TOML: {exc}") from None
    return data


def _table(path: Path) -> dict[str, Any] | None:
    tool = _load_toml(path).get("tool")
    table = tool.get("trustjudge") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.trustjudge] must be a table")
    return table


def _parse(path: Path, table: dict[str, Any]) -> Settings:
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: field 'tool.trustjudge.{unknown[0]}': unknown setting (the settings are "
                          f"{', '.join(KEYS)})")
    judge, store, scale, aliases = (table.get(k) for k in KEYS)
    for key, value in (("judge", judge), ("store", store)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{path}: field 'tool.trustjudge.{key}': must be a non-empty string, got {value!r}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, str))):
        raise ConfigError(f"{path}: field 'tool.trustjudge.scale': must be a top value (10) or a range ('0-5'), "
                          f"got {scale!r}")
    if aliases is None:
        aliases = {}
    if not isinstance(aliases, dict) or not all(isinstance(v, str) and v for v in aliases.values()):
        raise ConfigError(f"{path}: field 'tool.trustjudge.aliases': must be a table of judge names "
                          '(fast = "llamacpp/smollm2-135m")')
    return Settings(path, judge, (path.parent / store) if store else None, scale, dict(aliases))


def project_settings(start: Path | None = None) -> Settings:
    """The ``[tool.trustjudge]`` table of the nearest ``pyproject.toml`` from ``start`` (default: the working
    folder) up that has one; empty settings where none does."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            table = _table(candidate)
            if table is not None:
                return _parse(candidate, table)
    return Settings()


def judge_name(given: str | None, settings: Settings | None = None) -> str:
    """The judge name to use: ``given``, else ``TRUSTJUDGE_JUDGE``, else the project's ``judge``, else the
    default judge; an alias of the project's table is replaced by what it names."""
    settings = settings if settings is not None else project_settings()
    name = given or os.environ.get(JUDGE_ENV) or settings.judge or DEFAULT_JUDGE
    seen: list[str] = []
    while name in settings.aliases:
        if name in seen:
            raise ConfigError(f"{settings.path}: field 'tool.trustjudge.aliases': the aliases "
                              f"{' -> '.join([*seen, name])} name each other")
        seen.append(name)
        name = settings.aliases[name]
    return name


def store_path(given: str | Path | None, settings: Settings | None = None) -> Path | None:
    """The store file to use: ``given``, else ``TRUSTJUDGE_STORE``, else the project's ``store``, else ``None``
    (the default store)."""
    if given is not None:
        return Path(given)
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env)
    return (settings if settings is not None else project_settings()).store


def default_scale(settings: Settings | None = None) -> int | str | None:
    """The project's ``scale``, or ``None``."""
    return (settings if settings is not None else project_settings()).scale
