"""The benchmarks' own formulas where they differ from the generic metrics (issue 35): PuzzleWorld's last
reference step judged true (``last_true_share``) and LiveDRBench's per-category claim matching (``livedr``),
registered into :data:`~trustjudge.recipes._metrics.METRICS` on import (``trustjudge.recipes`` imports it)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..audit._stats import finite
from ._metrics import Metric, Record, register_metric

# -- PuzzleWorld's own formula: the last reference step judged true, over the reference's steps -----------

def _last_true_share(r: Record, p: Mapping[str, Any]) -> float | None:
    """Index of the last check (reference step) judged true, at any position, over the number of checks.

    Hard (PuzzleWorld's code): k* / n with k* the last step whose P(true) >= 0.5 (0 if none). Soft: E[k*] / n
    with the steps' verdicts independent, P(k* = k) = p_k prod_{j > k} (1 - p_j)."""
    checks = list(r.get("checks") or [])
    ps = [finite(c.get("p_pass")) for c in checks]
    if not ps or any(q is None for q in ps):
        return None
    qs = [float(q) for q in ps if q is not None]
    n = len(qs)
    if p["hard"]:
        return max((k for k, q in enumerate(qs, 1) if q >= 0.5), default=0) / n
    expected, none_after = 0.0, 1.0
    for k in range(n, 0, -1):  # from the last step back: P(k is the last true) = p_k x P(none after k)
        expected += k * qs[k - 1] * none_after
        none_after *= 1.0 - qs[k - 1]
    return expected / n


# -- LiveDRBench's own formulas: any-match over equivalence classes, keyed and gated claims --------------

def _split_key(text: str, keys: Sequence[str]) -> tuple[str, str]:
    """``"material: NaXO2"`` -> ``("material", "NaXO2")`` where the prefix is one of ``keys``; else ``("", text)``."""
    head, sep, rest = text.partition(":")
    return (head.strip(), rest.strip()) if sep and head.strip() in keys else ("", text.strip())


def _livedr_pairs(r: Record) -> tuple[list[list[float]], list[str], list[str], Mapping[str, Any]] | None:
    matching = r.get("matching")
    item = r.get("item")
    gold = list(getattr(item, "gold_claims", None) or [])
    claims = [str(c.get("text", "")) for c in r.get("claims") or []]
    if not isinstance(matching, Mapping) or not gold:
        return None
    matrix = [list(map(float, row)) for row in matching.get("p_match") or []]
    if len(matrix) != len(gold) or any(len(row) != len(claims) for row in matrix):
        return None
    return matrix, gold, claims, getattr(item, "fields", None) or {}


def _prf(tp_p: float, m: int, tp_r: float, n: int) -> tuple[float, float, float]:
    precision = tp_p / m if m else 0.0
    recall = tp_r / n if n else 0.0
    return precision, recall, (2 * precision * recall / (precision + recall) if precision + recall else 0.0)


def _any_match(matrix: list[list[float]], gold: list[str], claims: list[str], classes: list[int],
               hard: bool) -> tuple[float, float, float]:
    """LiveDRBench scifacts: a prediction is correct if it matches any gold text of any class (precision); a
    class is found if any prediction matches any of its texts (recall). Identical texts (case and surrounding
    space aside) match without the judge, as the benchmark's code has it. Soft: P(any) = 1 - prod(1 - p)."""
    def p(i: int, j: int) -> float:
        if gold[i].strip().lower() == claims[j].strip().lower() and claims[j].strip():
            return 1.0
        return (1.0 if matrix[i][j] >= 0.5 else 0.0) if hard else matrix[i][j]

    def anyof(ps: Iterable[float]) -> float:
        miss = 1.0
        for q in ps:
            miss *= 1.0 - q
        return 1.0 - miss

    tp_p = sum(anyof(p(i, j) for i in range(len(gold))) for j in range(len(claims)))
    by_class: dict[int, list[int]] = defaultdict(list)
    for i, c in enumerate(classes):
        by_class[c].append(i)
    tp_r = sum(anyof(p(i, j) for i in rows for j in range(len(claims))) for rows in by_class.values())
    return _prf(tp_p, len(claims), tp_r, len(by_class))


def _classes(fields: Mapping[str, Any], n: int) -> list[int] | None:
    raw = fields.get("gold_class")
    if raw is None:
        return list(range(n))
    parts = [x.strip() for x in str(raw).split(",")]
    if len(parts) != n or not all(x.isdigit() for x in parts):
        return None
    return [int(x) for x in parts]


def _keyed(matrix: list[list[float]], gold: list[str], claims: list[str], main: set[str],
           hard: bool) -> tuple[float, float, float]:
    """LiveDRBench flights / novel datasets: one gold claim per ground-truth key (``key: value``), each graded
    against the prediction's value of the same key; a key counts when judged a match (the benchmark's 0-3
    grade binarised: 2 or 3), and nothing counts unless every main key does (the identification gate).
    Precision = counted / predicted keys, recall = counted / gold keys. Soft: expected counts, independent."""
    keys = [k for k, _ in (_split_key(g, [g.partition(":")[0].strip()]) for g in gold)]
    pred_keys = [c.partition(":")[0].strip() for c in claims]
    ps = []
    for i, key in enumerate(keys):
        js = [j for j, k in enumerate(pred_keys) if k == key]
        q = max((matrix[i][j] for j in js), default=0.0)
        ps.append((1.0 if q >= 0.5 else 0.0) if hard else q)
    gate = 1.0
    for key, q in zip(keys, ps):
        if key in main:
            gate *= q
    rest = sum(q for key, q in zip(keys, ps) if key not in main)
    score = gate * (sum(1 for key in keys if key in main) + rest) if gate > 0 else 0.0
    return _prf(score, len(claims), score, len(gold))


def _livedr(r: Record, p: Mapping[str, Any]) -> float | None:
    """LiveDRBench's per-category formula on the record's P(match) matrix (see the metric's description)."""
    found = _livedr_pairs(r)
    if found is None:
        return None
    matrix, gold, claims, fields = found
    category = str(fields.get(p["subset"], ""))
    hard = bool(p["hard"])
    if not claims:
        prf = (0.0, 0.0, 0.0)
    elif category in p["keyed"] or any(category.startswith(k) for k in p["keyed"] if k.endswith("-")):
        main = {x.strip() for x in str(fields.get("main_claims", "")).split(",") if x.strip()}
        prf = _keyed(matrix, gold, claims, main, hard)
    elif category in p["product"]:
        classes = _classes(fields, len(gold))
        if classes is None:
            return None
        keys = list(p["keys"])
        parts = []
        for key in keys:
            gi = [i for i, g in enumerate(gold) if _split_key(g, keys)[0] == key]
            cj = [j for j, c in enumerate(claims) if _split_key(c, keys)[0] == key]
            sub = [[matrix[i][j] for j in cj] for i in gi]
            g_texts = [_split_key(gold[i], keys)[1] for i in gi]
            c_texts = [_split_key(claims[j], keys)[1] for j in cj]
            cls = [classes[i] for i in gi]
            parts.append(_any_match(sub, g_texts, c_texts, cls, hard) if gi and cj else (0.0, 0.0, 0.0))
        prf = tuple(math.prod(x[k] for x in parts) for k in range(3))  # type: ignore[assignment]
    else:
        classes = _classes(fields, len(gold))
        if classes is None:
            return None
        prf = _any_match(matrix, gold, claims, classes, hard)
    return prf[("precision", "recall", "f1").index(p["value"])]


for _metric in (
    Metric("last_true_share", ("checklist",), _last_true_share, {"hard": True},
           "PuzzleWorld: the index of the last reference step judged true (at any position) over the number of "
           "reference steps (one check per step); hard: P(true) >= 0.5 as the benchmark's verdicts; soft: the "
           "expectation with independent steps.", readings={"hard": {"hard": True}, "soft": {"hard": False}}),
    Metric("livedr", ("claims",), _livedr,
           {"value": "f1", "hard": True, "subset": "subset", "keyed": ["flights", "novel-datasets-"],
            "product": ["scifacts-materials"], "keys": ["material", "paper_title"]},
           "LiveDRBench per category (item field `subset`): scifacts any-match precision/recall over equivalence "
           "classes (item field gold_class: each gold claim's class); materials the product of the per-key "
           "(`keys`) numbers, F1_material x F1_title; keyed categories (flights, novel-datasets-*) per key "
           "`key: value`, a key counting when matched, all zero unless the main keys (item field main_claims) "
           "match; hard: P(match) >= 0.5, soft: expected.", choices={"value": ("precision", "recall", "f1")},
           readings={"hard": {"hard": True}, "soft": {"hard": False}}),
):
    register_metric(_metric)
