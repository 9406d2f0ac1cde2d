"""Consistency of a judge with itself: the conflict ratio and non-transitivity.

- :func:`conflict_ratio` (CR): how often the pointwise scores of two responses contradict the pairwise
  verdict on them (a score gap within ``delta`` counts as a tie), pooled over items; :func:`delta_sweep`
  at several tolerances.
- :func:`ntr` (NTR_k): the share of k-subsets of an item's responses, all of whose pairs are judged, that
  no weak order explains (:func:`triple_violation`), split into circular and equivalence violations.

Definitions: ../shared/TRUSTJUDGE.md sections 1 and 3. Unscored judgments never enter a denominator.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ._stats import (
    CI,
    NO_CI,
    SIGN,
    VERDICTS,
    Floats,
    Record,
    bootstrap_ratio,
    dedupe_pairs,
    pair_ids,
    rate,
    score_value,
    verdict_of,
)

Relation = Literal[">", "<", "="]
Violation = Literal["circular", "equivalence"]
DEFAULT_MAX_SUBSETS = 200_000
_RELATION: dict[str, Relation] = {"first": ">", "second": "<", "tie": "="}
_FLIP: dict[Relation, Relation] = {">": "<", "<": ">", "=": "="}


@dataclass(frozen=True)
class CRResult:
    """Conflict ratio of one scoring method against one aggregation (``excluded``: pairs lacking data)."""

    conflicts: int
    counted: int
    ratio: float
    ties_in_verdicts: int
    items: int
    excluded: int = 0
    delta: float = 0.0
    ci: CI = NO_CI


@dataclass(frozen=True)
class NTRResult:
    """NTR_k of one aggregation, with the tie count of its ``judged`` pairs (read NTR next to it)."""

    k: int
    method: str
    violating: int
    circular: int
    equivalence: int
    valid_subsets: int
    ratio: float
    items: int
    judged: int = 0
    ties: int = 0
    skipped_items: int = 0
    ci: CI = NO_CI

    @property
    def tie_rate(self) -> float:
        """Share of ties among the judged pairs."""
        return rate(self.ties, self.judged)


def relation(verdict: str) -> Relation:
    """Return the relation (``">"``, ``"<"``, ``"="``) of a pair's first response to its second.

    Args:
        verdict: ``"first"``, ``"second"`` or ``"tie"``.
    """
    try:
        return _RELATION[verdict]
    except KeyError:
        raise ValueError(f"unknown verdict {verdict!r}; expected one of {VERDICTS}") from None


def _compose(o1: Relation, o2: Relation) -> Relation | None:
    if o1 == "=":
        return o2
    if o2 in ("=", o1):
        return o1
    return None  # opposite strict relations say nothing about i vs l


def triple_violation(o1: Relation, o2: Relation, o3: Relation) -> Violation | None:
    """Return how the relations i?j (o1), j?l (o2), i?l (o3) contradict every weak order, if they do.

    ``"circular"`` when o3 is the strict opposite of the strict relation o1 and o2 imply,
    ``"equivalence"`` for the other violations, ``None`` when consistent.

    Args:
        o1: Relation of i to j.
        o2: Relation of j to l.
        o3: Relation of i to l.
    """
    implied = _compose(o1, o2)
    if implied is None or o3 == implied:
        return None
    return "circular" if implied != "=" and o3 == _FLIP[implied] else "equivalence"


def _triangle_kind(o1: Relation, o2: Relation, o3: Relation) -> Violation | None:
    # Whether a triangle violates does not depend on its orientation, but triple_violation's label does:
    # a cycle through one tie reads "circular" or "equivalence" depending on which edge is o3. Subsets
    # must not depend on response order, so only an all-strict cycle counts as circular.
    if triple_violation(o1, o2, o3) is None:
        return None
    return "equivalence" if "=" in (o1, o2, o3) else "circular"


def _cr_counts(score_records: Sequence[Record], compare_records: Sequence[Record], score_method: str,
               agg_method: str, delta: float) -> tuple[Floats, int]:
    """Per item ``[conflicts, counted, ties]`` (items x 3) and the number of excluded pairs."""
    if len({r.get("scale") for r in score_records}) > 1:
        raise ValueError("score records mix scales; pass one scale at a time")
    scores = {(str(r["item_id"]), str(r["response_id"])): score_value(r, score_method) for r in score_records}
    index: dict[str, int] = {}
    rows: list[tuple[int, float, float, int]] = []
    pairs = dedupe_pairs(compare_records)
    for rec in pairs:
        item, first, second = pair_ids(rec)
        verdict, sx, sy = verdict_of(rec, agg_method), scores.get((item, first)), scores.get((item, second))
        if verdict is not None and sx is not None and sy is not None:
            rows.append((index.setdefault(item, len(index)), sx, sy, SIGN[verdict]))
    codes, x, y, c = np.array(rows, dtype=np.float64).reshape(-1, 4).T
    conflict = ((x > y + delta) & (c <= 0)) | ((y > x + delta) & (c >= 0)) | ((np.abs(x - y) <= delta) & (c != 0))
    columns = [np.bincount(codes.astype(np.intp), weights=w, minlength=len(index)) for w in (conflict, c == c, c == 0)]
    return np.stack(columns, axis=1), len(pairs) - len(rows)


def conflict_ratio(score_records: Sequence[Record], compare_records: Sequence[Record], score_method: str,
                   agg_method: str, delta: float = 0.0, *, bootstrap: int = 0, seed: int = 0) -> CRResult:
    """Return the conflict ratio CR of pointwise scores against pairwise verdicts, pooled over items.

    Pairs missing a verdict or either score are not counted; they are reported in ``excluded``.

    Args:
        score_records: Score records of ONE scale.
        compare_records: Compare records.
        score_method: Key of ``scores`` (``discrete``, ``geval``, ``expected``, ``trustjudge``).
        agg_method: Key of ``verdicts`` (``single``, ``two_pass``, ``likelihood``, ``ppl``).
        delta: Score gaps ``|S_x - S_y| <= delta`` count as ties.
        bootstrap: Resamples for the 95% interval (0: none).
        seed: Bootstrap seed.
    """
    counts, excluded = _cr_counts(score_records, compare_records, score_method, agg_method, delta)
    conflicts, counted, ties = (int(x) for x in counts.sum(axis=0))
    ci = bootstrap_ratio(counts[:, 0], counts[:, 1], bootstrap=bootstrap, seed=seed)
    return CRResult(conflicts, counted, rate(conflicts, counted), ties, len(counts), excluded, delta, ci)


def delta_sweep(score_records: Sequence[Record], compare_records: Sequence[Record], score_method: str,
                agg: str, deltas: Iterable[float]) -> list[CRResult]:
    """Return the conflict ratio at each tolerance in ``deltas``, in order (no bootstrap).

    Args:
        score_records: Score records of one scale.
        compare_records: Compare records.
        score_method: Scoring method.
        agg: Aggregation method.
        deltas: Tolerances to try.
    """
    return [conflict_ratio(score_records, compare_records, score_method, agg, d) for d in deltas]


@lru_cache(maxsize=256)
def _combos(n: int, k: int) -> NDArray[np.intp]:
    return np.array(list(itertools.combinations(range(n), k)), dtype=np.intp).reshape(-1, k)


_REL_CODE: dict[Relation, int] = {">": 1, "<": 2, "=": 3}
_CODE_REL: dict[int, Relation] = {v: k for k, v in _REL_CODE.items()}
_KIND_CODE: dict[Violation | None, int] = {None: 0, "equivalence": 1, "circular": 2}


def _relation_matrix(records: Sequence[Record], method: str) -> NDArray[np.int8]:
    """Relation codes of row vs column response (0: not judged), responses in order of appearance."""
    index: dict[str, int] = {}
    for rec in records:
        for rid in pair_ids(rec)[1:]:
            index.setdefault(rid, len(index))
    rel = np.zeros((len(index), len(index)), dtype=np.int8)
    for rec in records:
        verdict = verdict_of(rec, method)
        if verdict is not None:
            _, first, second = pair_ids(rec)
            a, b, r = index[first], index[second], relation(verdict)
            rel[a, b], rel[b, a] = _REL_CODE[r], _REL_CODE[_FLIP[r]]
    return rel


def ntr_results(compare_records: Sequence[Record], method: str, ks: Sequence[int], *, max_subsets: int,
                 bootstrap: int, seed: int) -> list[NTRResult]:
    """NTR for several k at once, reading each item's relations and triangles only once."""
    if min(ks, default=3) < 3:
        raise ValueError(f"NTR needs k >= 3, got {min(ks)}")
    records = dedupe_pairs(compare_records)
    by_item: dict[str, list[Record]] = defaultdict(list)
    for rec in records:
        by_item[str(rec["item_id"])].append(rec)
    counts: dict[int, list[tuple[int, int, int]]] = {k: [] for k in ks}  # violating, circular, valid
    skipped = dict.fromkeys(ks, 0)
    for item_records in by_item.values():
        rel = _relation_matrix(item_records, method)
        n = len(rel)
        todo = [k for k in ks if n >= k and math.comb(n, k) <= max_subsets]
        for k in ks:
            skipped[k] += int(n >= k and k not in todo)
        if not todo:
            continue
        kinds = np.zeros((n, n, n), dtype=np.int8)
        for i, j, m in itertools.combinations(range(n), 3):
            if rel[i, j] and rel[j, m] and rel[i, m]:
                kind = _triangle_kind(_CODE_REL[rel[i, j]], _CODE_REL[rel[j, m]], _CODE_REL[rel[i, m]])
                kinds[i, j, m] = _KIND_CODE[kind]
        for k in todo:
            subsets, pairs, triples = _combos(n, k), _combos(k, 2), _combos(k, 3)
            judged = (rel[subsets[:, pairs[:, 0]], subsets[:, pairs[:, 1]]] > 0).all(axis=1)
            worst = kinds[subsets[:, triples[:, 0]], subsets[:, triples[:, 1]], subsets[:, triples[:, 2]]].max(axis=1)
            counts[k].append((int((judged & (worst > 0)).sum()), int((judged & (worst == 2)).sum()), int(judged.sum())))
    verdicts = [v for r in records if (v := verdict_of(r, method)) is not None]
    results = []
    for k in ks:
        per_item = np.array(counts[k], dtype=np.float64).reshape(-1, 3)
        violating, circular, valid = (int(x) for x in per_item.sum(axis=0))
        results.append(NTRResult(
            k, method, violating, circular, violating - circular, valid, rate(violating, valid),
            int((per_item[:, 2] > 0).sum()), len(verdicts), verdicts.count("tie"), skipped[k],
            bootstrap_ratio(per_item[:, 0], per_item[:, 2], bootstrap=bootstrap, seed=seed)))
    return results


