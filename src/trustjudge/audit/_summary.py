"""Per-system summaries of judgment records, for every mode: each system's headline value with a bootstrap
interval over items, and how many of its judgments were unscored.

Records are plain mappings (the JSON lines the CLI writes); no mode file is imported: each mode registers its
summary here (the mode registry calls :func:`register_summary`). The mode of a record is read from its shape by
the modes' recognisers (:func:`record_mode`). A *system* is the record's ``system`` field (pairs:
``first_system`` / ``second_system``), else the response's id (so items whose responses carry ids ``gpt`` and
``llama`` summarise those two). A repeated ``(item_id, response_id)`` (pairs: ``(item_id, unordered pair)``)
keeps the newest record, as everywhere else.

Headline values (the ``metric``) are each mode's own (``Mode(summary_metrics=...)``: :class:`SummaryMetrics`,
the built-in modes' in :mod:`trustjudge.modes._summaries`): a per-response mode's value is the mean of a number
read from each record; a pairwise mode's is the ``win_rate``, each pair counting P(win) + P(tie) / 2 under the
weights its metric reads (soft probabilities, or a hard verdict one-hot), with each system's Bradley-Terry
log-strength (soft, Davidson ties) and its interval beside it where two systems or more meet.

The interval is the percentile 95% bootstrap of the system's mean over its items (an item's judgments move
together), from ``default_rng(seed)``: the same seed gives the same numbers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._stats import NAN, bootstrap_ratio, finite, jsonable

Record = Mapping[str, Any]

__all__ = ["Summary", "SummaryMetrics", "SystemSummary", "Weights", "record_mode", "register_summary", "soft_weights",
           "summarize", "summarised_modes", "summary_of", "summary_rows"]

Weights = tuple[float, float, float]
"""A pair's (first, second, tie) weights, summing to 1."""


@dataclass(frozen=True)
class SummaryMetrics:
    """A mode's summary contract (``Mode(summary_metrics=...)``), for a mode of per-response records: each
    headline value it can give, by name (the first is the default), read from a record dict (``None``: unscored
    or without it), and ``recognise``: whether a record is the mode's (``trustjudge summary`` without
    ``--mode``). Records marked ``unscored`` count as unscored before any metric is read."""

    metrics: Mapping[str, Callable[[Record], float | None]] = field(default_factory=dict)
    recognise: Callable[[Record], bool] | None = None
    pairs: Mapping[str, Callable[[Record, str], Weights | None]] = field(default_factory=dict)
    """A pairwise mode's headline values instead of :attr:`metrics`: each reads a pair record's (first, second,
    tie) :data:`Weights` (``None``: unscored or without it) given the aggregation ``method`` asked for."""
    default: Callable[[Sequence[Record]], str] | None = None
    """The default metric given the mode's records (``None``: the first)."""

    def __post_init__(self) -> None:
        if bool(self.metrics) == bool(self.pairs):
            raise ValueError("a summary needs at least one metric: per-response metrics or pair weights, not both")

    @property
    def names(self) -> tuple[str, ...]:
        """The metrics it can give (the first is the default unless :attr:`default` says otherwise)."""
        return tuple(self.pairs or self.metrics)


_REGISTERED: dict[str, SummaryMetrics] = {}
"""The summary contracts of registered modes, by mode name."""


def register_summary(mode: str, spec: SummaryMetrics | None) -> None:
    """Let records of ``mode`` be summarised through ``spec`` (``None``: forget it); the mode registry calls it."""
    if spec is None:
        _REGISTERED.pop(mode, None)
        return
    _REGISTERED[mode] = spec


def summary_of(mode: str) -> SummaryMetrics | None:
    """The summary contract of the registered ``mode`` (``None``: it declares none)."""
    return _REGISTERED.get(mode)


def summarised_modes() -> tuple[str, ...]:
    """The modes with a summary (registered: the built-in ones and loaded plug-ins)."""
    return tuple(_REGISTERED)


