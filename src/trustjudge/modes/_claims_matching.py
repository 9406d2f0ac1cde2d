"""The claims mode's matching numbers: from the P(match) of every (gold, predicted) pair to coverage, expected
precision and recall, the best one-to-one assignment and the greedy in-order matches. A match stage with
graded labels (``match_labels``: SC-Arena-style 0-3 grades, each a value) gives P(match) as the expected value
of the label, and the argmax label's value as each pair's hard verdict."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from ..engine import _aggregates as A
from ..engine._engine import Outcome

Coverage = Literal["noisy_or", "max"]


def _p_match(probs: Sequence[float], values: Sequence[float] | None) -> tuple[float, float]:
    """P(match) and the hard verdict of one pair's label probabilities: YES first (``values`` ``None``), or the
    expected value of graded labels and the value of the most probable one."""
    total = sum(probs)
    if values is None:
        return probs[0] / total, float(probs[0] / total >= 0.5)
    top = max(range(len(probs)), key=lambda k: probs[k])
    return sum(p * v for p, v in zip(probs, values)) / total, float(values[top])


def _noisy_or(ps: Sequence[float]) -> float:
    """P(at least one matches), the pairs taken as independent: 1 - prod(1 - p)."""
    return 1.0 - math.prod(1.0 - p for p in ps)


def _best(ps: Sequence[float]) -> float:
    """The best single match: max p (0 for none)."""
    return max(ps, default=0.0)


def matching(gold: list[str], claims: list[str], outcomes: Sequence[Outcome], min_overlap: float,
             rule: Coverage = "noisy_or", values: Sequence[float] | None = None) -> dict[str, Any]:
    """Matching numbers from the P(match) of every (gold, predicted) pair, gold-major; ``rule`` combines a
    gold claim's P(match) over the predictions into its coverage (and a prediction's over the gold claims);
    ``values``: the match labels' values (graded labels; the record then keeps each pair's hard verdict)."""
    n, m = len(gold), len(claims)
    matrix = [[0.0] * m for _ in range(n)]
    hard = [[0.0] * m for _ in range(n)]
    judged = skipped = failed = 0
    for i in range(n):
        for j in range(m):
            out = outcomes[i * m + j]
            if out.unscored == "prefiltered":
                skipped += 1
            elif out.probs is None or out.unscored is not None:
                failed += 1
            else:
                judged += 1
                matrix[i][j], hard[i][j] = _p_match(out.probs, values)
    combine = _noisy_or if rule == "noisy_or" else _best
    coverage = [combine(row) for row in matrix]
    support = [combine([matrix[i][j] for i in range(n)]) for j in range(m)]
    pairs = A.assignment(matrix) if n and m else []
    tp = sum(matrix[i][j] for i, j in pairs)
    hungarian = {"pairs": [[i, j] for i, j in pairs], "expected_true_positives": tp,
                 "expected_precision": tp / m if m else None, "expected_recall": tp / n if n else None,
                 "expected_f1": 2 * tp / (n + m) if n + m else None}

    def greedy(order: list[int]) -> dict[str, Any]:
        permuted = [[row[j] for j in order] for row in matrix]
        hits = len(A.greedy_order_matching(permuted, 0.5)) if n and m else 0
        return {"matches": hits, "f1": 2 * hits / (n + m) if n + m else None}

    return {"gold": n, "predicted": m, "p_match": matrix, "coverage_rule": rule, "coverage": coverage,
            "expected_recall": sum(coverage) / n if n else None,
            "expected_precision": sum(support) / m if m else None, "hungarian": hungarian,
            "greedy_in_order": greedy(list(range(m))), "greedy_reversed": greedy(list(range(m))[::-1]),
            "prefilter": {"min_overlap": min_overlap, "judged": judged, "skipped": skipped, "failed": failed},
            **({"hard_match": hard} if values is not None else {})}


