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
    if r.get("_hard") and matching.get("hard_match"):  # graded labels: the most probable grade's verdict
        matrix = [list(map(float, row)) for row in matching["hard_match"]]
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


def _sequential(matrix: list[list[float]], hard: bool) -> tuple[float, float, float]:
    """LiveDRBench prior-art and entities (``src/evals/priorart.py``, ``entities.py``): each prediction in turn
    is searched for in the gold list left; the gold text it matches (the most probable one, the first on a tie)
    is removed. Precision = matched / predictions, recall = matched / gold texts. Hard: a match is P >= 0.5;
    soft: each prediction counts the P of its most probable gold text left, the hard pass's removals kept."""
    left = list(range(len(matrix)))
    tp = 0.0
    m = len(matrix[0]) if matrix else 0
    for j in range(m):
        best = max(left, key=lambda i: (matrix[i][j], -i), default=None)
        if best is None:
            break
        q = matrix[best][j]
        tp += (1.0 if q >= 0.5 else 0.0) if hard else q
        if q >= 0.5:
            left.remove(best)
    return _prf(tp, m, tp, len(matrix))


def _split(raw: Any) -> set[str]:
    return {x.strip() for x in str(raw or "").split(",") if x.strip()}


def _rows(raw: Any, n: int) -> list[str] | None:
    """Each claim's entry (``dK``: the K-th ground-truth dict; ``rK.I``: row I of the K-th list of dicts)."""
    if raw is None:
        return ["d0"] * n
    parts = [x.strip() for x in str(raw).split(",")]
    return parts if len(parts) == n else None


def _row_match(gold_rows: dict[str, list[int]], pred: list[int], primary: set[str], q: Any, gkeys: list[str],
               ckeys: list[str]) -> str | None:
    """The gold row (of those left) a predicted row corresponds to by the primary keys both give, each matched
    (P >= 0.5): the most probable (product of those P), the first on a tie; ``None``: no row corresponds."""
    best: tuple[float, str] | None = None
    for row, gis in gold_rows.items():
        shared = [(i, j) for i in gis for j in pred if gkeys[i] in primary and ckeys[j] == gkeys[i]]
        if not shared or any(q(i, j) < 0.5 for i, j in shared):
            continue
        score = math.prod(q(i, j) for i, j in shared)
        if best is None or score > best[0]:
            best = (score, row)
    return None if best is None else best[1]


def _keyed(matrix: list[list[float]], gold: list[str], claims: list[str], fields: Mapping[str, Any],
           hard: bool) -> tuple[float, float, float] | None:
    """LiveDRBench flights / novel datasets (``src/evals/datasets_flights.py``): one gold claim per ground-truth
    key (``key: value``), graded against the prediction's value of the same key; a key counts when judged a
    match (the benchmark's 0-3 grade binarised: 2 or 3). A list of dicts (item fields ``gold_row`` and
    ``claim_row``: ``rK.I``) is matched row by row: each predicted row, in order, takes the gold row left whose
    primary keys (``primary_keys``) it matches, which is then removed. Nothing of an evaluation counts unless its
    main keys (``main_claims``) do, and nothing at all unless those of the dicts (``dK``) do (the identification
    gate). Keys in ``ignore_keys`` are not counted. Precision = counted / predicted keys, recall = counted /
    gold keys. Soft: expected counts with the hard pass's row matches, pairs independent."""
    gkeys = [g.partition(":")[0].strip() for g in gold]
    ckeys = [c.partition(":")[0].strip() for c in claims]
    grow, crow = _rows(fields.get("gold_row"), len(gold)), _rows(fields.get("claim_row"), len(claims))
    if grow is None or crow is None:
        return None
    main, ignore, primary = (_split(fields.get(k)) for k in ("main_claims", "ignore_keys", "primary_keys"))

    def q(i: int, j: int) -> float:
        return matrix[i][j]

    def graded(gis: list[int], cjs: list[int]) -> list[float]:
        ps = [max((q(i, j) for j in cjs if ckeys[j] == gkeys[i]), default=0.0) for i in gis]
        return [(1.0 if x >= 0.5 else 0.0) if hard else x for x in ps]

    by_gold: dict[str, list[int]] = defaultdict(list)
    by_pred: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(grow):
        by_gold[g].append(i)
    for j, c in enumerate(crow):
        by_pred[c].append(j)
    pairs: list[tuple[list[int], list[int], bool]] = [(gis, by_pred.get(g, []), True) for g, gis in by_gold.items()
                                                      if g.startswith("d")]
    for entry in dict.fromkeys(c.split(".")[0] for c in crow if c.startswith("r")):
        left = {g: gis for g, gis in by_gold.items() if g.split(".")[0] == entry}
        for c, cjs in by_pred.items():
            if c.split(".")[0] == entry:
                row = _row_match(left, cjs, primary, q, gkeys, ckeys)
                if row is not None:
                    pairs.append((left.pop(row), cjs, False))
    gate, total = 1.0, 0.0
    for gis, cjs, is_dict in pairs:
        ps = graded(gis, cjs)
        own = math.prod(x for i, x in zip(gis, ps) if gkeys[i] in main)
        gate *= own if is_dict else 1.0
        counted = [(i, x) for i, x in zip(gis, ps) if gkeys[i] not in ignore]
        total += (1.0 if is_dict else own) * (sum(1 for i, _ in counted if gkeys[i] in main)
                                              + sum(x for i, x in counted if gkeys[i] not in main))
    score = gate * total
    return _prf(score, sum(1 for k in ckeys if k not in ignore), score, sum(1 for k in gkeys if k not in ignore))


def _livedr(r: Record, p: Mapping[str, Any]) -> float | None:
    """LiveDRBench's per-category formula on the record's P(match) matrix (see the metric's description)."""
    found = _livedr_pairs({**r, "_hard": bool(p["hard"])})
    if found is None:
        return None
    matrix, gold, claims, fields = found
    category = str(fields.get(p["subset"], ""))
    hard = bool(p["hard"])
    if not claims:
        prf = (0.0, 0.0, 0.0)
    elif category in p["keyed"] or any(category.startswith(k) for k in p["keyed"] if k.endswith("-")):
        keyed = _keyed(matrix, gold, claims, fields, hard)
        if keyed is None:
            return None
        prf = keyed
    elif category in p["sequential"]:
        prf = _sequential(matrix, hard)
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
            "product": ["scifacts-materials"], "keys": ["material", "paper_title"],
            "sequential": ["prior-art", "entities"]},
           "LiveDRBench per category (item field `subset`): scifacts any-match precision/recall over equivalence "
           "classes (item field gold_class: each gold claim's class); materials the product of the per-key "
           "(`keys`) numbers, F1_material x F1_title; keyed categories (flights, novel-datasets-*) per key "
           "`key: value`, a key counting when matched, all zero unless the main keys (item field main_claims) "
           "match, lists of dicts matched row by row on primary_keys, ignore_keys not counted; sequential "
           "categories (prior-art, entities): each prediction in turn takes the gold text left it matches, removed; "
           "hard: P(match) >= 0.5, soft: expected.", choices={"value": ("precision", "recall", "f1")},
           readings={"hard": {"hard": True}, "soft": {"hard": False}}),
):
    register_metric(_metric)
