"""The judging modes, registered: what each asks, what it records, and how its task is built from options.

A mode is a frozen :class:`Mode`: its name, its task and record types, its templates (name -> packaged file
and required fields), the fewest responses an item needs, and how its task is built from its options (a
frozen dataclass whose fields carry their help text in ``metadata["help"]``). The built-in modes are the
files of this package (``trustjudge/modes/<name>.py``, each defining ``MODE``), registered when the package
is imported (:func:`register_builtin`), through the same door as third-party ones::

    from trustjudge import Mode, register_mode
    register_mode(Mode("verdict", VerdictTask, VerdictRecord, VerdictOptions, build_verdict))

Installed packages add modes through the entry point group ``trustjudge.modes``: the entry point's name is
the mode's name, its value a :class:`Mode` (or a callable taking no argument that returns one)::

    [project.entry-points."trustjudge.modes"]
    verdict = "my_package.verdict:MODE"

A plug-in is imported only when its name is asked for (:func:`get_mode`, ``MODES[name]``), so a broken one
breaks only that name, with an error naming the entry point; built-in and registered names come first.
``TRUSTJUDGE_MODE_PLUGINS`` pins the plug-in set as ``TRUSTJUDGE_BACKEND_PLUGINS`` does for backends.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, Protocol

from .._plugins import describe, disabled, disabled_message, installed
from ..audit._summary import SummaryMetrics, register_summary
from ..audit._units import UnitReader, register_units, unregister_units
from ..errors import ConfigError
from ._base import PLUGIN_ORIGINS, Task
from ._cascading import Cascading
from ._prompts import Prompts, Scale, read_template
from ._prompts import Protocol as JudgeProtocol
from ._stored import StoredJudgments

__all__ = ["MODES", "PLUGIN_GROUP", "JudgeSettings", "Mode", "TemplateSpec", "builtin_modes", "get_mode",
           "mode_plugins", "option", "register_mode", "registered_modes", "template_spec", "unregister_mode"]

PLUGIN_GROUP = "trustjudge.modes"
"""The entry point group of third-party modes (name: the mode's name; value: ``module:MODE``)."""
PLUGINS_ENV = "TRUSTJUDGE_MODE_PLUGINS"


class JudgeSettings(Protocol):
    """What a mode's task is built from besides its options: the judge's defaults (a :class:`Judge` is one)."""

    @property
    def prompts(self) -> Prompts: ...
    @property
    def scale(self) -> Scale: ...
    @property
    def protocol(self) -> JudgeProtocol: ...
    @property
    def delta(self) -> float: ...
    @property
    def keep_distribution(self) -> bool: ...
    @property
    def closing_mark(self) -> str | None: ...
    def template(self, name: str) -> string.Template:
        """The template ``name`` of a mode (:attr:`Mode.templates`): the user's own, else the mode's file."""
        ...


@dataclass(frozen=True)
class TemplateSpec:
    """A template a mode renders: its file, in the ``templates`` folder of ``package`` (the package that ships
    the mode: ``trustjudge`` for the built-in ones, a plug-in's own for its), and the fields it must have."""

    file: str
    fields: frozenset[str]
    package: str = "trustjudge"

    def load(self, given: str | Path | None = None) -> string.Template:
        """The template: ``given`` (a user's file, or its text), else the packaged file; checked for its fields."""
        return read_template(given, self.file, self.fields, self.package)


def option(default: Any, help: str, *, choices: Sequence[Any] | None = None,  # `help`: click's word for it
           ge: float | None = None, gt: float | None = None, le: float | None = None, lt: float | None = None,
           served: bool = True, **cli: Any) -> Any:
    """A mode option: a dataclass field with ``default`` and its help text in ``metadata["help"]``.

    ``choices`` (the values it may take) and the bounds ``ge``, ``gt``, ``le``, ``lt`` go into the metadata
    under those names, for the interfaces that take options from outside: the service's request schema
    enforces them (422 beyond). ``served=False`` (``metadata["served"]``) keeps an option out of the service's
    requests, which then always use its default: for an option naming a server path, or a cost the service's
    limits do not bound.

    The keywords ``cli`` are more metadata, read by the mode's command (``trustjudge <command>``, built from the
    fields: see :mod:`trustjudge.cli._mode_command`, which also reads ``choices`` and the bounds): ``flag``
    (its name on the command line, default ``--`` and the field's name with dashes), ``metavar`` (how its value
    reads in the help: ``N|LO-HI``), ``parse``
    (``callable(str) -> value``, for a type a command line cannot spell), ``suite`` (the suite file's field
    that supplies it, where the command line does not), ``shown`` (how its default reads in the help, where
    the value's own text would not do), ``cli=False`` (not on the command line: the command keeps its default).
    """
    metadata: dict[str, Any] = {"help": help, **cli}
    if choices is not None:
        metadata["choices"] = tuple(choices)
    metadata.update({name: bound for name, bound in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt))
                     if bound is not None})
    if not served:
        metadata["served"] = False
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Mode:
    """A judging mode: what it asks (its task), what it gives (its record), and how it is built."""

    name: str
    task: type[Task]
    """The task class its :attr:`build` returns."""
    record: type[Any]
    """The record dataclass its task's records are."""
    options: type[Any]
    """A frozen dataclass of the mode's options; each field's ``metadata["help"]`` says what it does."""
    build: Callable[[JudgeSettings, Any], Task]
    """``build(settings, options)``: the task, from the judge's defaults and an :attr:`options` instance."""
    templates: Mapping[str, TemplateSpec] = field(default_factory=dict, hash=False)
    """The templates its prompts come from, by name."""
    min_responses: int = 1
    """The fewest responses an item needs (2 for pairwise modes)."""
    summary: str = ""
    """One line on what the mode judges."""
    command: str | None = None
    """The CLI command that runs it (``criteria --pairwise``), ``None`` for none."""
    route: str | None = None
    """The service route that runs it (``/v1/score``), ``None`` where it is not served."""
    not_served: str | None = None
    """Why the service has no route for it (where :attr:`route` is ``None``)."""
    # -- how the CLI's generic verbs read it (rank --mode, store show) --
    rank_options: Callable[[Sequence[Any], int | str], Mapping[str, Any]] | None = field(default=None, hash=False)
    """``rank_options(items, scale)``: options ``trustjudge rank --mode <name>`` builds its task with from the
    items and rank's ``--scale``, under the suite's (claims: ``match`` where an item has gold claims or a
    reference); ``None``: the suite's alone."""
    stored: StoredJudgments = field(default=StoredJudgments(), hash=False)
    """How ``trustjudge store show`` lists its judgments (default: its task's questions, numbered)."""
    calibration: UnitReader | None = field(default=None, hash=False)
    """Its calibration contract: the classes and units ``trustjudge calibrate --mode <name>`` and
    :meth:`Judge.calibrate` fit on (:class:`~trustjudge.mode_api.LabelUnits` for a verdict over fixed labels);
    ``None``: not calibrated. The built-in modes' units are read by :mod:`trustjudge.audit._trust` itself."""
    cascade: Cascading | None = field(default=None, hash=False)
    """How it cascades (``trustjudge cascade``, :meth:`Judge.cascade`; it needs a :attr:`calibration` too): what one
    verdict is and how items narrow to those still open (:class:`~trustjudge.mode_api.ByResponse`,
    :class:`~trustjudge.mode_api.ByPair`, :class:`~trustjudge.mode_api.ByPart`); ``None``: it does not cascade."""
    summary_metrics: SummaryMetrics | None = field(default=None, hash=False)
    """Its summary (``trustjudge summary``, ``<command> --summary``): the headline values read from each record
    (:class:`~trustjudge.audit._summary.SummaryMetrics`); ``None``: the mode has no summary, and asking for one
    is an error naming the mode."""

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or self.name != self.name.strip():
            raise ConfigError(f"a mode's name is a non-empty word without '/', got {self.name!r}")
        if not (isinstance(self.task, type) and issubclass(self.task, Task)):
            raise ConfigError(f"mode {self.name!r}: task must be a Task subclass, got {self.task!r}")
        if not (dataclasses.is_dataclass(self.record) and dataclasses.is_dataclass(self.options)):
            raise ConfigError(f"mode {self.name!r}: record and options must be dataclasses")
        if self.min_responses < 1:
            raise ConfigError(f"mode {self.name!r}: min_responses must be 1 or more, got {self.min_responses}")

    @property
    def audits(self) -> bool:
        """Whether its task has an audit (defines the :meth:`Task.audit` hook): its command then takes ``--audit``
        and ``--report``."""
        return self.task.audit is not Task.audit

    def option_help(self) -> dict[str, str]:
        """Each option's help text, by field name."""
        return {f.name: str(f.metadata.get("help", "")) for f in dataclasses.fields(self.options)}

    def task_of(self, settings: JudgeSettings, options: Any = None, /, **kwargs: Any) -> Task:
        """The mode's task for a judge: from an :attr:`options` instance, or from keyword options."""
        if options is None:
            try:
                options = self.options(**kwargs)
            except TypeError as exc:
                names = ", ".join(f.name for f in dataclasses.fields(self.options))
                raise ConfigError(f"mode {self.name!r}: {exc} (its options: {names})") from None
        elif kwargs:
            raise ConfigError(f"mode {self.name!r}: pass an options instance or keyword options, not both")
        task = self.build(settings, options)
        if not isinstance(task, self.task):
            raise ConfigError(f"mode {self.name!r} built a {type(task).__name__}, not a {self.task.__name__}")
        return task


