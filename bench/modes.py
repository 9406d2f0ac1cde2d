"""The criteria and checklist modes on real human-labelled data, with the default judge.

Three studies, each on a deterministic subset of whole units (seeded, stratified; every larger budget
keeps the smaller one's units, so the store only judges what is missing):

- topical: Topical-Chat USR, `Judge.criteria` on the five USR criteria (levels = the human ranges).
  Per criterion, Spearman and Kendall (tau-b) of the judge's scores with the human per-criterion means,
  pooled over all responses and within dialogue (mean over dialogues of the per-dialogue correlation),
  for the argmax (discrete) against the distribution scores (geval, expected, trustjudge); the same for
  the equally weighted aggregate against the human `overall` rating.
- qags: QAGS CNN/DM, `Judge.checklist` with YES/NO, one check per summary sentence, the article as
  evidence. Per sentence P(YES) against the worker majority: accuracy (P > 0.5), Cohen's kappa, AUROC,
  Brier, ECE and a reliability table; per summary the expected number of supported sentences (Poisson-
  binomial mean) against the human count.
- summhay: Summary of a Haystack, `Judge.checklist` with FULL=1, PARTIAL=0.5, NO=0, one check per
  reference insight. The dataset README's metrics (3-class accuracy, Cohen's and quadratic kappa,
  Pearson r of the coverage score, binary accuracy, bias, summary-level r) for our argmax label and our
  expected value, and for the six published judges on exactly the same (subtopic, summary, insight)
  triples.

Run: .venv/bin/python bench/modes.py                  # the recorded budget (60-100 min here, 2 shared cores)
     .venv/bin/python bench/modes.py --budget 0.2     # smoke run (~10 min: one unit or a few per dataset)
     .venv/bin/python bench/modes.py --budget 3 --datasets qags   # extend one study
Data: ../shared/data (or --data DIR). Store: bench/results/work/modes.sqlite. Results: bench/results/modes.{md,json};
datasets not run keep their previous results.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from _common import RESULTS, corr, fmt, machine, write_results
from trustjudge import InputError, Item, Judge, LabelSet
from trustjudge.audit._stats import jsonable
from trustjudge.engine import _aggregates as A
from trustjudge.io._adapters import iter_dataset
from trustjudge.io._datasets import USR_RANGES, summhay_published
from trustjudge.io._subsets import budget_subset

JUDGE = "llamacpp/qwen2.5-coder-1.5b"
TOPICAL = "topical-chat-usr/topical_chat.json"
QAGS = "qags-cnndm/mturk_cnndm.jsonl"
SUMMHAY = "summhay-coverage/eval_benchmark_data.json"
BUDGETS = {"topical": 210, "qags": 60, "summhay": 90}
"""Judgments at --budget 1: 7 dialogues x 6 responses x 5 criteria; ~20 QAGS summaries (3-4 sentences
each); ~4 SummHay subtopics x 3 summaries x 5-10 insights. At least one unit each, whatever the budget.
Measured here with the 2 cores shared with other benchmarks: 6.5-11 s per criterion judgment, 15-30 s per
QAGS sentence (45-90 s per article), 9-15 s per SummHay insight: 60-100 min in all, ~10 min at --budget 0.2."""
SUMMARIES_PER_SUBTOPIC = 3
COVERAGE = LabelSet.parse("FULL=1,PARTIAL=0.5,NO=0")
SCORE = {"FULL": 1.0, "PARTIAL": 0.5, "NO": 0.0}
CLASS = {"NO": 0, "PARTIAL": 1, "FULL": 2}
METHODS = ("discrete", "geval", "expected", "trustjudge")
BOOTSTRAP = 1000
JUDGED = ("judgments", "model_calls", "seconds", "s_per_judgment", "load_avg_start", "load_avg_end")
NOTES = "<!-- notes: kept by bench/modes.py -->"


# -- statistics -------------------------------------------------------------------------------------

def _within(kind: str, groups: dict[str, tuple[list[float], list[float]]]) -> tuple[float, int]:
    """Mean over groups of the per-group correlation, and how many groups had one (not constant)."""
    vals = [corr(kind, x, y) for x, y in groups.values()]
    vals = [v for v in vals if v == v]
    return (float(np.mean(vals)) if vals else math.nan), len(vals)


def _ci(units: list[str], stat: Callable[[Counter[str]], float], seed: int = 0) -> list[float]:
    """95% percentile interval of ``stat`` over a bootstrap of whole units (dialogues, articles, subtopics):
    ``stat`` gets each resample as a Counter of units (a unit drawn twice counts twice)."""
    if len(units) < 2:
        return [math.nan, math.nan]
    rng = random.Random(seed)
    out = []
    for _ in range(BOOTSTRAP):
        draw = [rng.choice(units) for _ in units]
        v = stat(Counter(draw))
        if v == v:
            out.append(v)
    if len(out) < BOOTSTRAP // 2:
        return [math.nan, math.nan]
    return [float(np.percentile(out, 2.5)), float(np.percentile(out, 97.5))]


def _pooled(rows: list[tuple[str, float, float]], kind: str) -> Callable[[Counter[str]], float]:
    """A bootstrap statistic: the pooled correlation over ``(unit, x, y)`` rows, units repeated as drawn."""
    def stat(draw: Counter[str]) -> float:
        xs, ys = [], []
        for unit, x, y in rows:
            xs += [x] * draw[unit]
            ys += [y] * draw[unit]
        return corr(kind, xs, ys)
    return stat


def _quantile_table(ps: Sequence[float], ys: Sequence[int], k: int) -> list[dict[str, float]]:
    """Reliability over ``k`` near-equal-count groups of sentences sorted by P(YES) (ties kept together
    only by sort order): where equal-width bins put nearly everything in the top bin, these still rank."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out = []
    for part in np.array_split(np.array(order), min(k, len(order))):
        idx = [int(i) for i in part]
        out.append({"lo": ps[idx[0]], "hi": ps[idx[-1]], "count": len(idx),
                    "mean_prob": float(np.mean([ps[i] for i in idx])),
                    "frequency": float(np.mean([ys[i] for i in idx]))})
    return out


