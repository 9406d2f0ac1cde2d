"""What the report draws of a calibration (zero model calls): reliability of the top class before and after
calibration, and the selective-risk curve (agreement with humans on the kept verdicts against coverage)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..engine._aggregates import reliability
from . import _calibration as C
from ._trust import Calibration, selection_map, units


def _curve(confidence: np.ndarray, agree: np.ndarray, points: int = 200) -> list[dict[str, float]]:
    """Agreement on the kept verdicts against coverage, keeping the most confident first (ties together)."""
    order = np.argsort(-confidence, kind="stable")
    c, a = confidence[order], agree[order].astype(np.float64)
    n = c.size
    ends = np.flatnonzero(np.r_[c[1:] != c[:-1], True]) + 1  # a threshold keeps every tie
    if ends.size > points:
        ends = np.unique(ends[np.linspace(0, ends.size - 1, points).round().astype(int)])
    cum = np.cumsum(a)
    return [{"coverage": float(k / n), "agreement": float(cum[k - 1] / k), "threshold": float(c[k - 1])}
            for k in ends]


def _side(probs: np.ndarray, human: np.ndarray, calibration: Calibration) -> dict[str, Any]:
    verdict, conf = calibration.verdicts(probs)
    correct = calibration.agrees(verdict, human)
    return {"ece": C.ece(probs, human), "brier": C.brier(probs, human),
            "accuracy": float(correct.mean()),
            "reliability": [{"lo": b.lo, "hi": b.hi, "count": b.count, "mean_prob": b.mean_prob,
                             "frequency": b.frequency} for b in reliability(conf.tolist(), correct.tolist())]}


def evaluation(mode: str, records: Sequence[Mapping[str, Any]], calibration: Calibration,
               selection: C.Selection | None = None) -> dict[str, Any]:
    """What the report draws of a calibration: reliability of the top class before and after calibration, and
    the selective-risk curve (agreement with humans on the kept verdicts against coverage).

    It is measured on the labelled, scored verdicts of ``records`` when there are at least two (held out
    from the calibration, if the user kept them apart), else on the calibration set itself (``source``
    says which; on the calibration set the calibrated side is in-sample, so optimistic).
    """
    labelled = [u for u in units(mode, records, calibration.map.classes, calibration.levels)
                if u.probs is not None and u.human is not None]
    if len(labelled) >= 2:
        raw = np.asarray([u.probs for u in labelled], dtype=np.float64)
        human = np.asarray([u.human for u in labelled], dtype=np.int64)
        source = "records"
    else:
        raw = np.asarray(calibration.probs, dtype=np.float64)
        human = np.asarray(calibration.human, dtype=np.int64)
        source = "calibration set"
    raw = raw / np.clip(raw.sum(axis=1, keepdims=True), 1e-12, None)
    calibrated = calibration.calibrated(raw)
    verdict, conf = calibration.verdicts(calibrated)
    agree = calibration.agrees(verdict, human)
    raw_verdict, raw_conf = calibration.verdicts(raw)
    out: dict[str, Any] = {
        "mode": mode, "source": source, "n": int(human.size), "classes": list(calibration.map.classes),
        "calibration": {"judge": calibration.judge, "n": calibration.n, "method": calibration.map.method,
                        "data_hash": calibration.data_hash, "overridden": list(calibration.overridden)},
        "before": _side(raw, human, calibration), "after": _side(calibrated, human, calibration),
        "risk_curve": _curve(conf, agree),
        "risk_curve_raw": _curve(raw_conf, calibration.agrees(raw_verdict, human)), "selection": None}
    if selection is not None:
        sel_verdict, sel_conf = calibration.verdicts(selection_map(calibration, selection).apply(raw))
        sel_agree = calibration.agrees(sel_verdict, human)
        kept = selection.keep(sel_conf)
        out["selection"] = {**selection.to_dict(), "coverage": float(kept.mean()),
                            "agreement": float(sel_agree[kept].mean()) if kept.any() else None}
    return out