_MODES: dict[str, Mode] = {}
_BUILTIN: set[str] = set()


def register_mode(mode: Mode, *, replace: bool = False) -> Mode:
    """Make ``mode`` known by its name (``replace``: over one of that name; built-in modes are never replaced)."""
    if not isinstance(mode, Mode):
        raise ConfigError(f"register_mode takes a trustjudge Mode, got a {type(mode).__name__}")
    if mode.name in _BUILTIN and _MODES.get(mode.name) is not mode:
        raise ConfigError(f"{mode.name!r} is a built-in mode: give yours another name")
    if mode.name in _MODES and not replace and _MODES[mode.name] is not mode:
        raise ConfigError(f"a mode named {mode.name!r} is registered already (pass replace=True to replace it)")
    _MODES[mode.name] = mode
    if mode.calibration is not None and mode.name not in _BUILTIN:
        register_units(mode.name, mode.calibration)
    if mode.summary_metrics is not None:
        register_summary(mode.name, mode.summary_metrics)
    return mode


def register_builtin(mode: Mode) -> Mode:
    """Register one of the package's own modes (a file of :mod:`trustjudge.modes`): never replaced or removed."""
    register_mode(mode)
    _BUILTIN.add(mode.name)
    return mode


def unregister_mode(name: str) -> None:
    """Forget a registered mode (built-in modes stay)."""
    if name in _BUILTIN:
        raise ConfigError(f"{name!r} is a built-in mode and cannot be unregistered")
    _MODES.pop(name, None)
    unregister_units(name)
    register_summary(name, None)


