"""Statistics every measure over judgment records shares (the audit, the injection measure, the report).

A record is a plain mapping, one per JSONL line the CLI writes. This module sits below every module
that reads records, so that they import it and never each other:

* A record whose ``(item_id, pair)`` or ``(item_id, response_id)`` repeats replaces the earlier one
  (the newest line of an appended JSONL file wins): :func:`dedupe_pairs`, :func:`dedupe_scores`.
* A missing or non-finite number is ``None`` (:func:`finite`); an empty denominator gives nan
  (:func:`rate`), which JSON output writes as ``null`` (:func:`jsonable`).
* A compare record's verdict under one aggregation is ``"first"``, ``"second"`` or ``"tie"`` (:data:`VERDICTS`,
  signed by :data:`SIGN`), ``None`` when unscored or absent (:func:`verdict_of`).
* Intervals are percentile 95% bootstraps over items, each from a fresh ``default_rng(seed)``, so a
  given seed always gives the same numbers (:func:`bootstrap_ratio`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

Record = Mapping[str, Any]
CI = tuple[float, float]
Floats = NDArray[np.float64]

NAN = float("nan")
NO_CI: CI = (NAN, NAN)
VERDICTS = ("first", "second", "tie")
SIGN = {"first": 1, "second": -1, "tie": 0}
"""A verdict's sign: the pair's first response wins (+1), its second (-1), neither (0)."""


class _Unique(list[Record]):
    """Records already deduplicated: the audit dedupes once instead of once per metric."""


def dedupe_pairs(compare_records: Iterable[Record]) -> list[Record]:
    """Return the compare records with the last one of each ``(item_id, unordered pair)``."""
    if isinstance(compare_records, _Unique):
        return compare_records
    latest = {(str(r["item_id"]), *sorted((str(r["first_id"]), str(r["second_id"])))): r for r in compare_records}
    return _Unique(latest.values())


def dedupe_scores(score_records: Iterable[Record]) -> list[Record]:
    """Return the score records with the last one of each ``(item_id, response_id)``."""
    if isinstance(score_records, _Unique):
        return score_records
    return _Unique({(str(r["item_id"]), str(r["response_id"])): r for r in score_records}.values())


def finite(value: Any) -> float | None:
    """``value`` as a float, or ``None`` when it is missing, nan or infinite."""
    number = None if value is None else float(value)
    return number if number is not None and math.isfinite(number) else None


def score_value(record: Record, method: str) -> float | None:
    """The record's score under ``method``; ``None`` when it is unscored or lacks that score."""
    return None if record.get("unscored") is not None else finite((record.get("scores") or {}).get(method))


def verdict_of(record: Record, method: str) -> str | None:
    """The verdict of ``method`` in a compare record, ``None`` when unscored or absent; an unknown one raises."""
    if record.get("unscored") is not None:
        return None
    value = (record.get("verdicts") or {}).get(method)
    if value is not None and value not in SIGN:
        raise ValueError(f"unknown verdict {value!r} for {method} in item {record.get('item_id')!r}")
    return None if value is None else str(value)


def pair_ids(record: Record) -> tuple[str, str, str]:
    """``(item_id, first_id, second_id)`` of a compare record."""
    return str(record["item_id"]), str(record["first_id"]), str(record["second_id"])


def rate(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, nan when the denominator is 0."""
    return numerator / denominator if denominator else NAN


def present(records: Iterable[Record], field_name: str, known: Sequence[str]) -> list[str]:
    """Return the method names with a value in some ``record[field_name]``, known ones first."""
    seen = {name for r in records for name, value in (r.get(field_name) or {}).items() if value is not None}
    return [m for m in known if m in seen] + sorted(seen - set(known))


def jsonable(value: Any) -> Any:
    """``value`` with nan and infinities as ``None`` and tuple keys joined with "/" (for JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {"/".join(map(str, k)) if isinstance(k, tuple) else str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


@lru_cache(maxsize=2)
def resample_counts(n: int, bootstrap: int, seed: int) -> Floats:
    """How often each of n items is drawn in each resample, shape (bootstrap, n); read-only, cached."""
    draws = np.random.default_rng(seed).integers(0, n, size=(bootstrap, n))
    flat = (draws + n * np.arange(bootstrap)[:, None]).ravel()
    weights = np.bincount(flat, minlength=bootstrap * n).reshape(bootstrap, n).astype(np.float64)
    weights.flags.writeable = False
    return weights


def percentile_ci(values: Floats) -> CI:
    """The 2.5 and 97.5 percentiles of the non-nan ``values`` (nan when there are none)."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return NO_CI
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def bootstrap_ratio(numerators: Floats, denominators: Floats, *, bootstrap: int = 1000, seed: int = 0) -> CI:
    """Return the percentile 95% interval of ``sum(num) / sum(den)`` over items resampled with replacement.

    Nan when there is nothing to resample; the same seed always gives the same interval.

    Args:
        numerators: Per-item numerators.
        denominators: Per-item denominators; items with 0 are not resampled.
        bootstrap: Number of resamples (0: no interval).
        seed: Bootstrap seed.
    """
    keep = np.asarray(denominators) > 0
    num, den = np.asarray(numerators, dtype=np.float64)[keep], np.asarray(denominators, dtype=np.float64)[keep]
    if bootstrap <= 0 or den.size == 0:
        return NO_CI
    weights = resample_counts(den.size, bootstrap, seed)
    return percentile_ci((weights @ num) / (weights @ den))


def correlation(fn: Callable[..., Any], x: Sequence[float], y: Sequence[float]) -> float:
    """``fn(x, y)[0]`` (a scipy correlation), nan without two points or without variance on either side."""
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return NAN  # undefined without variance; scipy would warn and return nan
    return float(fn(x, y)[0])
