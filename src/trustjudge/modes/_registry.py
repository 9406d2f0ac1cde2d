"""The judging modes, registered: what each asks, what it records, and how its task is built from options.

A mode is a frozen :class:`Mode`: its name, its task and record types, its templates (name -> packaged file
and required fields), the fewest responses an item needs, and how its task is built from its options (a
frozen dataclass whose fields carry their help text in ``metadata["help"]``). The built-in modes register
here at import, through the same door as third-party ones::

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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from typing import Any, Protocol

from .claims import COVERAGE_RULES, ClaimsTask, Coverage, stage_templates
from ..io._items import Check, Criterion
from ._prompts import (
    CHECK_FIELDS,
    CRITERION_FIELDS,
    CRITERION_PAIR_FIELDS,
    EXTRACT_FIELDS,
    MATCH_FIELDS,
    PAIRWISE_FIELDS,
    POINTWISE_FIELDS,
    VERIFY_FIELDS,
    YES_NO,
    LabelSet,
    Prompts,
    Scale,
)
from ._prompts import Protocol as JudgeProtocol
from ._prompts import scale as make_scale
from ._records import (
    ChecklistRecord,
    ClaimsRecord,
    CompareRecord,
    CriteriaCompareRecord,
    CriteriaRecord,
    ScoreRecord,
)
from ._base import ChecklistTask, CompareTask, CriteriaCompareTask, CriteriaTask, ScoreTask, Task
from .._plugins import describe, installed
from ..errors import ConfigError

__all__ = ["MODES", "PLUGIN_GROUP", "JudgeSettings", "Mode", "TemplateSpec", "get_mode", "mode_plugins",
           "option", "register_mode", "unregister_mode"]

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


@dataclass(frozen=True)
class TemplateSpec:
    """A template a mode renders: its packaged file (under ``trustjudge/templates``) and its required fields."""

    file: str
    fields: frozenset[str]


def option(default: Any, help: str) -> Any:  # noqa: A002 (click's word for it)
    """A mode option: a dataclass field with ``default`` and its help text in ``metadata["help"]``."""
    return field(default=default, metadata={"help": help})


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

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or self.name != self.name.strip():
            raise ConfigError(f"a mode's name is a non-empty word without '/', got {self.name!r}")
        if not (isinstance(self.task, type) and issubclass(self.task, Task)):
            raise ConfigError(f"mode {self.name!r}: task must be a Task subclass, got {self.task!r}")
        if not (dataclasses.is_dataclass(self.record) and dataclasses.is_dataclass(self.options)):
            raise ConfigError(f"mode {self.name!r}: record and options must be dataclasses")
        if self.min_responses < 1:
            raise ConfigError(f"mode {self.name!r}: min_responses must be 1 or more, got {self.min_responses}")

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
    return mode


def unregister_mode(name: str) -> None:
    """Forget a registered mode (built-in modes stay)."""
    if name in _BUILTIN:
        raise ConfigError(f"{name!r} is a built-in mode and cannot be unregistered")
    _MODES.pop(name, None)


def mode_plugins() -> dict[str, list[EntryPoint]]:
    """The installed mode plug-ins by name (nothing is imported), as ``TRUSTJUDGE_MODE_PLUGINS`` allows; names
    already registered are left out (they never reach a plug-in)."""
    return installed(PLUGIN_GROUP, PLUGINS_ENV, _MODES)


def _describe(ep: EntryPoint) -> str:
    return describe(ep, "mode plug-in")


def _from_plugin(ep: EntryPoint) -> Mode:
    """Load ``ep`` (a Mode, or a callable returning one) and register it; any failure names the plug-in."""
    what = _describe(ep)
    try:
        value = ep.load()
        mode = value if isinstance(value, Mode) else value() if callable(value) else value
    except Exception as exc:
        raise ConfigError(f"{what} cannot be loaded: {type(exc).__name__}: {exc} "
                          "(fix or uninstall the plug-in's package)") from exc
    if not isinstance(mode, Mode):
        raise ConfigError(f"{what} gives a {type(mode).__name__}, not a trustjudge Mode")
    if mode.name != ep.name:
        raise ConfigError(f"{what} gives the mode {mode.name!r}: the entry point's name must be the mode's")
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


# -- the built-in modes ---------------------------------------------------------------------------------

_PROTOCOL_HELP = "direct (labels read right after the question) or cot (critique first); default: the judge's."


@dataclass(frozen=True)
class ScoreOptions:
    scale: int | None = option(None, "Rating scale 1..N (5, 10 or 100); default: the judge's.")
    protocol: JudgeProtocol | None = option(None, _PROTOCOL_HELP)


@dataclass(frozen=True)
class CompareOptions:
    protocol: JudgeProtocol | None = option(None, _PROTOCOL_HELP)
    delta: float | None = option(None, "Tie margin for likelihood and ppl aggregation; default: the judge's.")


@dataclass(frozen=True)
class CriteriaOptions:
    criteria: tuple[Criterion, ...] = option((), "Criteria for items that carry none (a suite's).")
    reweight: bool = option(False, "When a criterion is unscored, aggregate over the rest with renormalised "
                                   "weights (default: the aggregate is unscored).")
    scale: int = option(5, "Scale of criteria without level descriptions (5 or 10).")
    protocol: JudgeProtocol | None = option(None, _PROTOCOL_HELP)


@dataclass(frozen=True)
class CriteriaCompareOptions:
    criteria: tuple[Criterion, ...] = option((), "Criteria for items that carry none (a suite's).")
    graded: bool = option(False, "5-way verdicts (A>>B .. B>>A) with an expected margin.")
    reweight: bool = option(False, "When a criterion is unscored, aggregate over the rest with renormalised "
                                   "weights (default: the aggregate is unscored).")
    protocol: JudgeProtocol | None = option(None, _PROTOCOL_HELP)


@dataclass(frozen=True)
class ChecklistOptions:
    checklist: tuple[Check, ...] = option((), "Checks for responses whose item carries none (a suite's).")
    labels: LabelSet = option(YES_NO, 'The answers a check may get, e.g. "FULL=1,PARTIAL=0.5,NO=0".')
    reweight: bool = option(False, "When a check is unscored, aggregate over the rest with renormalised weights.")
    protocol: JudgeProtocol | None = option(None, _PROTOCOL_HELP)


@dataclass(frozen=True)
class ClaimsOptions:
    k: int | None = option(None, "Also give E[precision], E[recall@K] and E[F1@K], recall counting up to K "
                                 "supported claims.")
    unknown: bool = option(False, "Add UNKNOWN to the verification labels (reported apart).")
    match: bool = option(False, "Match the claims against the item's gold_claims (else claims extracted from its "
                                "reference).")
    min_overlap: float = option(0.0, "With match: judge only pairs whose word overlap (Jaccard) reaches this.")
    max_new_tokens: int = option(512, "Longest claim extraction (a longer one is unscored: truncated).")
    max_claims: int = option(32, "An extraction with more claims is unscored (too_many_claims).")
    templates: Mapping[str, Any] | None = option(None, "Each stage's own prompt by name: {extract, verify, match} "
                                                       "-> a template's text or path (STAGE=PATH).")
    verify: bool = option(True, "Verify each claim against the evidence; off (--no-verify): match-only, no "
                                "evidence needed.")
    coverage: Coverage = option("noisy_or", "With match: a gold claim's coverage from its P(match) over the "
                                            "predictions: noisy_or (1 - prod(1 - p)) or max (the best one).")


def build_score(j: JudgeSettings, o: ScoreOptions) -> ScoreTask:
    return ScoreTask(j.prompts, j.scale if o.scale is None else make_scale(o.scale), o.protocol or j.protocol,
                     j.keep_distribution, j.closing_mark)


def build_compare(j: JudgeSettings, o: CompareOptions) -> CompareTask:
    return CompareTask(j.prompts, o.protocol or j.protocol, j.delta if o.delta is None else o.delta, j.closing_mark)


def build_criteria(j: JudgeSettings, o: CriteriaOptions) -> CriteriaTask:
    return CriteriaTask(j.prompts, make_scale(o.scale), o.protocol or j.protocol, tuple(o.criteria), o.reweight,
                        j.keep_distribution)


def build_criteria_compare(j: JudgeSettings, o: CriteriaCompareOptions) -> CriteriaCompareTask:
    return CriteriaCompareTask(j.prompts, o.protocol or j.protocol, tuple(o.criteria), o.graded, o.reweight)


def build_checklist(j: JudgeSettings, o: ChecklistOptions) -> ChecklistTask:
    return ChecklistTask(j.prompts, o.protocol or j.protocol, o.labels, tuple(o.checklist), o.reweight)


def build_claims(j: JudgeSettings, o: ClaimsOptions) -> ClaimsTask:
    if o.k is not None and o.k < 1:
        raise ConfigError(f"k must be 1 or more, got {o.k}")
    if not 0.0 <= o.min_overlap <= 1.0:
        raise ConfigError(f"min_overlap must be between 0 and 1, got {o.min_overlap}")
    if o.max_claims < 1:
        raise ConfigError(f"max_claims must be 1 or more, got {o.max_claims}")
    if o.coverage not in COVERAGE_RULES:
        raise ConfigError(f"coverage must be one of {', '.join(COVERAGE_RULES)}, got {o.coverage!r}")
    if not (o.verify or o.match):
        raise ConfigError("with verify off and match off claims has nothing to do: turn match on (match-only)")
    return ClaimsTask(o.unknown, o.k, o.match, o.min_overlap, o.max_new_tokens, o.max_claims,
                      templates=stage_templates(o.templates), verify=o.verify, coverage=o.coverage)


def _builtin(mode: Mode) -> None:
    register_mode(mode)
    _BUILTIN.add(mode.name)


def _spec(file: str, fields: set[str]) -> TemplateSpec:
    return TemplateSpec(file, frozenset(fields))


_builtin(Mode("score", ScoreTask, ScoreRecord, ScoreOptions, build_score,
              {"pointwise": _spec("pointwise.txt", POINTWISE_FIELDS)}, 1,
              "One holistic score per response on an integer scale.", "score", "/v1/score"))
_builtin(Mode("compare", CompareTask, CompareRecord, CompareOptions, build_compare,
              {"pairwise": _spec("pairwise.txt", PAIRWISE_FIELDS)}, 2,
              "Every pair judged in both presentation orders.", "compare", "/v1/compare"))
_builtin(Mode("criteria", CriteriaTask, CriteriaRecord, CriteriaOptions, build_criteria,
              {"criterion": _spec("criterion.txt", CRITERION_FIELDS)}, 1,
              "Each response judged on each named criterion, with a weighted aggregate.", "criteria",
              "/v1/criteria"))
_builtin(Mode("criteria-compare", CriteriaCompareTask, CriteriaCompareRecord, CriteriaCompareOptions,
              build_criteria_compare, {"criterion_pair": _spec("criterion_pair.txt", CRITERION_PAIR_FIELDS)}, 2,
              "Every pair judged on each criterion in both orders.", "criteria --pairwise", "/v1/criteria/compare"))
_builtin(Mode("checklist", ChecklistTask, ChecklistRecord, ChecklistOptions, build_checklist,
              {"check": _spec("check.txt", CHECK_FIELDS)}, 1,
              "Each response asked each check of its checklist.", "checklist", "/v1/checklist"))
_builtin(Mode("claims", ClaimsTask, ClaimsRecord, ClaimsOptions, build_claims,
              {"extract": _spec("extract.txt", EXTRACT_FIELDS), "verify": _spec("verify.txt", VERIFY_FIELDS),
               "match": _spec("match.txt", MATCH_FIELDS)}, 1,
              "Claims extracted (or given), verified against the evidence, matched against gold claims.", "claims",
              "/v1/claims"))