def template_spec(name: str) -> TemplateSpec:
    """The template called ``name``, as the mode that owns it declares it (:attr:`Mode.templates`): a registered
    mode's, else an installed plug-in's (plug-ins are loaded only when no registered mode has it; one that
    fails to load is passed over here and named when its own mode is asked for)."""
    for mode in list(_MODES.values()):
        if name in mode.templates:
            return mode.templates[name]
    for plugin in mode_plugins():
        try:
            mode = get_mode(plugin)
        except ConfigError:
            continue
        if name in mode.templates:
            return mode.templates[name]
    known = sorted({t for m in _MODES.values() for t in m.templates})
    raise ConfigError(f"unknown template name {name!r}: the templates are {', '.join(known)} (each is a mode's)")


def registered_modes() -> dict[str, Mode]:
    """The built-in and registered modes by name (installed plug-ins not yet asked for are not loaded)."""
    return dict(_MODES)


def builtin_modes() -> tuple[str, ...]:
    """The names of the built-in modes, in the order they were registered."""
    return tuple(name for name in _MODES if name in _BUILTIN)


def mode_plugins() -> dict[str, list[EntryPoint]]:
    """The installed mode plug-ins by name (nothing is imported), as ``TRUSTJUDGE_MODE_PLUGINS`` allows; names
    already registered are left out (they never reach a plug-in)."""
    return installed(PLUGIN_GROUP, PLUGINS_ENV, _MODES)


