"""The guarantee study: calibration, selective verdicts and a cascade on the default judge, from stored judgments.

Reads the judgments bench/guarantee_judge.py made (bench/results/work/guarantee.sqlite, or the committed
export bench/results/guarantee_judgments.jsonl.gz, imported first) and makes **zero model calls**: a
judgment the store lacks is left out (counted), never judged here. For each dataset, ``--splits`` random
calibration/test halves:

- ECE, Brier, accuracy and Cohen's kappa on the test half, raw and after calibration fitted on the other
  half (vector scaling for pairwise first/second/tie; Platt scaling for checklist and stance, two classes);
- for alpha in 0.1, 0.2, 0.3 at delta 0.1: the threshold chosen on the calibration half by fixed-sequence
  testing, then coverage and the realised agreement on the kept test verdicts, and the violation rate
  (share of splits with realised agreement below 1 - alpha; the bound is on the population, so a test half
  of finite size adds its own noise); beside it the same with the map fitted on one half of the calibration
  half and the threshold tested on the other (``split``: the map has not seen the labels its threshold is
  tested on, as the guarantee assumes);
- Topical-Chat pairs take the higher mean ``overall`` rating as the human preference (equal: a tie);
- pairwise: AUROC of three confidence estimators against agreement, and the coverage each gives at
  alpha 0.2; agreement of single / two_pass / likelihood / ppl in the dataset's order, in the reversed
  order and label-balanced (their mean);
- PandaLM: the cascade default judge -> recorded gpt-3.5-turbo verdicts -> human, beside gpt-3.5-turbo and
  PandaLM-7B alone on the same pairs. The published verdicts become recorded-verdicts files
  (results/work/recorded-*.jsonl, :func:`write_recorded`) read by the ``recorded/`` judge, so both tiers are
  calibrated and routed like any judges; one split also runs through ``Judge.cascade`` itself.

    cd bench && ../.venv/bin/python guarantee.py            # writes results/guarantee.{json,md}
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from _common import RESULTS
from guarantee_estimators import auroc, estimator_study, render_transfer, transfer_shift
from guarantee_estimators import render as render_estimators
from guarantee_judge import CHUNKS, DATA, EXPORT, JUDGE, PANDALM, STORE, records
from guarantee_page import render
from trustjudge import ConfigError, Item, Judge
from trustjudge.audit import _calibration as C
from trustjudge.backends import Backend, get_backend
from trustjudge.engine import _scoring as S
from trustjudge.engine._store import Store
from trustjudge.engine._store_io import import_file
from trustjudge.errors import BackendError
from trustjudge.io._datasets import short_hash

ALPHAS = (0.1, 0.2, 0.3)
DELTA = 0.1
PAIR = ("first", "second", "tie")


class StoreOnly(Backend):
    """The judge's prompts and fingerprint, with every model call refused (the study makes none)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", JUDGE)
        self.refused = 0

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def context_length(self) -> int:
        return self.inner.context_length

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def format_prompt(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.format_prompt(*args, **kwargs)

    def label_logprobs(self, requests: Any) -> Any:
        self.refused += len(requests)
        raise BackendError("not in the store: the study makes no model call")

    def generate(self, requests: Any) -> Any:
        self.refused += len(requests)
        raise BackendError("not in the store: the study makes no model call")


def _kappa(pred: np.ndarray, y: np.ndarray, k: int) -> float:
    if pred.size == 0:
        return float("nan")
    po = float(np.mean(pred == y))
    pe = sum(float(np.mean(pred == c)) * float(np.mean(y == c)) for c in range(k))
    return (po - pe) / (1 - pe) if pe < 1 else float("nan")


def _fit(probs: np.ndarray, y: np.ndarray) -> C.CalibrationMap:
    if probs.shape[1] == 2:
        return C.fit_binary(probs[:, 1], y, "platt")
    return C.fit_vector(probs, y, PAIR)


def split_study(probs: np.ndarray, y: np.ndarray, splits: int, seed: int,
                extra_conf: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Calibration and selection over ``splits`` random halves (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n, k = probs.shape
    rows: dict[str, list[float]] = {m: [] for m in (
        "ece_raw", "ece_cal", "brier_raw", "brier_cal", "acc_raw", "acc_cal", "kappa_raw", "kappa_cal", "majority")}
    sel: dict[float, dict[str, list[float]]] = {a: {f"{tag}{m}": [] for tag in ("", "split_")
                                                    for m in ("coverage", "agreement", "violated")} for a in ALPHAS}
    conf_cov: dict[str, list[float]] = {name: [] for name in ["calibrated", *(extra_conf or {})]}
    for _ in range(splits):
        perm = rng.permutation(n)
        cal, test = perm[: n // 2], perm[n // 2:]
        cmap = _fit(probs[cal], y[cal])
        q = cmap.apply(probs[test])
        raw = probs[test] / probs[test].sum(axis=1, keepdims=True)
        rows["ece_raw"].append(C.ece(raw, y[test]))
        rows["ece_cal"].append(C.ece(q, y[test]))
        rows["brier_raw"].append(C.brier(raw, y[test]))
        rows["brier_cal"].append(C.brier(q, y[test]))
        for tag, p in (("raw", raw), ("cal", q)):
            pred = p.argmax(axis=1)
            rows[f"acc_{tag}"].append(float(np.mean(pred == y[test])))
            rows[f"kappa_{tag}"].append(_kappa(pred, y[test], k))
        majority = np.bincount(y[cal], minlength=k).argmax()
        rows["majority"].append(float(np.mean(y[test] == majority)))
        qc = cmap.apply(probs[cal])
        conf_c, agree_c = qc.max(axis=1), qc.argmax(axis=1) == y[cal]
        conf_t, agree_t = q.max(axis=1), q.argmax(axis=1) == y[test]
        # split: the map fitted on one half of the calibration half, thresholds tested on the other half
        fit_part, test_part = cal[: len(cal) // 2], cal[len(cal) // 2:]
        smap = _fit(probs[fit_part], y[fit_part])
        qs, qst = smap.apply(probs[test_part]), smap.apply(probs[test])
        conf_s, agree_s = qs.max(axis=1), qs.argmax(axis=1) == y[test_part]
        conf_st, agree_st = qst.max(axis=1), qst.argmax(axis=1) == y[test]
        for a in ALPHAS:
            for tag, (cc, ac, ct, at) in (("", (conf_c, agree_c, conf_t, agree_t)),
                                          ("split_", (conf_s, agree_s, conf_st, agree_st))):
                s = C.choose_threshold(cc, ac, alpha=a, delta=DELTA, strict=False)
                kept = s.keep(ct)
                sel[a][f"{tag}coverage"].append(float(kept.mean()))
                if kept.any():
                    realised = float(at[kept].mean())
                    sel[a][f"{tag}agreement"].append(realised)
                    sel[a][f"{tag}violated"].append(float(realised < 1 - a))
                else:
                    sel[a][f"{tag}violated"].append(0.0)
        s2 = C.choose_threshold(conf_c, agree_c, alpha=0.2, delta=DELTA, strict=False)
        conf_cov["calibrated"].append(float(s2.keep(conf_t).mean()))
        for name, conf in (extra_conf or {}).items():
            # the raw verdict's agreement (the estimators rank likelihood's own verdict)
            agree_raw_c = probs[cal].argmax(axis=1) == y[cal]
            agree_raw_t = probs[test].argmax(axis=1) == y[test]
            s3 = C.choose_threshold(conf[cal], agree_raw_c, alpha=0.2, delta=DELTA, strict=False)
            kept = s3.keep(conf[test])
            conf_cov[name].append(float(kept.mean()) if not kept.any() or agree_raw_t[kept].size else 0.0)

    def mean(v: Sequence[float]) -> float | None:
        vals = [x for x in v if not math.isnan(x)]
        return float(np.mean(vals)) if vals else None

    out: dict[str, Any] = {"n": int(n), "splits": splits, **{m: mean(v) for m, v in rows.items()}}
    out["selective"] = {str(a): {"target": 1 - a, "coverage": mean(d["coverage"]), "agreement": mean(d["agreement"]),
                                 "violation_rate": mean(d["violated"]),
                                 "split_coverage": mean(d["split_coverage"]),
                                 "split_agreement": mean(d["split_agreement"]),
                                 "split_violation_rate": mean(d["split_violated"]),
                                 "violation_se": math.sqrt(DELTA * (1 - DELTA) / splits)}
                        for a, d in sel.items()}
    out["coverage_at_alpha_0.2"] = {name: mean(v) for name, v in conf_cov.items()}
    out["curve"] = selective_curve(probs, y)
    return out


def selective_curve(probs: np.ndarray, y: np.ndarray) -> list[tuple[float, float]]:
    """Agreement against coverage on all units, calibrated in-sample (for the plot: not a guarantee)."""
    q = _fit(probs, y).apply(probs)
    conf, agree = q.max(axis=1), q.argmax(axis=1) == y
    order = np.argsort(-conf, kind="stable")
    cum = np.cumsum(agree[order]) / np.arange(1, len(order) + 1)
    pts = np.linspace(0, len(order) - 1, min(50, len(order))).astype(int)
    return [(float((i + 1) / len(order)), float(cum[i])) for i in pts]


# -- reading the stored judgments -------------------------------------------------------------------------

def collect(judge: Judge, data: Path) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """The study's records per dataset, from the store only (a judgment it lacks leaves its record unscored)."""
    by_set: dict[str, list[dict[str, Any]]] = {}
    missing: dict[str, int] = {}
    seen: set[tuple[str, str, str]] = set()
    for chunk in CHUNKS:
        name = chunk.name.split("-")[0]
        before = judge.backend.refused  # type: ignore[attr-defined]
        items = chunk.items(data)
        recs = [r.to_dict() for r in records(judge, chunk.mode, items, lambda n: None)]
        recs = [r for r in recs if _first_time(r, seen)]
        if name == "topical":
            _label_from_ratings(recs, items)
        by_set.setdefault(name, []).extend(recs)
        missing[name] = missing.get(name, 0) + judge.backend.refused - before  # type: ignore[attr-defined]
    return by_set, missing


def _first_time(rec: dict[str, Any], seen: set[tuple[str, str, str]]) -> bool:
    """False for a pair already collected: a PandaLM test-set row repeated in two chunks' row ranges (one pair,
    ``pandalm-5e62193560``) would be counted twice, and a calibration file holding it is refused on load."""
    if "first_id" not in rec:
        return True
    key = (rec["item_id"], rec["first_id"], rec["second_id"])
    if key in seen:
        return False
    seen.add(key)
    return True


def pair_units(recs: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    kept = [r for r in recs if r.get("probabilities") and r.get("human") in PAIR]
    probs = np.array([[r["probabilities"][c] for c in PAIR] for r in kept]) if kept else np.zeros((0, 3))
    return probs, np.array([PAIR.index(r["human"]) for r in kept], dtype=np.int64), kept


def order_views(kept: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Per pair: each order's (first, second, tie) in the dataset's frame, and two confidence estimators."""
    o1 = np.array([[o["A"], o["B"], o["C"]] for o in (r["orders"][0] for r in kept)])
    o2 = np.array([[o["B"], o["A"], o["C"]] for o in (r["orders"][1] for r in kept)])  # swapped back
    lik = (o1 + o2) / (o1 + o2).sum(axis=1, keepdims=True)
    v = lik.argmax(axis=1)
    n1, n2 = o1 / o1.sum(axis=1, keepdims=True), o2 / o2.sum(axis=1, keepdims=True)
    both = np.minimum(n1[np.arange(len(v)), v], n2[np.arange(len(v)), v])
    margin = np.abs(lik[:, 0] - lik[:, 1])
    return {"o1": o1, "o2": o2, "order_agreement": both, "margin": margin}


def balanced_agreement(kept: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each aggregation's agreement with humans in the dataset's order, reversed, and their mean."""
    out: dict[str, dict[str, float]] = {}
    flip = {"first": "second", "second": "first", "tie": "tie"}
    res: dict[str, list[tuple[bool, bool]]] = {m: [] for m in S.AGGREGATIONS}
    for r in kept:
        a, b = r["orders"]
        d1 = S.from_order(a["A"], a["B"], a["C"], swapped=False, ppl=a.get("critique_ppl"))
        d2 = S.from_order(b["A"], b["B"], b["C"], swapped=True, ppl=b.get("critique_ppl"))
        forward = S.aggregate_all(d1, d2)
        # reversed dataset order: the pair's second response is shown first first
        r1 = S.from_order(b["A"], b["B"], b["C"], swapped=False, ppl=b.get("critique_ppl"))
        r2 = S.from_order(a["A"], a["B"], a["C"], swapped=True, ppl=a.get("critique_ppl"))
        backward = S.aggregate_all(r1, r2)
        for m in S.AGGREGATIONS:
            res[m].append((forward[m] == r["human"], backward[m] == flip[r["human"]]))
    for m, v in res.items():
        f = float(np.mean([x for x, _ in v])) if v else float("nan")
        b = float(np.mean([y for _, y in v])) if v else float("nan")
        out[m] = {"dataset_order": f, "reversed": b, "balanced": (f + b) / 2}
    return out


PUBLISHED = {"gpt-3.5-turbo": ("gpt-3.5-turbo-testset-v1.json", "gpt_result"),
             "pandalm-7b": ("pandalm-7b-testset-v1.json", "pandalm_result")}
Key = tuple[str, str, str]


def write_recorded(data: Path, judge: str, path: Path) -> Path:
    """The published verdicts of ``judge`` on the PandaLM test set as a recorded-verdicts file (docs/formats.md).

    Keys as the pandalm adapter makes them; "1" is A, "2" is B, "0"/"Tie" a tie and "garbage" (gpt-3.5's
    unparsed answers) no verdict. A pair in several rows of one order is answered by its first row (the
    other order keeps its own rows: the published verdicts were asked in one order per row).
    """
    rows = json.loads((data / PANDALM).read_text())
    file, field = PUBLISHED[judge]
    published = {r["idx"]: r[field] for r in
                 json.loads((data / "pandalm-testset" / "judge_outputs" / file).read_text())}
    to = {"1": "A", "2": "B", "0": "tie", "Tie": "tie"}
    seen: set[Key] = set()
    out = []
    for row in rows:
        item = "pandalm-" + short_hash(row["instruction"] + "\x00" + (row.get("input") or ""))
        a, b = short_hash(str(row["response1"])), short_hash(str(row["response2"]))
        if a == b or (item, a, b) in seen:
            continue
        seen.add((item, a, b))
        out.append({"item_id": item, "a": a, "b": b, "verdict": to.get(str(published.get(row["idx"]))),
                    "idx": row["idx"], "judge": judge})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in out))
    tmp.replace(path)
    return path


def recorded_records(study: Judge, name: str, data: Path) -> tuple[dict[Key, dict[str, Any]], dict[str, int]]:
    """The recorded judge's compare records on the study's PandaLM pairs (in the study's store), and its
    verdicts read from the file (``lookups``) and from the store."""
    out: dict[Key, dict[str, Any]] = {}
    judge = study.sibling(name)
    try:
        for chunk in CHUNKS:
            if chunk.name.startswith("pandalm"):
                for rec in judge.compare(chunk.items(data)):
                    out[(rec.item_id, rec.first_id, rec.second_id)] = rec.to_dict()
        stats = {"lookups": judge.backend.lookups, "from_store": judge.stats.from_store}  # type: ignore[attr-defined]
    finally:
        judge.close()
    return out, stats


def _key(r: dict[str, Any]) -> Key:
    return (r["item_id"], r["first_id"], r["second_id"])


def _tier_probs(recs: dict[Key, dict[str, Any]], keys: list[Key]) -> np.ndarray:
    """Each pair's (first, second, tie) probabilities from a recorded judge's records (NaN: none)."""
    rows = [[recs[k]["probabilities"][c] for c in PAIR] if recs.get(k, {}).get("probabilities") else [np.nan] * 3
            for k in keys]
    return np.array(rows, dtype=np.float64).reshape(len(keys), 3)


def _calibrated_tier(probs: np.ndarray, y: np.ndarray, cal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Confidence (NaN where the tier has no verdict) and agreement of a tier calibrated on ``cal``."""
    has = np.isfinite(probs[:, 0])
    conf = np.full(len(y), np.nan)
    agree = np.zeros(len(y), dtype=bool)
    fit_on = cal[has[cal]]
    if fit_on.size >= 2:
        q = _fit(probs[fit_on], y[fit_on]).apply(probs[has])
        conf[has] = q.max(axis=1)
        agree[has] = q.argmax(axis=1) == y[has]
    return conf, agree


def cascade_study(probs: np.ndarray, y: np.ndarray, kept: list[dict[str, Any]],
                  recorded: dict[str, dict[Key, dict[str, Any]]], splits: int, seed: int) -> dict[str, Any]:
    """default judge -> recorded gpt-3.5-turbo (calibrated like any judge) -> human, on random halves.

    Each split calibrates both tiers on one half (the gpt tier's one-hot verdicts by vector scaling: one
    calibrated confidence per verdict class), chooses the thresholds by :func:`C.choose_cascade` and routes
    the other half. Beside it, each judge alone on the same pairs.
    """
    rng = np.random.default_rng(seed)
    keys = [_key(r) for r in kept]
    gpt = _tier_probs(recorded["gpt-3.5-turbo"], keys)
    panda = _tier_probs(recorded["pandalm-7b"], keys)

    def alone(p: np.ndarray, h: np.ndarray) -> float:  # a pair without a verdict counts as a disagreement
        return float(np.mean(np.where(np.isfinite(p[:, 0]), np.nan_to_num(p).argmax(axis=1) == h, False)))

    out: dict[str, Any] = {"pairs": len(keys), "with_gpt_verdict": int(np.isfinite(gpt[:, 0]).sum()),
                           "gpt-3.5-turbo_alone": alone(gpt, y), "pandalm-7b_alone": alone(panda, y),
                           "default_alone": float(np.mean(probs.argmax(axis=1) == y))}
    for a in (0.2, 0.3):
        acc: dict[str, list[float]] = {k: [] for k in (
            "tier1_share", "tier2_share", "human_share", "agreement_machine", "agreement_all", "gpt_calls_share",
            "gpt_alone_on_test")}
        for _ in range(splits):
            perm = rng.permutation(len(keys))
            cal, test = perm[: len(keys) // 2], perm[len(keys) // 2:]
            cmap = _fit(probs[cal], y[cal])
            q = cmap.apply(probs)
            conf2, agree2 = _calibrated_tier(gpt, y, cal)
            sels = C.choose_cascade([q.max(axis=1)[cal], conf2[cal]], [q.argmax(axis=1)[cal] == y[cal], agree2[cal]],
                                    alpha=a, delta=DELTA)
            routed = C.run_cascade([q.max(axis=1)[test], conf2[test]], sels).tier
            agree1 = q.argmax(axis=1)[test] == y[test]
            agree = np.where(routed == 0, agree1, np.where(routed == 1, agree2[test], True))
            machine = routed >= 0
            acc["tier1_share"].append(float(np.mean(routed == 0)))
            acc["tier2_share"].append(float(np.mean(routed == 1)))
            acc["human_share"].append(float(np.mean(routed == -1)))
            acc["agreement_machine"].append(float(np.mean(agree[machine])) if machine.any() else float("nan"))
            acc["agreement_all"].append(float(np.mean(agree)))
            acc["gpt_calls_share"].append(float(np.mean(routed != 0)))  # gpt-3.5 is asked whatever tier 1 passes on
            acc["gpt_alone_on_test"].append(alone(gpt[test], y[test]))
        out[f"alpha_{a}"] = {k: (float(np.nanmean(v)) if np.isfinite(v).any() else None) for k, v in acc.items()}
    return out


def _narrow(items: list[Item], keep: set[Key]) -> list[Item]:
    out = []
    for item in items:
        pairs = tuple(p for p in item.all_pairs() if (item.id, p.first, p.second) in keep)
        if pairs:
            out.append(dataclasses.replace(item, pairs=pairs))
    return out


def cascade_library_run(judge: Judge, gpt_name: str, data: Path, kept: list[dict[str, Any]],
                        seed: int) -> dict[str, Any]:
    """The same cascade through the library (``Judge.calibrate`` per tier, ``Judge.cascade``) on one random half:
    the records, the store and the per-tier calls, with zero model calls (tier 1 reads the store only)."""
    keys = [_key(r) for r in kept]
    perm = np.random.default_rng(seed).permutation(len(keys))
    items = [it for chunk in CHUNKS if chunk.name.startswith("pandalm") for it in chunk.items(data)]
    cal_items = _narrow(items, {keys[i] for i in perm[: len(keys) // 2]})
    test_items = _narrow(items, {keys[i] for i in perm[len(keys) // 2:]})
    refused = judge.backend.refused  # type: ignore[attr-defined]
    gpt = judge.sibling(gpt_name)
    cal1, cal2 = judge.calibrate(cal_items, "compare"), gpt.calibrate(cal_items, "compare")
    out: dict[str, Any] = {"calibration_pairs": cal1.n, "gpt_calibration_pairs": cal2.n, "runs": {}}
    try:
        for target in (0.8, 0.7):
            try:
                _, summary = judge.cascade(test_items, [(judge, cal1), (gpt, cal2), ("human", None)],
                                           target=target, delta=DELTA)
            except ConfigError as exc:
                out["runs"][str(target)] = {"refused": str(exc)}
                continue
            out["runs"][str(target)] = summary
    finally:
        gpt.close()
    out["model_calls"] = judge.backend.refused - refused  # type: ignore[attr-defined]  # refused = asked of the model
    return out


def binary_units(mode: str, recs: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    ps, ys = [], []
    for r in recs:
        parts = r.get("checks") if mode == "checklist" else r.get("claims")
        for p in parts or ():
            if p.get("unscored") or p.get("human") is None:
                continue
            if mode == "checklist":
                pp, h = p.get("p_pass"), int(float(p["human"]) >= 0.5)
            else:
                pp, h = p.get("p_supported"), int(str(p["human"]).upper() == "SUPPORTED")
            if pp is None:
                continue
            ps.append(float(pp))
            ys.append(h)
    p = np.array(ps)
    return np.stack([1 - p, p], axis=1) if ps else np.zeros((0, 2)), np.array(ys, dtype=np.int64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--store", type=Path, default=STORE)
    ap.add_argument("--judge", default=JUDGE)
    ap.add_argument("--estimators-only", action="store_true",
                    help="Recompute only the estimator comparison into the existing results/guarantee.json (and .md).")
    args = ap.parse_args()
    t0 = time.perf_counter()
    args.store.parent.mkdir(parents=True, exist_ok=True)
    store = Store(args.store)
    if EXPORT.exists():
        import_file(EXPORT, store)  # idempotent: rows already there are skipped
    backend = StoreOnly(get_backend(args.judge))
    judge = Judge(backend, store=store)
    by_set, missing = collect(judge, DATA)
    if args.estimators_only:
        result = json.loads((RESULTS / "guarantee.json").read_text())
        for name, recs in by_set.items():
            mode = next(c.mode for c in CHUNKS if c.name.split("-")[0] == name)
            result["datasets"][name]["estimators"] = estimator_study(mode, recs, args.splits, args.seed)
        result["transfer_shift"] = transfer_shift(by_set)
        result["estimators_seconds"] = round(time.perf_counter() - t0, 1)
        (RESULTS / "guarantee.json").write_text(json.dumps(result, indent=1) + "\n")
        (RESULTS / "guarantee.md").write_text(render(result))
        print("\n".join(render_estimators(result["datasets"]) + render_transfer(result["transfer_shift"])))
        return
    result: dict[str, Any] = {"judge": args.judge, "delta": DELTA, "alphas": list(ALPHAS), "splits": args.splits,
                              "missing_judgments": missing, "datasets": {}}
    recorded: dict[str, dict[Key, dict[str, Any]]] = {}
    recorded_calls: dict[str, dict[str, int]] = {}
    names: dict[str, str] = {}
    for who in PUBLISHED:
        path = write_recorded(DATA, who, args.store.parent / f"recorded-{who}.jsonl")
        names[who] = f"recorded/{os.path.relpath(path)}"
        recorded[who], recorded_calls[who] = recorded_records(judge, names[who], DATA)
    result["recorded_judges"] = {who: {"judge": names[who], **recorded_calls[who]} for who in PUBLISHED}
    for name, recs in by_set.items():
        mode = next(c.mode for c in CHUNKS if c.name.split("-")[0] == name)
        entry: dict[str, Any] = {"mode": mode, "records": len(recs),
                                 "scored": sum(1 for r in recs if not r.get("unscored"))}
        if mode == "compare":
            probs, y, kept = pair_units(recs)
            entry["labelled_scored_pairs"] = len(kept)
            if len(kept) >= 20:
                views = order_views(kept)
                agree_raw = probs.argmax(axis=1) == y
                q = _fit(probs, y).apply(probs)
                entry["auroc"] = {"calibrated_top": auroc(q.max(axis=1), agree_raw),
                                  "order_agreement": auroc(views["order_agreement"], agree_raw),
                                  "margin": auroc(views["margin"], agree_raw)}
                entry["study"] = split_study(probs, y, args.splits, args.seed,
                                             {"order_agreement": views["order_agreement"], "margin": views["margin"]})
                entry["agreement"] = balanced_agreement(kept)
                both = np.stack([views["o1"][:, [0, 1, 2]], np.stack(
                    [views["o2"][:, 1], views["o2"][:, 0], views["o2"][:, 2]], axis=1)], axis=1)
                entry["position_bias_logodds"] = C.position_bias(both)
                if name == "pandalm":
                    entry["cascade"] = cascade_study(probs, y, kept, recorded, args.splits, args.seed)
                    entry["cascade_library_run"] = cascade_library_run(judge, names["gpt-3.5-turbo"], DATA, kept,
                                                                       args.seed)
        else:
            probs, y = binary_units(mode, recs)
            entry["labelled_scored_units"] = len(y)
            if len(y) >= 20:
                entry["mean_p_positive"] = float(probs[:, 1].mean())
                entry["positive_rate"] = float(y.mean())
                entry["auroc"] = auroc(probs[:, 1], y.astype(bool))
                entry["study"] = split_study(probs, y, args.splits, args.seed)
        entry["estimators"] = estimator_study(mode, recs, args.splits, args.seed)
        result["datasets"][name] = entry
    result["transfer_shift"] = transfer_shift(by_set)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["model_calls"] = 0  # StoreOnly never calls the model
    result["refused_not_in_store"] = backend.refused
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "guarantee.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / "guarantee.md").write_text(render(result))
    print(render(result))


def _label_from_ratings(recs: list[dict[str, Any]], items: Sequence[Any]) -> None:
    """Topical-Chat pairs carry no preference, only each response's mean ``overall`` rating: the human side of a
    pair is the higher-rated response (equal means: a tie)."""
    rating = {(it.id, r.id): r.human_score for it in items for r in it.responses}
    for rec in recs:
        a, b = rating.get((rec["item_id"], rec["first_id"])), rating.get((rec["item_id"], rec["second_id"]))
        if rec.get("human") is None and a is not None and b is not None:
            rec["human"] = "tie" if abs(a - b) < 1e-9 else "first" if a > b else "second"




if __name__ == "__main__":
    main()