def ntr(compare_records: Sequence[Record], method: str, k: int, *, max_subsets: int = DEFAULT_MAX_SUBSETS,
        bootstrap: int = 0, seed: int = 0) -> NTRResult:
    """Return NTR_k: violating k-subsets over k-subsets whose pairs are all judged, pooled over items.

    A subset violates when any triangle in it contradicts every weak order (:func:`triple_violation`;
    this does not depend on the triangle's orientation, and pairs stored as (b, a) are flipped). It
    counts as circular when a violating triangle has three strict relations, else as equivalence (a
    tie is involved), so ``violating == circular + equivalence``.

    Args:
        compare_records: Compare records.
        method: Aggregation whose verdicts are read.
        k: Subset size, at least 3.
        max_subsets: Items with more k-subsets than this are skipped and counted in ``skipped_items``.
        bootstrap: Resamples for the 95% interval (0: none).
        seed: Bootstrap seed.
    """
    return ntr_results(compare_records, method, [k], max_subsets=max_subsets, bootstrap=bootstrap, seed=seed)[0]


__all__ = ["DEFAULT_MAX_SUBSETS", "CRResult", "NTRResult", "Relation", "Violation", "conflict_ratio", "delta_sweep",
           "ntr", "ntr_results", "relation", "triple_violation"]