def quadratic_kappa(a: Sequence[int], b: Sequence[int], k: int = 3) -> float:
    n = len(a)
    if n == 0:
        return math.nan
    obs = np.zeros((k, k))
    for x, y in zip(a, b):
        obs[x, y] += 1
    exp = np.outer(obs.sum(1), obs.sum(0)) / n
    w = np.array([[(i - j) ** 2 for j in range(k)] for i in range(k)]) / (k - 1) ** 2
    den = float((w * exp).sum())
    return 1 - float((w * obs).sum()) / den if den > 0 else math.nan


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def _zero(x: float) -> float:
    return 0.0 if x != x else x


def _signed(x: Any) -> str:
    return "-" if x is None or x != x else f"{x:+.2f}"


def ci_text(ci: list[float]) -> str:
    return "" if not ci or ci[0] is None or ci[0] != ci[0] else f" [{ci[0]:.2f}, {ci[1]:.2f}]"


# -- subsets ----------------------------------------------------------------------------------------

def load(path: Path, fmt_name: str) -> list[Item]:
    return [v for v in iter_dataset(path, fmt_name) if not isinstance(v, InputError)]


def pick(items: list[Item], budget: int, per_item: Callable[[Item], int],
         key: Callable[[Item], str] | None = None) -> list[Item]:
    chosen = budget_subset(items, budget, per_item, seed=0, key=key)
    if not chosen:  # the budget is below one unit: take the first unit of the same order
        chosen = budget_subset(items, min(per_item(it) for it in items), per_item, seed=0, key=key)[:1]
    return chosen


def summhay_units(items: list[Item]) -> list[Item]:
    """Each subtopic with SUMMARIES_PER_SUBTOPIC of its summaries (a seeded shuffle of the summaries,
    sorted by response id first; a larger number keeps the smaller one's summaries)."""
    out = []
    for it in items:
        rs = sorted(it.responses, key=lambda r: r.id)
        random.Random(f"{it.id}/0").shuffle(rs)
        out.append(dataclasses.replace(it, responses=tuple(rs[:SUMMARIES_PER_SUBTOPIC])))
    return out


def topic_of(item: Item) -> str:
    return item.question.split("Topic: ", 1)[-1].split("\n", 1)[0][:40]


# -- running ----------------------------------------------------------------------------------------