def record_mode(record: Record) -> str | None:
    """The mode a record comes from, read from its fields by the modes' recognisers, the last registered (a
    plug-in) first (``None``: not a judgment record)."""
    for name, spec in reversed(_REGISTERED.items()):
        if spec.recognise is not None and spec.recognise(record):
            return name
    return None


@dataclass(frozen=True)
class SystemSummary:
    """One system's headline value, its 95% bootstrap interval over items, and its counts."""

    system: str
    value: float
    """The mean over its scored judgments (nan when none is scored)."""
    ci: tuple[float, float]
    n: int
    """Scored judgments (a pair counts once for each of its two systems)."""
    items: int
    """Items with a scored judgment."""
    unscored: int
    """Judgments without a value (unscored, or lacking the metric)."""
    bt: float | None = None
    """Pairwise modes: the Bradley-Terry log-strength (sum zero over the systems); else ``None``."""
    bt_ci: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"system": self.system, "value": self.value, "ci": list(self.ci), "n": self.n,
                               "items": self.items, "unscored": self.unscored}
        if self.bt is not None:
            out["bt"] = self.bt
            out["bt_ci"] = list(self.bt_ci) if self.bt_ci is not None else None
        return dict(jsonable(out))


@dataclass(frozen=True)
class Summary:
    """Every system's summary for one mode and metric, best first."""

    mode: str
    metric: str
    systems: tuple[SystemSummary, ...]
    bootstrap: int
    seed: int
    skipped: dict[str, int] = field(default_factory=dict)
    """Records left out, by reason (``other_mode``, ``same_system``)."""

    def system(self, name: str) -> SystemSummary:
        for s in self.systems:
            if s.system == name:
                return s
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "metric": self.metric, "bootstrap": self.bootstrap, "seed": self.seed,
                "interval": "percentile 95% bootstrap over items", "skipped": dict(self.skipped),
                "systems": [s.to_dict() for s in self.systems]}


def _system(record: Record, system_key: str, id_key: str) -> str:
    value = record.get(system_key)
    return str(value) if value is not None else str(record.get(id_key))


def soft_weights(raw: object) -> Weights | None:
    """(first, second, tie) probabilities from a mapping holding them, normalised (``None``: missing, negative,
    not finite or all zero)."""
    if not isinstance(raw, Mapping):
        return None
    p = [finite(raw.get(k)) for k in ("first", "second", "tie")]
    if any(v is None or v < 0 for v in p) or sum(v or 0.0 for v in p) <= 0:
        return None
    total = sum(v or 0.0 for v in p)
    return (p[0] or 0.0) / total, (p[1] or 0.0) / total, (p[2] or 0.0) / total


def _one(system: str, per_item: Mapping[str, list[float]], unscored: int, bootstrap: int, seed: int,
         bt: tuple[float, tuple[float, float]] | None = None) -> SystemSummary:
    ids = sorted(per_item)
    sums = np.array([sum(per_item[i]) for i in ids], dtype=np.float64)
    counts = np.array([len(per_item[i]) for i in ids], dtype=np.float64)
    n = int(counts.sum())
    value = float(sums.sum() / n) if n else NAN
    ci = bootstrap_ratio(sums, counts, bootstrap=bootstrap, seed=seed)
    return SystemSummary(system, value, ci, n, int(np.count_nonzero(counts)), unscored,
                         None if bt is None else bt[0], None if bt is None else bt[1])


