"""The per-mode conveniences of :class:`~trustjudge.Judge`, read from the mode registry.

Every mode the registry knows (built-in, registered with :func:`~trustjudge.register_mode`, or an installed
plug-in) gives a judge two attributes, named after the mode with ``-`` written ``_``:

- ``judge.<mode>(items, *options, progress=None, mapping=None, **options)``: the mode's records for ``items``,
  as ``judge.run("<mode>", items, ...)`` gives them (``judge.score(items, scale=100)``);
- ``judge.<mode>_task(*options, **options)``: the mode's task, as ``judge.task("<mode>", ...)`` builds it.

A mode's options are the fields of its options dataclass (:attr:`~trustjudge.Mode.options`): by keyword, or by
position in the order the dataclass declares them, as its constructor takes them
(``judge.criteria(items, criteria)``, ``judge.compare_task("cot", 0.1)``). Nothing here names a mode: a plug-in's
``relevance`` mode is ``judge.relevance(items)`` with no change to trustjudge. The attributes of :class:`Judge`
itself come first, so a mode named like one of its verbs (``run``, ``audit``) is reached through
``judge.run(name, ...)`` alone.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar

from .engine._engine import ProgressFn
from .errors import ConfigError
from .io._sources import Mapped
from .modes._base import Task
from .modes._records import RecordBase
from .modes._registry import MODES, Mode, get_mode, registered_modes

__all__ = ["DEPRECATED", "ModeRun", "ModeTask", "Runs", "convenience", "convenience_names", "keyword_options",
           "method_name"]

R = TypeVar("R", bound=RecordBase)

DEPRECATED: dict[str, str] = {"compare_criteria": "criteria_compare"}
"""Older spellings of a convenience, by the name that replaced it (each use warns: a ``DeprecationWarning``)."""


class Runs(Protocol):
    """What a convenience calls: a judge's :meth:`~trustjudge.Judge.run` and :meth:`~trustjudge.Judge.task`."""

    def run(self, task: Task | str, items: Any, *, progress: ProgressFn | bool | None = None,
            mapping: Mapped = None, **options: Any) -> Iterator[RecordBase]: ...

    def task(self, mode: str, /, *args: Any, **options: Any) -> Task: ...


def method_name(mode: str) -> str:
    """The name of ``mode``'s convenience on a judge: its name with ``-`` as ``_`` (``criteria_compare``)."""
    return mode.replace("-", "_")


def _described(mode: Mode, what: str) -> str:
    """A convenience's docstring: what it does, the mode's summary and its options with their help."""
    fields = [f for f in dataclasses.fields(mode.options) if f.init]
    lines = [what, "", mode.summary] if mode.summary else [what]
    if fields:
        lines += ["", "Options (by keyword, or by position in this order):"]
        lines += [f"    {f.name}: {f.metadata.get('help', '')}".rstrip() for f in fields]
    return "\n".join(lines)


class ModeRun(Generic[R]):
    """``judge.<mode>(items, *options, progress=None, mapping=None, **options)``: the mode's records, in input
    order, through :meth:`~trustjudge.Judge.run` (``items``, ``progress`` and ``mapping`` as there)."""

    def __init__(self, judge: Runs, mode: Mode) -> None:
        self._judge = judge
        self.mode = mode
        """The mode it runs."""
        self.__name__ = method_name(mode.name)
        self.__doc__ = _described(mode, f"Judge ``items`` in the {mode.name} mode: "
                                        f"``judge.run({mode.name!r}, items, **options)``.")

    def __call__(self, items: Any, /, *args: Any, progress: ProgressFn | bool | None = None, mapping: Mapped = None,
                 **options: Any) -> Iterator[R]:
        task = self._judge.task(self.mode.name, *args, **options)
        return self._judge.run(task, items, progress=progress, mapping=mapping)  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"<judge.{self.__name__}: the {self.mode.name} mode's records (judge.run({self.mode.name!r}, ...))>"


class ModeTask:
    """``judge.<mode>_task(*options, **options)``: the mode's task with the judge's settings
    (:meth:`~trustjudge.Judge.task`)."""

    def __init__(self, judge: Runs, mode: Mode) -> None:
        self._judge = judge
        self.mode = mode
        """The mode whose task it builds."""
        self.__name__ = f"{method_name(mode.name)}_task"
        self.__doc__ = _described(mode, f"The {mode.name} mode's task: ``judge.task({mode.name!r}, **options)``.")

    def __call__(self, *args: Any, **options: Any) -> Task:
        return self._judge.task(self.mode.name, *args, **options)

    def __repr__(self) -> str:
        return f"<judge.{self.__name__}: the {self.mode.name} mode's task (judge.task({self.mode.name!r}, ...))>"


def _mode_called(name: str) -> str | None:
    """The registered or installed mode whose convenience is ``name`` (registered ones first: nothing loads)."""
    for found in (registered_modes(), MODES):  # MODES adds the installed plug-ins, by name only
        for mode in found:
            if method_name(mode) == name:
                return mode
    return None


def convenience(judge: Runs, name: str) -> ModeRun[RecordBase] | ModeTask | None:
    """``judge``'s convenience called ``name`` (``score``, ``score_task``, a plug-in's ``relevance``), or ``None``
    where no mode has that name; an older spelling (:data:`DEPRECATED`) warns and gives its replacement."""
    if name in DEPRECATED:
        warnings.warn(f"Judge.{name} is deprecated: use Judge.{DEPRECATED[name]} (the mode's name, "
                      "- written _)", DeprecationWarning, stacklevel=3)
        name = DEPRECATED[name]
    if (mode := _mode_called(name)) is not None:
        return ModeRun(judge, get_mode(mode))
    if name.endswith("_task") and (mode := _mode_called(name[:-len("_task")])) is not None:
        return ModeTask(judge, get_mode(mode))
    return None


def convenience_names() -> list[str]:
    """The conveniences of every mode the registry knows (installed plug-ins included, none loaded)."""
    return [f"{method_name(mode)}{suffix}" for mode in MODES for suffix in ("", "_task")]


def keyword_options(mode: Mode, args: tuple[Any, ...], options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the positional ``args`` named: the mode's option fields in their declared order."""
    if not args:
        return options
    names = [f.name for f in dataclasses.fields(mode.options) if f.init]
    if len(args) > len(names):
        raise ConfigError(f"mode {mode.name!r} takes at most {len(names)} options by position "
                          f"({', '.join(names)}), got {len(args)}")
    named = dict(zip(names, args))
    twice = sorted(set(named) & set(options))
    if twice:
        raise ConfigError(f"mode {mode.name!r}: option {twice[0]!r} given by position and by keyword")
    return {**named, **options}