def disabled_mode_plugins() -> dict[str, list[EntryPoint]]:
    """The installed mode plug-ins ``TRUSTJUDGE_MODE_PLUGINS`` leaves out, by name (nothing is imported)."""
    return disabled(PLUGIN_GROUP, PLUGINS_ENV, _MODES)


def _describe(ep: EntryPoint) -> str:
    return describe(ep, "mode plug-in")


def _from_plugin(ep: EntryPoint) -> Mode:
    """Load ``ep`` (a Mode, or a callable returning one) and register it; any failure names the plug-in."""
    what = _describe(ep)
    try:
        value = ep.load()
        mode = value if isinstance(value, Mode) else value() if callable(value) else value
    except (Exception, SystemExit) as exc:  # sys.exit in a plug-in must not end the run with status 0, silently
        raise ConfigError(f"{what} cannot be loaded: {type(exc).__name__}: {exc} "
                          "(fix or uninstall the plug-in's package)") from exc
    if not isinstance(mode, Mode):
        raise ConfigError(f"{what} gives a {type(mode).__name__}, not a trustjudge Mode")
    if mode.name != ep.name:
        raise ConfigError(f"{what} gives the mode {mode.name!r}: the entry point's name must be the mode's")
    PLUGIN_ORIGINS[mode.name] = what
    return register_mode(mode)


def get_mode(name: str) -> Mode:
    """The mode called ``name``: built-in or registered, else an installed plug-in (loaded now)."""
    if name in _MODES:
        return _MODES[name]
    plugins = mode_plugins()
    if name in plugins:
        found = plugins[name]
        if len(found) > 1:
            raise ConfigError(f"mode {name!r}: {len(found)} mode plug-ins claim it: "
                              + "; ".join(sorted(_describe(ep) for ep in found)) + " (uninstall all but one)")
        return _from_plugin(found[0])
    off = disabled_mode_plugins().get(name)
    if off:
        raise ConfigError(disabled_message(off[0], "mode plug-in", PLUGINS_ENV))
    known = ", ".join(sorted({*_MODES, *plugins}))
    raise ConfigError(f"unknown mode {name!r}: the modes are {known}")


class _Modes(Mapping[str, Mode]):
    """A read-only view of the modes by name: registered ones, then installed plug-ins (loaded on access)."""

    def __getitem__(self, name: str) -> Mode:
        try:
            return get_mode(name)
        except ConfigError as exc:
            if name in _MODES or name in mode_plugins():
                raise  # a broken plug-in: its error, not a bare KeyError
            raise KeyError(name) from exc

    def __iter__(self) -> Iterator[str]:
        return iter([*_MODES, *sorted(set(mode_plugins()) - set(_MODES))])

    def __len__(self) -> int:
        return len(_MODES) + len(set(mode_plugins()) - set(_MODES))

    def __repr__(self) -> str:
        return f"MODES({', '.join(self)})"


MODES: Mapping[str, Mode] = _Modes()
"""Every mode by name (read-only: add one with :func:`register_mode` or an entry point)."""


# -- what the mode files share -------------------------------------------------------------------

PROTOCOL_HELP = "direct (labels read right after the question) or cot (critique first); default: the judge's."
KEEP_DISTRIBUTION_HELP = "Keep each judgment's label distribution in the record; default: the judge's."
RULES_HELP = ("Rules checked before the judge, in order (a suite's): a response the first of them fires on gets "
              "its label with no model call.")


def keep_distribution(settings: JudgeSettings, asked: bool | None) -> bool:
    """A mode's ``keep_distribution`` option, else the judge's setting."""
    return settings.keep_distribution if asked is None else asked

MAX_EXTRACTION_TOKENS = 8192
"""The most tokens a claim extraction may be given from outside (the service's requests)."""
