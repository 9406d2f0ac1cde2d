"""Biases of a pairwise judge: swap flips, position bias and length bias.

- :func:`swap_flip_rate`: how often a pair's two presentation orders give different argmax verdicts;
- :func:`position_bias`: per order and pooled, how often the first-shown response wins, and the ties;
- :func:`length_bias`: the correlation of the verdict's sign with the length difference of the responses,
  and how often the longer one wins.

Definitions: ../shared/TRUSTJUDGE.md section 6. Unscored judgments never enter a denominator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._stats import SIGN, Record, correlation, dedupe_pairs, pair_ids, rate, verdict_of
from ..engine._scoring import argmax_verdict


@dataclass(frozen=True)
class SwapFlip:
    """Pairs whose two presentation orders give different argmax verdicts."""

    flips: int
    pairs: int
    rate: float


@dataclass(frozen=True)
class OrderBias:
    """Argmax labels of one presentation order (or both pooled): first-shown wins (A) and ties (C)."""

    order: str
    judged: int
    first_shown_wins: int
    ties: int
    first_shown_rate: float
    tie_rate: float


@dataclass(frozen=True)
class PositionBias:
    """Position bias per order and pooled over both."""

    order1: OrderBias
    order2: OrderBias
    overall: OrderBias


@dataclass(frozen=True)
class LengthBias:
    """Correlation of verdict sign with len(first) - len(second), and wins of the longer response."""

    method: str
    n: int
    pearson: float
    spearman: float
    longer_wins: int
    strict_unequal: int
    longer_win_rate: float


def _order_probs(order: Mapping[str, Any]) -> tuple[float, float, float] | None:
    if order.get("unscored") is not None or all(order.get(label) is None for label in "ABC"):
        return None
    a, b, c = (float(order.get(label) or 0.0) for label in "ABC")  # a missing label counts as 0
    return a, b, c


def _order_verdict(record: Record, order: Mapping[str, Any]) -> str | None:
    """Return the order's argmax verdict in pair terms (first / second / tie)."""
    probs = _order_probs(order)
    if probs is None:
        return None
    a, b, c = probs
    return argmax_verdict(a, b, c) if str(order.get("shown_first")) == pair_ids(record)[1] else argmax_verdict(b, a, c)


def swap_flip_rate(compare_records: Sequence[Record]) -> SwapFlip:
    """Return how often a pair's two orders give different argmax verdicts (pairs with both orders scored)."""
    verdicts = [[_order_verdict(r, o) for o in r.get("orders") or []] for r in dedupe_pairs(compare_records)]
    both = [v for v in verdicts if len(v) == 2 and None not in v]
    flips = sum(v[0] != v[1] for v in both)
    return SwapFlip(flips, len(both), rate(flips, len(both)))


def position_bias(compare_records: Sequence[Record]) -> PositionBias:
    """Return, per order and pooled, how often the first-shown response wins (label A) and how often C wins.

    Order 1 shows the pair's first response first. Each scored order counts on its own, even when the
    other order of its pair is unscored.
    """
    labels: list[list[str]] = [[], []]
    for rec in dedupe_pairs(compare_records):
        for order in rec.get("orders") or []:
            probs = _order_probs(order)
            if probs is not None:
                slot = 0 if str(order.get("shown_first")) == pair_ids(rec)[1] else 1
                labels[slot].append(argmax_verdict(*probs))  # "first" here means label A won

    def bias(name: str, got: list[str]) -> OrderBias:
        first, ties = got.count("first"), got.count("tie")
        return OrderBias(name, len(got), first, ties, rate(first, len(got)), rate(ties, len(got)))

    return PositionBias(bias("order 1", labels[0]), bias("order 2", labels[1]), bias("both", labels[0] + labels[1]))


def length_bias(compare_records: Sequence[Record], lengths: Mapping[tuple[str, str], int], method: str) -> LengthBias:
    """Return the correlation of verdict sign (+1 / -1 / 0) with ``len(first) - len(second)``.

    Over pairs with a verdict and both lengths; also how often the longer response wins a strict verdict.

    Args:
        compare_records: Compare records.
        lengths: Characters per ``(item_id, response_id)``.
        method: Aggregation method.
    """
    signs: list[float] = []
    diffs: list[float] = []
    for rec in dedupe_pairs(compare_records):
        item, first, second = pair_ids(rec)
        verdict, lx, ly = verdict_of(rec, method), lengths.get((item, first)), lengths.get((item, second))
        if verdict is not None and lx is not None and ly is not None:
            signs.append(SIGN[verdict])
            diffs.append(lx - ly)
    strict = [s * d for s, d in zip(signs, diffs, strict=True) if s != 0 and d != 0]
    longer = sum(x > 0 for x in strict)
    from scipy import stats  # type: ignore[import-untyped, unused-ignore]  # lazy: ~1.3 s of `import trustjudge`

    return LengthBias(method, len(signs), correlation(stats.pearsonr, signs, diffs),
                      correlation(stats.spearmanr, signs, diffs), longer, len(strict), rate(longer, len(strict)))

__all__ = ["LengthBias", "OrderBias", "PositionBias", "SwapFlip", "length_bias", "position_bias", "swap_flip_rate"]