def summarize(records: Iterable[Record], *, mode: str | None = None, metric: str | None = None,
              method: str = "likelihood", bootstrap: int = 1000, seed: int = 0, bt_bootstrap: int = 200) -> Summary:
    """Each system's headline value with a 95% bootstrap interval over items, and its unscored count.

    Args:
        records: Judgment records (dicts) of one mode; records of another mode are skipped and counted.
        mode: The mode to summarise (default: that of the first judgment record).
        metric: One of the mode's metrics (default: its summary's default, else its first).
        method: Pairwise ``verdict`` metric: the aggregation whose verdict counts (compare records).
        bootstrap: Resamples over items (0: no interval).
        bt_bootstrap: Resamples of the Bradley-Terry refit (pairwise modes; each is a fit), at most ``bootstrap``.
        seed: Bootstrap seed.

    Raises:
        ValueError: No judgment record, an unknown mode or a metric the mode does not have.
    """
    rows = list(records)
    if mode is None:
        mode = next((m for m in map(record_mode, rows) if m is not None), None)
        if mode is None:
            raise ValueError("no judgment records to summarise")
    spec = _REGISTERED.get(mode)
    if spec is None:
        raise ValueError(f"no summary for mode {mode!r}: the modes summarised are "
                         f"{', '.join(_REGISTERED)} (a mode declares one with Mode(summary_metrics=...))")
    metric_names = spec.names
    if spec.recognise is None:
        ours = [r for r in rows if record_mode(r) is None and "response_id" in r]
    else:
        ours = [r for r in rows if record_mode(r) == mode]
    skipped = {"other_mode": len(rows) - len(ours)}
    if metric is None:
        metric = spec.default(ours) if spec.default is not None else metric_names[0]
    if metric not in metric_names:
        raise ValueError(f"{mode} summaries give {', '.join(metric_names)}, not {metric!r}")
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    unscored: dict[str, int] = defaultdict(int)
    bt: dict[str, tuple[float, tuple[float, float]]] = {}
    if spec.pairs:
        from ._ranking import Outcome, bootstrap_bt  # scipy (optimize, stats): not at import time (see the plugin test)

        latest = {(str(r["item_id"]), *sorted((str(r["first_id"]), str(r["second_id"])))): r for r in ours}
        skipped["same_system"] = 0
        outcomes = []
        for r in latest.values():
            first, second = _system(r, "first_system", "first_id"), _system(r, "second_system", "second_id")
            if first == second:
                skipped["same_system"] += 1
                continue
            w = None if r.get("unscored") is not None else spec.pairs[metric](r, method)
            if w is None:
                unscored[first] += 1
                unscored[second] += 1
                continue
            item = str(r["item_id"])
            values[first][item].append(w[0] + w[2] / 2)
            values[second][item].append(w[1] + w[2] / 2)
            outcomes.append(Outcome(item, first, second, probabilities=w))
        if len({s for o in outcomes for s in (o.first, o.second)}) >= 2:
            fit = bootstrap_bt(outcomes, samples=max(min(bootstrap, bt_bootstrap), 1), seed=seed)
            for name, strength, ci in zip(fit.fit.systems, fit.fit.strengths, fit.strength_ci):
                bt[name] = (strength, ci if bootstrap else (NAN, NAN))
    else:
        latest = {(str(r["item_id"]), str(r["response_id"])): r for r in ours}
        for r in latest.values():
            name = _system(r, "system", "response_id")
            v = None if r.get("unscored") is not None else finite(spec.metrics[metric](r))
            if v is None:
                unscored[name] += 1
            else:
                values[name][str(r["item_id"])].append(v)
    names = sorted(set(values) | set(unscored))
    systems = [_one(name, values.get(name, {}), unscored.get(name, 0), bootstrap, seed, bt.get(name))
               for name in names]
    systems.sort(key=lambda s: (-s.value if not math.isnan(s.value) else math.inf, s.system))
    return Summary(mode, metric, tuple(systems), bootstrap, seed, skipped)


def summary_rows(summary: Summary) -> list[Sequence[str]]:
    """The summary as table rows: system, value, 95% interval, scored, items, unscored (and BT where fitted)."""
    def num(x: float | None) -> str:
        return "-" if x is None or math.isnan(x) else f"{x:.3f}"

    rows: list[Sequence[str]] = []
    for s in summary.systems:
        row = [s.system, num(s.value), f"[{num(s.ci[0])}, {num(s.ci[1])}]", str(s.n), str(s.items), str(s.unscored)]
        if any(x.bt is not None for x in summary.systems):
            row += [num(s.bt), "-" if s.bt_ci is None else f"[{num(s.bt_ci[0])}, {num(s.bt_ci[1])}]"]
        rows.append(row)
    return rows