def run_task(judge: Judge, name: str, items: list[Item], task: Any, judgments: int) -> tuple[list[Any], dict[str, Any]]:
    plan = judge.plan(items, task)
    print(f"{name}: {len(items)} units, {judgments} judgments, {plan.stored} stored, "
          f"{plan.prompt_tokens_to_run} prompt tokens to run", flush=True)
    calls, stored = judge.stats.model_calls, judge.stats.from_store
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    records = []
    for rec in judge.run(task, items):
        records.append(rec)
        print(f"  {name}: {len(records)} records, {judge.stats.model_calls - calls} model calls, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    elapsed = time.perf_counter() - t0
    made = judge.stats.model_calls - calls
    timing = {"judgments": judgments, "model_calls": made, "from_store": judge.stats.from_store - stored,
              "seconds": elapsed, "s_per_judgment": elapsed / made if made else None,
              "prompt_tokens_to_run": plan.prompt_tokens_to_run, "prompt_tokens": plan.prompt_tokens,
              "load_avg_start": load0, "load_avg_end": os.getloadavg()[0]}
    return records, timing


def mass_summary(masses: list[float], unscored: Counter[str], n: int) -> dict[str, Any]:
    return {"judgments": n, "unscored": dict(unscored), "label_mass_mean": float(np.mean(masses)) if masses else None,
            "label_mass_min": float(np.min(masses)) if masses else None,
            "label_mass_p10": float(np.percentile(masses, 10)) if masses else None}


def study_topical(judge: Judge, data: Path, factor: float) -> dict[str, Any]:
    items = load(data / TOPICAL, "topical-chat-criteria")
    per = lambda it: len(it.responses) * len(it.criteria)  # noqa: E731
    subset = pick(items, int(BUDGETS["topical"] * factor), per)
    task = judge.criteria_task()
    records, timing = run_task(judge, "topical", subset, task, sum(per(it) for it in subset))
    masses, unscored = [], Counter()
    per_criterion: dict[str, list[tuple[str, dict[str, float], float]]] = {}
    agg_rows: list[tuple[str, dict[str, float], float, float, float | None]] = []
    for rec in records:
        for c in rec.criteria:
            if c.label_mass is not None:
                masses.append(c.label_mass)
            if c.unscored is not None:
                unscored[c.unscored] += 1
                continue
            per_criterion.setdefault(c.name, []).append((rec.item_id, {m: _num(c.scores[m]) for m in METHODS},
                                                         _num(c.human)))
        if rec.unscored is None:
            resp = next(r for it in subset if it.id == rec.item_id for r in it.responses if r.id == rec.response_id)
            hc = resp.human_criteria or {}
            # The adapter stores each rating on the criterion's levels 1..N (N = hi - lo + 1): onto 0-1.
            human_norm = float(np.mean([(hc[k] - 1) / (hi - lo) for k, (lo, hi) in USR_RANGES.items()]))
            agg_rows.append((rec.item_id, {m: _num(rec.aggregate[m]) for m in METHODS}, _num(resp.human_score),
                             human_norm, rec.human))

    def block(rows: list[tuple[str, dict[str, float], float]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(rows), "units": len({u for u, _, _ in rows})}
        for m in METHODS:
            groups: dict[str, tuple[list[float], list[float]]] = {}
            for u, s, h in rows:
                g = groups.setdefault(u, ([], []))
                g[0].append(s[m])
                g[1].append(h)
            xs, ys = [s[m] for _, s, _ in rows], [h for _, _, h in rows]
            res: dict[str, Any] = {}
            for kind in ("spearman", "kendall"):
                res[f"{kind}_pooled"] = corr(kind, xs, ys)
                res[f"{kind}_within"], res["dialogues_within"] = _within(kind, groups)
            res["spearman_pooled_ci"] = _ci(sorted(groups), _pooled([(u, s[m], h) for u, s, h in rows], "spearman"))
            # a dialogue where the score (or the human) is constant counts as 0, so every method averages over all
            res["spearman_within_all"] = float(np.mean([_zero(corr("spearman", x, y)) for x, y in groups.values()]))
            res["distinct_scores"] = len(set(xs))
            if m != "discrete":  # paired bootstrap (same resampled dialogues) of the gain over the argmax
                this = _pooled([(u, s[m], h) for u, s, h in rows], "spearman")
                argmax = _pooled([(u, s["discrete"], h) for u, s, h in rows], "spearman")
                res["gain_over_discrete"] = res["spearman_pooled"] - corr(
                    "spearman", [s["discrete"] for _, s, _ in rows], ys)
                res["gain_over_discrete_ci"] = _ci(sorted(groups), lambda d, a=this, b=argmax: a(d) - b(d))
            out[m] = res
        return out

    result: dict[str, Any] = {"criteria": {name: block(rows) for name, rows in per_criterion.items()}}
    result["aggregate_vs_overall"] = block([(u, s, h) for u, s, h, _, _ in agg_rows])
    result["aggregate_vs_human_criteria"] = block([(u, s, hn) for u, s, _, hn, _ in agg_rows])
    # CriteriaRecord.human against the human criteria mean normalised to [0, 1] per USR range (see the report).
    diffs = [rh - hn for _, _, _, hn, rh in agg_rows if rh is not None]
    result["record_human_check"] = {
        "records": len(diffs), "record_human_min": min((rh for *_, rh in agg_rows if rh is not None), default=None),
        "max_abs_diff_from_range_normalised": max((abs(d) for d in diffs), default=None),
        "mean_diff": float(np.mean(diffs)) if diffs else None}
    result["human_overall_mean"] = float(np.mean([h for _, _, h, _, _ in agg_rows])) if agg_rows else None
    result["discrete_level_counts"] = {name: dict(Counter(f"{s['discrete']:g}" for _, s, _ in rows))
                                       for name, rows in per_criterion.items()}
    result["subset"] = {"how": f"budget_subset(seed=0) of the {len(items)} dialogues (all have 6 responses), "
                        f"{BUDGETS['topical']} x budget judgments of 30 each", "items": [it.id for it in subset],
                        "of": len(items)}
    result["timing"] = timing
    result["mass"] = mass_summary(masses, unscored, timing["judgments"])
    return result


def study_qags(judge: Judge, data: Path, factor: float) -> dict[str, Any]:
    items = load(data / QAGS, "qags")
    per = lambda it: sum(len(r.checklist or ()) for r in it.responses)  # noqa: E731

    def key(it: Item) -> str:  # stratum: summaries with an unsupported sentence vs fully supported ones
        return "all-yes" if all(v == 1.0 for r in it.responses for v in (r.human_checks or {}).values()) else "some-no"
    subset = pick(items, int(BUDGETS["qags"] * factor), per, key)
    task = judge.checklist_task()
    records, timing = run_task(judge, "qags", subset, task, sum(per(it) for it in subset))
    masses, unscored = [], Counter()
    rows: list[tuple[str, float, int]] = []
    summaries: list[tuple[str, float, float, float | None, int]] = []
    ties = 0
    for rec in records:
        for c in rec.checks:
            if c.label_mass is not None:
                masses.append(c.label_mass)
            if c.unscored is not None:
                unscored[c.unscored] += 1
            elif c.human in (0.0, 1.0):
                rows.append((rec.item_id, float(c.p_pass), int(c.human)))
            else:
                ties += 1
        if rec.unscored is None:
            human_count = sum(c.human or 0.0 for c in rec.checks)
            summaries.append((rec.item_id, float(rec.expected_passed), human_count, rec.p_all, len(rec.checks)))
    ps, ys = [p for _, p, _ in rows], [y for _, _, y in rows]
    pred = [int(p > 0.5) for p in ps]
    res: dict[str, Any] = {"sentences": len(rows), "ties_skipped": ties, "positives": sum(ys)}
    if rows:
        res.update(accuracy=sum(a == b for a, b in zip(pred, ys)) / len(ys),
                   majority_baseline=max(sum(ys), len(ys) - sum(ys)) / len(ys),
                   kappa=A.cohen_kappa(pred, ys), auroc=A.auroc(ps, ys), brier=A.brier(ps, ys),
                   brier_base_rate=A.brier([sum(ys) / len(ys)] * len(ys), ys), ece=A.ece(ps, ys),
                   mean_p_yes=float(np.mean(ps)), predicted_yes=sum(pred),
                   reliability=[dataclasses.asdict(b) for b in A.reliability(ps, ys)],
                   quintiles=_quantile_table(ps, ys, 5))
        by_unit: dict[str, list[tuple[float, int]]] = {}
        for u, p, y in rows:
            by_unit.setdefault(u, []).append((p, y))

        def auroc_stat(draw: Counter[str]) -> float:
            pp = [p for u, n in draw.items() for _ in range(n) for p, _ in by_unit[u]]
            yy = [y for u, n in draw.items() for _ in range(n) for _, y in by_unit[u]]
            v = A.auroc(pp, yy)
            return math.nan if v is None else v
        res["auroc_ci"] = _ci(sorted(by_unit), auroc_stat)
    if summaries:
        exp, hum = [e for _, e, _, _, _ in summaries], [h for _, _, h, _, _ in summaries]
        all_h = [int(h == n) for _, _, h, _, n in summaries]
        p_all = [float(pa) for _, _, _, pa, _ in summaries if pa is not None]
        res["per_summary"] = {
            "summaries": len(summaries), "spearman": corr("spearman", exp, hum), "pearson": corr("pearson", exp, hum),
            "mae": float(np.mean([abs(e - h) for e, h in zip(exp, hum)])),
            "bias": float(np.mean([e - h for e, h in zip(exp, hum)])),
            "mean_sentences": float(np.mean([n for *_, n in summaries])),
            "all_supported_human": sum(all_h),
            "p_all_auroc": A.auroc(p_all, all_h) if len(p_all) == len(all_h) else None,
            "p_all_brier": A.brier(p_all, all_h) if len(p_all) == len(all_h) else None}
    res["subset"] = {"how": f"budget_subset(seed=0) of the {len(items)} articles, stratified by whether the summary "
                     f"has a sentence the worker majority calls unsupported; {BUDGETS['qags']} x budget judgments",
                     "items": [it.id for it in subset], "of": len(items)}
    res["timing"] = timing
    res["mass"] = mass_summary(masses, unscored, timing["judgments"])
    return res


def _label_metrics(triples: list[tuple[str, str, str]], human: dict[tuple[str, str, str], str],
                   pred: dict[tuple[str, str, str], str], value: dict[tuple[str, str, str], float] | None = None
                   ) -> dict[str, Any]:
    """The SummHay README's metrics of one judge over ``triples`` (those it labelled)."""
    keys = [k for k in triples if k in pred]
    if not keys:
        return {"n": 0}
    h = [human[k] for k in keys]
    p = [pred[k] for k in keys]
    sh, sp = [SCORE[x] for x in h], [SCORE[x] for x in p]
    out: dict[str, Any] = {
        "n": len(keys), "accuracy": sum(a == b for a, b in zip(h, p)) / len(keys), "kappa": A.cohen_kappa(h, p),
        "quadratic_kappa": quadratic_kappa([CLASS[x] for x in h], [CLASS[x] for x in p]),
        "pearson": corr("pearson", sp, sh),
        "binary_accuracy": sum((a != "NO") == (b != "NO") for a, b in zip(h, p)) / len(keys),
        "bias": float(np.mean(sp) - np.mean(sh)), "labels": dict(Counter(p)),
        "confusion": [[sum(1 for a, b in zip(h, p) if a == r and b == c) for c in ("NO", "PARTIAL", "FULL")]
                      for r in ("NO", "PARTIAL", "FULL")]}
    by_summary: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for k, a, b in zip(keys, sh, sp):
        g = by_summary.setdefault(k[:2], ([], []))
        g[0].append(b)
        g[1].append(a)
    out["summary_pearson"] = corr("pearson", [float(np.mean(x)) for x, _ in by_summary.values()],
                                   [float(np.mean(y)) for _, y in by_summary.values()])
    if value is not None:
        ev = [value[k] for k in keys]
        out["expected_pearson"] = corr("pearson", ev, sh)
        out["expected_spearman"] = corr("spearman", ev, sh)
        out["expected_mae"] = float(np.mean([abs(a - b) for a, b in zip(ev, sh)]))
        out["expected_bias"] = float(np.mean(ev) - np.mean(sh))
        sums: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
        for k, a, b in zip(keys, sh, ev):
            g = sums.setdefault(k[:2], ([], []))
            g[0].append(b)
            g[1].append(a)
        out["expected_summary_pearson"] = corr("pearson", [float(np.mean(x)) for x, _ in sums.values()],
                                                [float(np.mean(y)) for _, y in sums.values()])
    return out


def study_summhay(judge: Judge, data: Path, factor: float) -> dict[str, Any]:
    items = load(data / SUMMHAY, "summhay")
    units = summhay_units(items)
    per = lambda it: sum(len(it.checks(r)) for r in it.responses)  # noqa: E731
    subset = pick(units, int(BUDGETS["summhay"] * factor), per, topic_of)
    task = judge.checklist_task(labels=COVERAGE)
    records, timing = run_task(judge, "summhay", subset, task, sum(per(it) for it in subset))
    masses, unscored = [], Counter()
    human: dict[tuple[str, str, str], str] = {}
    ours: dict[tuple[str, str, str], str] = {}
    value: dict[tuple[str, str, str], float] = {}
    judged: list[tuple[str, str, str]] = []
    p_mass = {lab: [] for lab in SCORE}
    for rec in records:
        resp = next(r for it in subset if it.id == rec.item_id for r in it.responses if r.id == rec.response_id)
        for c in rec.checks:
            if c.label_mass is not None:
                masses.append(c.label_mass)
            if c.unscored is not None:
                unscored[c.unscored] += 1
                continue
            k = (rec.item_id, rec.response_id, c.id)
            judged.append(k)
            human[k] = str((resp.human_checks or {})[c.id]).upper()
            ours[k] = max(c.probabilities, key=c.probabilities.get)  # type: ignore[arg-type]
            value[k] = float(c.value)
            for lab, p in c.probabilities.items():
                p_mass[lab].append(p)
    published = summhay_published(data / SUMMHAY)
    judges = sorted({j for labels in published.values() for j in labels})
    res: dict[str, Any] = {"units": len(judged), "human_labels": dict(Counter(human.values())),
                           "mean_probabilities": {lab: float(np.mean(v)) if v else None for lab, v in p_mass.items()}}
    res["ours"] = _label_metrics(judged, human, ours, value)
    res["ours"]["majority_baseline"] = max(Counter(human.values()).values()) / len(judged) if judged else None
    # the same statistics for the ordinal label of the expected value (nearest of 0 / 0.5 / 1)
    rounded = {k: min(SCORE, key=lambda lab: abs(SCORE[lab] - v)) for k, v in value.items()}
    res["ours_expected_rounded"] = _label_metrics(judged, human, rounded)
    every = list(published)
    full_human = _all_human(data)
    res["published"] = {}
    for j in judges:
        pred = {k: v[j] for k, v in published.items() if j in v}
        res["published"][j] = {"same_triples": _label_metrics(judged, human, pred),
                               "all_units": _label_metrics(every, full_human, pred)}
    by_unit: dict[str, list[tuple[float, float]]] = {}
    for k in judged:
        by_unit.setdefault(k[0], []).append((SCORE[ours[k]], SCORE[human[k]]))
    res["ours"]["pearson_ci"] = _ci(sorted(by_unit), _pooled([(k[0], SCORE[ours[k]], SCORE[human[k]])
                                                              for k in judged], "pearson"))
    res["ours"]["expected_pearson_ci"] = _ci(sorted(by_unit), _pooled([(k[0], value[k], SCORE[human[k]])
                                                                       for k in judged], "pearson"))
    res["subset"] = {"how": f"each of the {len(items)} subtopics cut to {SUMMARIES_PER_SUBTOPIC} summaries (a seeded "
                     "shuffle of its summaries), then budget_subset(seed=0) of those, stratified by topic; "
                     f"{BUDGETS['summhay']} x budget judgments",
                     "items": {it.id: [r.id for r in it.responses] for it in subset}, "of": len(items)}
    res["timing"] = timing
    res["mass"] = mass_summary(masses, unscored, timing["judgments"])
    return res


def _all_human(data: Path) -> dict[tuple[str, str, str], str]:
    out = {}
    for it in load(data / SUMMHAY, "summhay"):
        for r in it.responses:
            for cid, lab in (r.human_checks or {}).items():
                out[(it.id, r.id, cid)] = str(lab).upper()
    return out


# -- report -----------------------------------------------------------------------------------------

def timing_line(t: dict[str, Any]) -> str:
    j = t.get("judged") or t
    line = (f"{t['judgments']} judgments. Speed: **{fmt(j.get('s_per_judgment'), 1)} s per judgment** "
            f"({j['model_calls']} model calls in {j['seconds']:.0f} s" + (
                f", load average {j['load_avg_start']:.1f} -> {j['load_avg_end']:.1f}"
                if j.get("load_avg_start") is not None else ""))
    if t.get("judged") and not t["model_calls"]:
        line += f"; measured by `{j.get('command')}`, {j.get('finished')}; this run read all {t['from_store']} " \
                "from the store"
    elif t["from_store"]:
        line += f"; {t['from_store']} more read from the store, judged by earlier runs"
    return line + f"; {t['prompt_tokens']} prompt tokens in all)"


def mass_line(m: dict[str, Any]) -> str:
    return (f"label mass (probability of the label set after the marker): mean {fmt(m['label_mass_mean'], 3)}, "
            f"10th percentile {fmt(m['label_mass_p10'], 3)}, min {fmt(m['label_mass_min'], 3)}; unscored: "
            f"{sum(m['unscored'].values())} of {m['judgments']}" + (f" {m['unscored']}" if m["unscored"] else ""))


def report_topical(r: dict[str, Any]) -> list[str]:
    lines = ["## Topical-Chat USR: criteria mode", "",
             f"Subset: {len(r['subset']['items'])} of {r['subset']['of']} dialogues ({r['subset']['how']}). "
             + timing_line(r["timing"]) + ".", "", mass_line(r["mass"]) + ".", "",
             "Spearman / Kendall tau-b with the human mean rating; pooled over all responses (95% interval from a "
             "bootstrap over dialogues), with the gain in pooled Spearman over the argmax (paired: the same resampled "
             "dialogues), and within dialogue: the mean over dialogues of the per-dialogue correlation, over the n "
             "dialogues where neither side is constant, and over all of them with a constant side counted as 0 (the "
             "argmax is often constant within a dialogue, which the first average hides).", "",
             "| criterion | method | distinct scores | Spearman pooled | gain over discrete (paired) | "
             "Kendall pooled | Spearman within (n) | Spearman within, all (constant = 0) | Kendall within |",
             "|---|---|---|---|---|---|---|---|---|"]
    blocks = [*r["criteria"].items(), ("aggregate vs overall", r["aggregate_vs_overall"]),
              ("aggregate vs mean human criteria", r["aggregate_vs_human_criteria"])]
    for name, b in blocks:
        for m in METHODS:
            x = b[m]
            gain = "" if m == "discrete" else f"{_signed(x.get('gain_over_discrete'))}" \
                f"{ci_text(x.get('gain_over_discrete_ci', []))}"
            lines.append(f"| {name} | {m} | {x['distinct_scores']} | {fmt(x['spearman_pooled'])}"
                         f"{ci_text(x['spearman_pooled_ci'])} | {gain} | {fmt(x['kendall_pooled'])} | "
                         f"{fmt(x['spearman_within'])} ({x['dialogues_within']}) | "
                         f"{fmt(x.get('spearman_within_all'))} | {fmt(x['kendall_within'])} |")
    lines += ["", "Argmax levels the judge gave, per criterion: " + "; ".join(
        f"{k} {dict(sorted(v.items()))}" for k, v in r["discrete_level_counts"].items()) + "."]
    chk = r["record_human_check"]
    if chk["mean_diff"] is not None and abs(chk["mean_diff"]) > 1e-9:
        lines += ["", "**Library issue.** `CriteriaRecord.human` differs from the mean of the human criteria "
                  f"normalised by their ranges by {chk['mean_diff']:+.3f} on average (min `human` "
                  f"{fmt(chk['record_human_min'], 3)}): "
                  "`CriteriaTask._record` maps every human rating with `(x - 1) / (points - 1)`, but the adapter keeps "
                  "the 0-1 criteria (understandability, groundedness) on their human 0-1 range, not on levels 1-2. The "
                  "table above uses `Response.human_score` (overall) and its own range-normalised mean instead."]
    return lines


def report_qags(r: dict[str, Any]) -> list[str]:
    lines = ["## QAGS CNN/DM: checklist mode (YES/NO per summary sentence)", "",
             f"Subset: {len(r['subset']['items'])} of {r['subset']['of']} articles ({r['subset']['how']}). "
             + timing_line(r["timing"]) + ".", "", mass_line(r["mass"]) + ".", ""]
    if not r.get("sentences"):
        return [*lines, "No scored sentence."]
    lines += [f"{r['sentences']} sentences, {r['positives']} supported by the worker majority "
              f"({r['ties_skipped']} ties skipped).", "",
              "| accuracy (P(YES) > 0.5) | majority baseline | Cohen kappa | AUROC | Brier | Brier of base rate | "
              "ECE | mean P(YES) | predicted YES |", "|---|---|---|---|---|---|---|---|---|",
              f"| {fmt(r['accuracy'], 3)} | {fmt(r['majority_baseline'], 3)} | {fmt(r['kappa'])} | "
              f"{fmt(r['auroc'])}{ci_text(r['auroc_ci'])} | {fmt(r['brier'], 3)} | {fmt(r['brier_base_rate'], 3)} | "
              f"{fmt(r['ece'], 3)} | {fmt(r['mean_p_yes'], 3)} | {r['predicted_yes']} / {r['sentences']} |", "",
              "Reliability (10 equal-width bins of P(YES); empty bins omitted):", "",
              "| bin | sentences | mean P(YES) | fraction supported |", "|---|---|---|---|"]
    for b in r["reliability"]:
        lines.append(f"| {b['lo']:.1f}-{b['hi']:.1f} | {b['count']} | {b['mean_prob']:.3f} | {b['frequency']:.3f} |")
    if r.get("quintiles"):
        lines += ["", "The same by fifths of the sentences sorted by P(YES) (equal counts):", "",
                  "| P(YES) range | sentences | mean P(YES) | fraction supported |", "|---|---|---|---|"]
        for b in r["quintiles"]:
            lines.append(f"| {b['lo']:.3f}-{b['hi']:.3f} | {b['count']} | {b['mean_prob']:.3f} | "
                         f"{b['frequency']:.3f} |")
    s = r.get("per_summary")
    if s:
        lines += ["", f"Per summary ({s['summaries']} summaries, {s['mean_sentences']:.2f} sentences on average): "
                  f"expected number of supported sentences vs the human count: Spearman {fmt(s['spearman'])}, Pearson "
                  f"{fmt(s['pearson'])}, MAE {fmt(s['mae'])} sentences, bias {s['bias']:+.2f}. P(all supported) vs "
                  f"the {s['all_supported_human']} summaries the workers fully support: AUROC {fmt(s['p_all_auroc'])}, "
                  f"Brier {fmt(s['p_all_brier'], 3)}."]
    return lines


def report_summhay(r: dict[str, Any]) -> list[str]:
    subset = r["subset"]["items"]
    lines = ["## Summary of a Haystack: checklist mode (FULL / PARTIAL / NO per reference insight)", "",
             f"Subset: {len(subset)} of {r['subset']['of']} subtopics, {sum(len(v) for v in subset.values())} "
             f"summaries ({r['subset']['how']}). " + timing_line(r["timing"]) + ".", "", mass_line(r["mass"]) + ".", "",
             f"{r['units']} (summary, insight) units; human labels {r['human_labels']}; our mean probabilities "
             + ", ".join(f"{k} {fmt(v, 3)}" for k, v in r["mean_probabilities"].items()) + ".", "",
             "Metrics as in the dataset README (s = FULL 1, PARTIAL 0.5, NO 0): 3-class accuracy, Cohen's kappa, "
             "quadratic-weighted kappa, Pearson r of s (the paper's instance-level correlation), binary accuracy "
             "(covered or not), bias = mean s(judge) - mean s(human), summary-level r (Pearson over summaries of the "
             "mean s). Published judges: on exactly our triples, and (in brackets) on all 1,419 units.", "",
             "| judge | units | accuracy | Cohen kappa | quad. kappa | Pearson r | binary acc | bias | summary r |",
             "|---|---|---|---|---|---|---|---|---|"]

    def row(name: str, m: dict[str, Any], full: dict[str, Any] | None = None, extra: str = "") -> str:
        def cell(key: str, d: int = 2) -> str:
            v = fmt(m.get(key), d)
            return v + (f" ({fmt(full.get(key), d)})" if full else "")
        return (f"| {name} | {m.get('n', 0)} | {cell('accuracy', 3)} | {cell('kappa')} | "
                f"{cell('quadratic_kappa')} | {cell('pearson')}{extra} | {cell('binary_accuracy', 3)} | "
                f"{cell('bias')} | {cell('summary_pearson')} |")
    o = r["ours"]
    lines.append(row("qwen2.5-coder-1.5b argmax", o, extra=ci_text(o["pearson_ci"])))
    lines.append(row("qwen2.5-coder-1.5b expected, rounded", r["ours_expected_rounded"]))
    for j, m in r["published"].items():
        lines.append(row(j, m["same_triples"], m["all_units"]))
    lines += ["", f"Our expected value (continuous) vs s(human): Pearson {fmt(o.get('expected_pearson'))}"
              f"{ci_text(o['expected_pearson_ci'])}, Spearman {fmt(o.get('expected_spearman'))}, MAE "
              f"{fmt(o.get('expected_mae'), 3)}, bias {fmt(o.get('expected_bias'))}, summary-level r "
              f"{fmt(o.get('expected_summary_pearson'))}. Majority-class baseline accuracy on these units: "
              f"{fmt(o.get('majority_baseline'), 3)}. Our labels: {o.get('labels')}; confusion (rows human NO / "
              f"PARTIAL / FULL, columns ours): {o.get('confusion')}. 95% intervals: bootstrap over subtopics."]
    return lines


def standing(results: dict[str, Any]) -> list[str]:
    out = []
    t = results.get("topical")
    if t:
        agg = t["aggregate_vs_overall"]
        best = max(METHODS, key=lambda m: _num(agg[m]["spearman_pooled"]) if agg[m]["spearman_pooled"] == agg[m][
            "spearman_pooled"] and agg[m]["spearman_pooled"] is not None else -2.0)
        crit = t["criteria"]
        wins = 0
        for b in crit.values():
            base = _num(b["discrete"]["spearman_pooled"])
            for m in ("expected", "trustjudge"):
                v = _num(b[m]["spearman_pooled"])
                wins += v == v and (base != base or v > base)
        out.append(f"- **Topical-Chat** ({len(t['subset']['items'])} dialogues, {agg['n']} responses): "
                   "aggregate vs overall, pooled Spearman discrete "
                   f"{fmt(agg['discrete']['spearman_pooled'])}, expected {fmt(agg['expected']['spearman_pooled'])}, "
                   f"trustjudge {fmt(agg['trustjudge']['spearman_pooled'])} (best: {best}; gain of expected over "
                   f"discrete {_signed(agg['expected'].get('gain_over_discrete'))}"
                   f"{ci_text(agg['expected'].get('gain_over_discrete_ci', []))}); within dialogue (all dialogues) "
                   f"discrete {fmt(agg['discrete'].get('spearman_within_all'))}, expected "
                   f"{fmt(agg['expected'].get('spearman_within_all'))}, trustjudge "
                   f"{fmt(agg['trustjudge'].get('spearman_within_all'))}. Per criterion, expected and trustjudge beat "
                   f"the argmax in {wins} of {2 * len(crit)} (criterion, method) cells of pooled Spearman (the argmax "
                   "has only 2-3 levels and ties a lot).")
    q = results.get("qags")
    if q and q.get("sentences"):
        out.append(f"- **QAGS** ({q['sentences']} sentences): accuracy {fmt(q['accuracy'], 3)} vs the majority "
                   f"baseline {fmt(q['majority_baseline'], 3)}, kappa {fmt(q['kappa'])}, AUROC {fmt(q['auroc'])}"
                   f"{ci_text(q['auroc_ci'])}, Brier {fmt(q['brier'], 3)} (base rate {fmt(q['brier_base_rate'], 3)}), "
                   f"ECE {fmt(q['ece'], 3)}; mean P(YES) {fmt(q['mean_p_yes'], 3)}.")
    s = results.get("summhay")
    if s and s["ours"].get("n"):
        o = s["ours"]
        pub = {j: m["same_triples"].get("accuracy") for j, m in s["published"].items()}
        lo, hi = min(pub.values()), max(pub.values())
        out.append(f"- **SummHay** ({o['n']} units): accuracy {fmt(o['accuracy'], 3)} (majority baseline "
                   f"{fmt(o['majority_baseline'], 3)}), Pearson r {fmt(o['pearson'])} (argmax) / "
                   f"{fmt(o.get('expected_pearson'))} (expected value); the six published judges on the same units: "
                   f"accuracy {fmt(lo, 3)}-{fmt(hi, 3)}.")
    return out


def write(results: dict[str, Any], args: argparse.Namespace, started: float) -> None:
    previous = RESULTS / "modes.json"
    merged: dict[str, Any] = {}
    if previous.exists():
        try:
            merged = json.loads(previous.read_text()).get("datasets", {})
        except json.JSONDecodeError:
            merged = {}
    merged.update(results)
    payload = {"judge": args.judge, "budget": args.budget, "budgets_at_1": BUDGETS, "machine": machine(),
               "command": " ".join(["python", *sys.argv]), "wall_seconds_this_run": time.perf_counter() - started,
               "ran_now": sorted(results), "datasets": merged}
    judging = sum((d.get("timing", {}).get("judged") or {}).get("seconds", 0.0) for d in merged.values())
    md = ["# Judging modes on human-labelled data (bench/modes.py)", "",
          f"Judge: `{args.judge}` (`direct` protocol, label distributions read exactly). Budget: `--budget "
          f"{args.budget}` (judgments at 1: {BUDGETS}). Command: `{payload['command']}` "
          f"({payload['wall_seconds_this_run'] / 60:.0f} min wall; the judging behind these numbers took "
          f"{judging / 60:.0f} min, per dataset below). Machine: {payload['machine']}. The 2 cores were shared "
          "with other benchmarks, so seconds per judgment are upper bounds. Subsets are small: read every number "
          "with its unit count (and interval, where given).", "", "## Where we stand", "", *standing(merged), ""]
    for name, fn in (("topical", report_topical), ("qags", report_qags), ("summhay", report_summhay)):
        if name in merged:
            md += [*fn(merged[name]), ""]
    old = RESULTS / "modes.md"
    if old.exists() and NOTES in old.read_text():  # notes written by hand after the marker are kept
        md += [NOTES + old.read_text().split(NOTES, 1)[1].rstrip("\n")]
    write_results("modes", jsonable(payload), "\n".join(md) + "\n")


STUDIES = {"topical": study_topical, "qags": study_qags, "summhay": study_summhay}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--store", type=Path, default=RESULTS / "work" / "modes.sqlite")
    ap.add_argument("--budget", type=float, default=1.0, help="multiply every dataset's judgment budget")
    ap.add_argument("--datasets", default=",".join(STUDIES), help=f"comma-separated, of {', '.join(STUDIES)}")
    ap.add_argument("--judge", default=JUDGE, help="another judge (mock/hash checks the script without a model)")
    args = ap.parse_args()
    args.store.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    judge = Judge(args.judge, store=args.store)
    results: dict[str, Any] = {}
    previous = RESULTS / "modes.json"
    before = json.loads(previous.read_text()).get("datasets", {}) if previous.exists() else {}
    try:
        for name in args.datasets.split(","):
            t0 = time.perf_counter()
            results[name] = STUDIES[name](judge, args.data, args.budget)
            results[name]["run"] = {"command": " ".join(["python", *sys.argv]), "budget": args.budget,
                                    "judgments_at_1": BUDGETS[name], "finished": time.strftime("%Y-%m-%d %H:%M")}
            timing, earlier = results[name]["timing"], before.get(name, {}).get("timing", {})
            if timing["model_calls"]:
                timing["judged"] = {k: timing[k] for k in JUDGED} | {"command": results[name]["run"]["command"],
                                                                      "finished": results[name]["run"]["finished"]}
            elif earlier.get("judged") or earlier.get("model_calls"):  # all from the store: keep the measured speed
                run = before[name].get("run", {})
                timing["judged"] = earlier.get("judged") or {k: earlier.get(k) for k in JUDGED} | {
                    "command": run.get("command", "an earlier run"), "finished": run.get("finished")}
                timing["s_per_judgment"] = timing["judged"]["s_per_judgment"]
            print(f"{name}: done in {time.perf_counter() - t0:.0f} s", flush=True)
            write(results, args, started)
    finally:
        judge.close()


if __name__ == "__main__":
    main()
