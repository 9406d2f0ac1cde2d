"""The estimator comparison of the guarantee study (issue 34), from the study's stored records, zero model calls.

For each dataset and each of ``splits`` random calibration/test halves, through the library's own pieces (the
split-fit rule of ``Calibration.selection``): the calibration half becomes a calibration file of the dataset's
mode (its map's method the library's default), split by key into part A (the selection map, and for
``features`` its logistic regression, fitted there) and part B (thresholds tested there, by fixed-sequence
testing at delta 0.1); the selection is applied to the test half. Reported per estimator (``calibrated``: the
calibrated top probability; ``features``: the zero-call features model):

- AUROC of the confidence against agreement of the calibrated verdict, on the test half;
- at targets 0.7 and 0.8: coverage and realised agreement on the kept test verdicts, and the violation rate
  (the share of splits whose realised agreement falls below the target; a test half adds its own noise);
- how often the shift warning (:mod:`trustjudge.audit._shift`: per-feature KS against part B, Holm, level
  0.01) fires on the test half: halves of one data set are exchangeable with its calibration halves, so it
  should fire in about 1% of them or fewer.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustjudge.audit import _calibration as C
from trustjudge.audit import _estimators as E
from trustjudge.audit import _shift
from trustjudge.audit import _trust as T
from trustjudge.errors import ConfigError

TARGETS = (0.7, 0.8)
DELTA = 0.1
STUDIED = (E.CALIBRATED, E.FEATURES)
"""The estimators compared here (the ensemble needs more judgments: bench/guarantee_ensemble_study.py)."""
_WHO = {"judge": "study", "fingerprint": "study", "template": "study", "protocol": "direct"}


def auroc(score: np.ndarray, positive: np.ndarray) -> float:
    from scipy.stats import rankdata

    pos, neg = int(positive.sum()), int((~positive).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    ranks = rankdata(score)
    return float((ranks[positive].sum() - pos * (pos + 1) / 2) / (pos * neg))


def unit_arrays(mode: str, recs: list[dict[str, Any]]) -> dict[str, Any]:
    """The labelled, scored units of ``recs`` with their keys and pair features, as a calibration holds them."""
    classes = T.classes_of(mode, recs)
    units = [u for u in T.units(mode, recs, classes) if u.probs is not None and u.human is not None]
    return {"classes": classes, "probs": np.array([u.probs for u in units], dtype=np.float64),
            "human": np.array([u.human for u in units], dtype=np.int64),
            "keys": [list(T.unit_key(mode, recs[u.record], u)) for u in units],
            "features": [E.pair_features(recs[u.record], u.path) for u in units]}


def _calibration(mode: str, a: dict[str, Any], rows: np.ndarray, confidence: str) -> T.Calibration:
    probs = a["probs"][rows]
    human = a["human"][rows]
    method = "platt" if len(a["classes"]) == 2 else "vector"
    identity = C.CalibrationMap(method, tuple(a["classes"]), {"a": 1.0, "b": 0.0} if method == "platt" else
                                {"temperature": 1.0, "bias": [0.0] * len(a["classes"])})
    return T.Calibration(mode, "study", "study", "study", "direct", identity, probs.tolist(), human.tolist(),
                         keys=[a["keys"][i] for i in rows], confidence=confidence,
                         features=[a["features"][i] for i in rows] if confidence == E.FEATURES else None)


def estimator_study(mode: str, recs: list[dict[str, Any]], splits: int, seed: int) -> dict[str, Any]:
    """Both estimators over ``splits`` random halves (see the module docstring)."""
    a = unit_arrays(mode, recs)
    n = a["human"].size
    rng = np.random.default_rng(seed)
    acc: dict[str, dict[str, list[float]]] = {
        est: {k: [] for k in ("auroc", "shift_fired", *(f"{m}_{t}" for t in TARGETS
                                                         for m in ("coverage", "agreement", "violated")))}
        for est in STUDIED}
    for _ in range(splits):
        perm = rng.permutation(n)
        cal_rows, test_rows = np.sort(perm[: n // 2]), np.sort(perm[n // 2:])
        cmap = None
        for est in STUDIED:
            cal = _calibration(mode, a, cal_rows, est)
            part_a = cal.split()
            probs, human = np.asarray(cal.probs), np.asarray(cal.human)
            cmap = cmap or cal.fit_map(probs[part_a], human[part_a])  # one selection map for both estimators
            model = E.fit_model(cal, cmap, part_a) if est == E.FEATURES else None
            feats_b = None if cal.features is None else [cal.features[i] for i in np.flatnonzero(~part_a)]
            v_b, c_b, x_b = E.confidences(cal, cmap, model, probs[~part_a], feats_b)
            agree_b = cal.agrees(v_b, human[~part_a])
            feats_t = [a["features"][i] for i in test_rows] if est == E.FEATURES else None
            v_t, c_t, x_t = E.confidences(cal, cmap, model, a["probs"][test_rows], feats_t)
            agree_t = cal.agrees(v_t, a["human"][test_rows])
            d = acc[est]
            d["auroc"].append(auroc(c_t, agree_t))
            for t in TARGETS:
                sel = C.choose_threshold(c_b, agree_b, alpha=1 - t, delta=DELTA, strict=False)
                kept = sel.keep(c_t)
                d[f"coverage_{t}"].append(float(kept.mean()))
                realised = float(agree_t[kept].mean()) if kept.any() else float("nan")
                d[f"agreement_{t}"].append(realised)
                d[f"violated_{t}"].append(float(kept.any() and realised < t))
            fired = _shift.compare(np.c_[c_b, x_b], np.c_[c_t, x_t], _tested(cal, model))["warning"]
            d["shift_fired"].append(float(fired is not None))

    def mean(v: list[float]) -> float | None:
        vals = [x for x in v if not math.isnan(x)]
        return float(np.mean(vals)) if vals else None

    return {"units": int(n), "splits": splits, "violation_se": math.sqrt(DELTA * (1 - DELTA) / splits),
            "estimators": {est: {k: mean(v) for k, v in d.items()} for est, d in acc.items()}}


def _tested(cal: T.Calibration, model: E.ConfidenceModel | None) -> tuple[str, ...]:
    if model is None:
        return _shift.tested(cal)
    return ("confidence", *(n for n in model.names if n != "top"))


def _f(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def render(datasets: dict[str, Any]) -> list[str]:
    """The markdown table of the estimator comparison."""
    lines = ["", "## Confidence estimators: calibrated top probability vs zero-call features", "",
             "Through the library's split-fit rule: each calibration half split by key into part A (the selection "
             "map and, for `features`, its L2 logistic regression over top, margin, entropy, raw top, agreement of "
             "the two orders, the lower order's probability of the verdict and label mass, fitted there) and part B "
             "(thresholds tested), applied to the test half; delta 0.1. AUROC of the confidence against agreement on "
             "the test half. Shift: share of test halves on which the shift warning fired (KS per feature against "
             "part B, Holm, level 0.01; the halves are exchangeable, so it should almost never fire).", "",
             "| dataset | units | estimator | AUROC | coverage @0.7 | agreement @0.7 | violation @0.7 | "
             "coverage @0.8 | agreement @0.8 | violation @0.8 | shift fired |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, e in datasets.items():
        s = e.get("estimators")
        if not s:
            continue
        for est, d in s["estimators"].items():
            lines.append(f"| {name} | {s['units']} | {est} | {_f(d['auroc'])} | {_f(d['coverage_0.7'], '.2f')} | "
                         f"{_f(d['agreement_0.7'])} | {_f(d['violated_0.7'])} | {_f(d['coverage_0.8'], '.2f')} | "
                         f"{_f(d['agreement_0.8'])} | {_f(d['violated_0.8'])} | {_f(d['shift_fired'])} |")
    for name, target, goal in (("pandalm", 0.8, 0.35), ("topical", 0.7, 0.30)):
        s = (datasets.get(name) or {}).get("estimators")
        if s:
            best = max(s["estimators"].items(), key=lambda kv: kv[1][f"coverage_{target}"] or 0.0)
            got = best[1][f"coverage_{target}"] or 0.0
            lines += ["", f"Issue 34's target for {name}: coverage at {target} >= {goal:.2f}; the better estimator "
                          f"({best[0]}) keeps {got:.2f}: {'met' if got >= goal else 'missed'}."]
    first = next(iter(datasets.values()), {}).get("estimators")
    if first:
        lines += ["", f"{first['splits']} splits; violation rates carry a Monte-Carlo standard error of about "
                      f"{first['violation_se']:.3f}."]
    return lines


TRANSFERS = (("pandalm", "llmbar"), ("pandalm", "topical"), ("llmbar", "pandalm"))


def transfer_shift(by_set: dict[str, list[dict[str, Any]]], target: float = 0.7) -> list[dict[str, Any]]:
    """Calibrate on every labelled pair of one dataset, select on another: coverage, realised agreement on the kept
    verdicts against the target, and whether the shift warning fires (it should, where the data differ)."""
    out = []
    for src, dst in TRANSFERS:
        a, b = unit_arrays("compare", by_set[src]), unit_arrays("compare", by_set[dst])
        for est in STUDIED:
            cal = _calibration("compare", a, np.arange(a["human"].size), est)
            row: dict[str, Any] = {"calibrated_on": src, "selected_on": dst, "estimator": est, "target": target}
            try:
                sel = cal.selection(target, DELTA)
            except ConfigError as exc:  # a target the source cannot support is a result
                out.append({**row, "refused": str(exc)})
                continue
            v, c, x = E.confidences(cal, sel.map, sel.model, b["probs"], b["features"] if est == E.FEATURES else None)
            kept = sel.keep(c)
            agree = cal.agrees(v, b["human"])
            shift = _shift.compare(_shift.reference(cal, sel), np.c_[c, x], _shift.tested(cal))
            out.append({**row, "coverage": float(kept.mean()),
                        "agreement_on_kept": float(agree[kept].mean()) if kept.any() else None,
                        "shift_fired": shift["warning"] is not None, "shifted": shift["shifted"]})
    return out


def render_transfer(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Transfer: the shift warning where the data differ", "",
             "Calibrated on every labelled pair of one dataset (target 0.7, delta 0.1, split-fit selection), selected "
             "on another's pairs: coverage, realised agreement on the kept pairs, and whether the shift warning "
             "fired (and on which features).", "",
             "| calibrated on | selected on | estimator | coverage | agreement on kept | shift warning |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "refused" in r:
            lines.append(f"| {r['calibrated_on']} | {r['selected_on']} | {r['estimator']} | refused: the target is "
                         f"unsupported on {r['calibrated_on']}'s calibration set |||")
            continue
        fired = "fired: " + ", ".join(r["shifted"]) if r["shift_fired"] else "no"
        lines.append(f"| {r['calibrated_on']} | {r['selected_on']} | {r['estimator']} | {_f(r['coverage'], '.2f')} | "
                     f"{_f(r['agreement_on_kept'])} | {fired} |")
    return lines
