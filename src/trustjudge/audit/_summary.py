"""Per-system summaries of judgment records, for every mode: each system's headline value with a bootstrap
interval over items, and how many of its judgments were unscored.

Records are plain mappings (the JSON lines the CLI writes); no mode file is imported. The mode of a record is
read from its shape (:func:`record_mode`). A *system* is the record's ``system`` field (pairs:
``first_system`` / ``second_system``), else the response's id (so items whose responses carry ids ``gpt`` and
``llama`` summarise those two). A repeated ``(item_id, response_id)`` (pairs: ``(item_id, unordered pair)``)
keeps the newest record, as everywhere else.

Headline values (the ``metric``; the defaults in :data:`DEFAULT_METRIC`):

* score: the mean of ``scores[method]`` (default ``expected``, the mean of the judge's label distribution);
* criteria: the mean of ``aggregate[method]`` (default ``expected``, the weighted aggregate);
* checklist: the mean ``satisfaction`` (expected weighted satisfaction);
* claims: the mean expected ``precision``; with matching, ``f1`` (the one-to-one assignment's expected F1)
  is the default, and ``recall`` (expected recall) can be asked; ``f1_at_k`` reads ``f1_at_k.f1``;
* compare and criteria-compare: the ``win_rate``, each pair counting P(win) + P(tie) / 2 under the soft
  probabilities (``verdict``: the hard verdict of ``method``, default ``likelihood``), with each system's
  Bradley-Terry log-strength (soft, Davidson ties) and its interval beside it where two systems or more meet.

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

__all__ = ["DEFAULT_METRIC", "METRICS", "Summary", "SummaryMetrics", "SystemSummary", "record_mode", "register_summary",
           "summarize", "summary_rows"]

PAIRWISE = ("compare", "criteria-compare")
METRICS: dict[str, tuple[str, ...]] = {
    "score": ("expected", "trustjudge", "geval", "discrete"),
    "criteria": ("expected", "trustjudge", "geval", "discrete"),
    "checklist": ("satisfaction", "p_all"),
    "claims": ("precision", "f1", "recall", "f1_at_k"),
    "compare": ("win_rate", "verdict"),
    "criteria-compare": ("win_rate", "verdict"),
}
"""The headline values each mode's summary can give (the first is the default, except claims with matching)."""
DEFAULT_METRIC = {mode: names[0] for mode, names in METRICS.items()}


@dataclass(frozen=True)
class SummaryMetrics:
    """A mode's summary contract (``Mode(summary_metrics=...)``), for a mode of per-response records: each
    headline value it can give, by name (the first is the default), read from a record dict (``None``: unscored
    or without it), and ``recognise``: whether a record is the mode's (``trustjudge summary`` without
    ``--mode``). Records marked ``unscored`` count as unscored before any metric is read."""

    metrics: Mapping[str, Callable[[Record], float | None]]
    recognise: Callable[[Record], bool] | None = None

    def __post_init__(self) -> None:
        if not self.metrics:
            raise ValueError("a summary needs at least one metric")


_REGISTERED: dict[str, SummaryMetrics] = {}
"""The summary contracts of registered modes, by mode name."""


def register_summary(mode: str, spec: SummaryMetrics | None) -> None:
    """Let records of ``mode`` be summarised through ``spec`` (``None``: forget it); the mode registry calls it."""
    if spec is None:
        _REGISTERED.pop(mode, None)
        return
    if mode in METRICS:
        raise ValueError(f"{mode!r} is summarised by trustjudge itself")
    _REGISTERED[mode] = spec


def mode_metrics(mode: str) -> tuple[str, ...] | None:
    """The metrics ``mode``'s summary can give, the default first (``None``: the mode has no summary)."""
    return METRICS.get(mode) or (tuple(_REGISTERED[mode].metrics) if mode in _REGISTERED else None)


def record_mode(record: Record) -> str | None:
    """The mode a record comes from, read from its fields (``None``: not a judgment record)."""
    for name, spec in _REGISTERED.items():
        if spec.recognise is not None and spec.recognise(record):
            return name
    if "first_id" in record:
        return "criteria-compare" if "criteria" in record else "compare" if "verdicts" in record else None
    if "scores" in record:
        return "score"
    if "checks" in record:
        return "checklist"
    if "claims" in record:
        return "claims"
    if "criteria" in record and "aggregate" in record:
        return "criteria"
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


def _value(record: Record, mode: str, metric: str) -> float | None:
    """A per-response record's headline value under ``metric`` (``None``: unscored or without it)."""
    if record.get("unscored") is not None:
        return None
    if mode == "score":
        return finite((record.get("scores") or {}).get(metric))
    if mode == "criteria":
        return finite((record.get("aggregate") or {}).get(metric))
    if mode == "checklist":
        return finite(record.get(metric))
    if metric == "precision":
        return finite(record.get("precision"))
    if metric == "f1_at_k":
        return finite((record.get("f1_at_k") or {}).get("f1"))
    matching = record.get("matching") or {}
    if metric == "recall":
        return finite(matching.get("expected_recall"))
    return finite((matching.get("hungarian") or {}).get("expected_f1"))


def _pair_weights(record: Record, mode: str, metric: str, method: str) -> tuple[float, float, float] | None:
    """A pair record's (first, second, tie) weights: soft probabilities, or the one-hot hard verdict."""
    if record.get("unscored") is not None:
        return None
    if metric == "verdict":
        verdict = (record.get("verdicts") or {}).get(method) if mode == "compare" else record.get("verdict")
        return {"first": (1.0, 0.0, 0.0), "second": (0.0, 1.0, 0.0), "tie": (0.0, 0.0, 1.0)}.get(str(verdict))
    raw = record.get("probabilities" if mode == "compare" else "aggregate")
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
        metric: One of ``METRICS[mode]`` (default: :data:`DEFAULT_METRIC`; claims with matching: ``f1``).
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
    metric_names = mode_metrics(mode)
    if metric_names is None:
        raise ValueError(f"no summary for mode {mode!r}: the modes summarised are "
                         f"{', '.join([*METRICS, *_REGISTERED])} (a mode declares one with Mode(summary_metrics=...))")
    spec = _REGISTERED.get(mode)
    if spec is not None and spec.recognise is None:
        ours = [r for r in rows if record_mode(r) is None and "response_id" in r]
    else:
        ours = [r for r in rows if record_mode(r) == mode]
    skipped = {"other_mode": len(rows) - len(ours)}
    if metric is None:
        metric = "f1" if mode == "claims" and any(r.get("matching") for r in ours) else metric_names[0]
    if metric not in metric_names:
        raise ValueError(f"{mode} summaries give {', '.join(metric_names)}, not {metric!r}")
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    unscored: dict[str, int] = defaultdict(int)
    bt: dict[str, tuple[float, tuple[float, float]]] = {}
    if mode in PAIRWISE:
        from ._ranking import Outcome, bootstrap_bt  # scipy (optimize, stats): not at import time (see the plugin test)

        latest = {(str(r["item_id"]), *sorted((str(r["first_id"]), str(r["second_id"])))): r for r in ours}
        skipped["same_system"] = 0
        outcomes = []
        for r in latest.values():
            first, second = _system(r, "first_system", "first_id"), _system(r, "second_system", "second_id")
            if first == second:
                skipped["same_system"] += 1
                continue
            w = _pair_weights(r, mode, metric, method)
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
            v = (_value(r, mode, metric) if spec is None
                 else None if r.get("unscored") is not None else finite(spec.metrics[metric](r)))
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
