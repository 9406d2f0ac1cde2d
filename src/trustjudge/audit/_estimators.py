"""Confidence estimators of a calibration: what a selective verdict is ranked by (zero model calls).

``calibrated`` (the default) ranks a verdict by its calibrated top probability (in the score modes: the
calibrated mass within the tolerance). ``features`` ranks it by a small logistic regression, L2-regularised,
over zero-call features of what the store already holds for the verdict:

- from its probabilities under the calibration map: ``top`` (the default estimator's confidence), ``margin``
  (top minus second calibrated probability), ``entropy`` (of the calibrated row, over log of the classes),
  ``raw_top`` (the top raw probability, renormalised);
- from a pair's two presentation orders (a pairwise record with both orders scored; ``None`` elsewhere):
  ``order_agreement`` (1 minus the total-variation distance of the two orders' distributions, read in the
  pair's frame), ``order_min`` (the lower of the two orders' probabilities of the aggregated verdict) and
  ``label_mass`` (the mean probability the two orders put on the verdict labels at all).

The regression predicts whether the calibrated verdict agrees with the human's. With a target it is fitted on
part A of the selection split, under the selection map fitted there, and the thresholds are tested on part B
(:meth:`~trustjudge.audit._trust.Calibration.selection`): the same split-fit rule as the default estimator, so
the guarantee's argument is unchanged (any function of part A ranks part B). Without a target the file's
model, fitted on every unit under the file's map, gives the confidence. The file keeps the pair features of
every calibration unit (``calibration_set.features``) and the fitted coefficients, both in the data hash (a
version-2 file's: :func:`~trustjudge.audit._verify.data_hash`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError
from . import _calibration as C

Calibration = Any
"""A :class:`~trustjudge.audit._trust.Calibration` (named loosely: ``_trust`` imports this module)."""

CALIBRATED = "calibrated"
FEATURES = "features"
ENSEMBLE = "ensemble"
"""The prompt ensemble (:mod:`~trustjudge.audit._ensemble`): the calibrated top of the combined verdict."""
ANNOTATORS = "annotators"
CRITIQUES = "critiques"
"""The panels (:mod:`~trustjudge.audit._panel`): the calibrated top of the combined verdict, as the ensemble."""
ESTIMATORS = (CALIBRATED, FEATURES, ENSEMBLE, ANNOTATORS, CRITIQUES)
COMBINED = (ENSEMBLE, ANNOTATORS, CRITIQUES)
"""The estimators that judge each unit several times and combine the judgments (no model of their own)."""
PROB_FEATURES = ("top", "margin", "entropy", "raw_top")
PAIR_FEATURES = ("order_agreement", "order_min", "label_mass")
ALL_FEATURES = (*PROB_FEATURES, *PAIR_FEATURES)
L2 = 10.0
"""The ridge penalty on the standardised coefficients (chosen among 1, 10, 30 on the study's PandaLM pairs, where
it mattered little); the intercept is penalised 1e-6, to stay finite when every fitted verdict agrees."""


def check_estimator(name: Any, source: str = "confidence") -> str:
    if name not in ESTIMATORS:
        raise ConfigError(f"{source}: the confidence estimator is one of {', '.join(ESTIMATORS)}, not {name!r}")
    return str(name)


@dataclass(frozen=True)
class ConfidenceModel:
    """A logistic regression from standardised features to P(the calibrated verdict agrees with the human)."""

    names: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    l2: float = L2

    def predict(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The confidence of each row of ``x`` (columns :data:`ALL_FEATURES`; a missing value counts as the mean)."""
        cols = np.atleast_2d(np.asarray(x, dtype=np.float64))[:, [ALL_FEATURES.index(n) for n in self.names]]
        z = (cols - np.asarray(self.mean)) / np.asarray(self.scale)
        z = np.where(np.isfinite(z), z, 0.0)
        return np.asarray(C._sigmoid(z @ np.asarray(self.coef) + self.intercept), dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        return {"estimator": "logistic", "features": list(self.names), "mean": list(self.mean),
                "scale": list(self.scale), "coef": list(self.coef), "intercept": self.intercept, "l2": self.l2}

    @classmethod
    def from_dict(cls, d: Any, source: str) -> ConfidenceModel:
        where = f"{source}: field 'confidence_model'"
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where} is not an object")
        names = d.get("features")
        if not (isinstance(names, list) and names and all(n in ALL_FEATURES for n in names)
                and len(set(names)) == len(names)):
            raise ConfigError(f"{where}.features needs distinct names among {', '.join(ALL_FEATURES)}, got {names!r}")
        k = len(names)
        vectors = {}
        for key in ("mean", "scale", "coef"):
            v = d.get(key)
            if not (isinstance(v, list) and len(v) == k and all(_finite(x) for x in v)):
                raise ConfigError(f"{where}.{key} needs {k} finite numbers, got {v!r}")
            vectors[key] = tuple(float(x) for x in v)
        if any(s <= 0 for s in vectors["scale"]):
            raise ConfigError(f"{where}.scale needs positive numbers, got {list(vectors['scale'])}")
        for key in ("intercept", "l2"):
            if not _finite(d.get(key)):
                raise ConfigError(f"{where}.{key} is not a finite number ({d.get(key)!r})")
        return cls(tuple(names), vectors["mean"], vectors["scale"], vectors["coef"], float(d["intercept"]),
                   float(d["l2"]))


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def fit_logistic(x: npt.ArrayLike, y: npt.ArrayLike, names: Sequence[str], l2: float = L2) -> ConfidenceModel:
    """An L2-regularised logistic regression of ``y`` (agreement) on the columns ``names`` of ``x``."""
    from scipy.optimize import minimize  # type: ignore[import-untyped, unused-ignore]

    cols = np.atleast_2d(np.asarray(x, dtype=np.float64))[:, [ALL_FEATURES.index(n) for n in names]]
    t = np.asarray(y, dtype=np.float64).ravel()
    if cols.shape[0] != t.size or t.size < 2:
        raise ConfigError(f"the features estimator needs at least 2 labelled verdicts to fit on, got {t.size}")
    mean = cols.mean(axis=0)
    scale = cols.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    z = (cols - mean) / scale
    penalty = np.r_[np.full(len(names), l2), 1e-6]
    design = np.c_[z, np.ones(t.size)]

    def loss(theta: npt.NDArray[np.float64]) -> tuple[float, npt.NDArray[np.float64]]:
        s = design @ theta
        r = C._sigmoid(s) - t
        value = float(np.sum(np.logaddexp(0.0, s) - t * s) + 0.5 * np.sum(penalty * theta**2))
        return value, design.T @ r + penalty * theta

    res = minimize(loss, np.zeros(len(names) + 1), jac=True, method="L-BFGS-B")
    return ConfidenceModel(tuple(names), tuple(map(float, mean)), tuple(map(float, scale)),
                           tuple(map(float, res.x[:-1])), float(res.x[-1]), float(l2))


# -- the features of a verdict ------------------------------------------------------------------------------

def pair_features(record: Mapping[str, Any], path: Sequence[Any] = ()) -> list[float | None]:
    """A pairwise record's features from its two presentation orders (:data:`PAIR_FEATURES`; ``None`` each
    where the unit is not a pair judged in both orders)."""
    orders = record.get("orders") or []
    if path or len(orders) != 2 or not all(o.get("A") is not None and o.get("B") is not None for o in orders):
        return [None] * len(PAIR_FEATURES)
    first = np.array([orders[0]["A"], orders[0]["B"], orders[0].get("C") or 0.0], dtype=np.float64)
    second = np.array([orders[1]["B"], orders[1]["A"], orders[1].get("C") or 0.0], dtype=np.float64)  # pair frame
    n1, n2 = first / max(first.sum(), 1e-12), second / max(second.sum(), 1e-12)
    verdict = int(np.argmax(first + second))
    masses = [float(o["mass"]) for o in orders if _finite(o.get("mass"))]
    return [float(1.0 - 0.5 * np.abs(n1 - n2).sum()), float(min(n1[verdict], n2[verdict])),
            float(np.mean(masses)) if len(masses) == 2 else None]


def feature_rows(cal: Calibration, cmap: C.CalibrationMap, probs: npt.ArrayLike,
                 extras: Sequence[Sequence[float | None]] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each raw row's calibrated verdict, its default confidence and its features (columns :data:`ALL_FEATURES`,
    NaN where a pair feature is missing)."""
    p = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    q = cmap.apply(p)
    verdict, top = cal.verdicts(q)
    ordered = np.sort(q, axis=1)
    margin = ordered[:, -1] - (ordered[:, -2] if q.shape[1] > 1 else 0.0)
    entropy = -np.sum(q * np.log(np.clip(q, 1e-300, None)), axis=1) / math.log(max(q.shape[1], 2))
    raw_top = (p / np.clip(p.sum(axis=1, keepdims=True), 1e-12, None)).max(axis=1)
    pair = np.full((p.shape[0], len(PAIR_FEATURES)), np.nan)
    if extras is not None:
        pair = np.array([[np.nan if v is None else v for v in row] for row in extras], dtype=np.float64)
        pair = pair.reshape(p.shape[0], len(PAIR_FEATURES))
    return verdict, top, np.c_[top, margin, entropy, raw_top, pair]


def confidences(cal: Calibration, cmap: C.CalibrationMap, model: ConfidenceModel | None, probs: npt.ArrayLike,
                extras: Sequence[Sequence[float | None]] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each raw row's verdict, its confidence under ``model`` (``None``: the calibrated top) and its features."""
    verdict, top, x = feature_rows(cal, cmap, probs, extras)
    return verdict, (top if model is None else model.predict(x)), x


def fit_model(cal: Calibration, cmap: C.CalibrationMap, rows: npt.NDArray[np.bool_]) -> ConfidenceModel:
    """The features model of ``cal`` fitted on its units ``rows`` under ``cmap`` (a pair feature that some of
    those units lack is left out)."""
    extras = None if cal.features is None else [cal.features[i] for i in np.flatnonzero(rows)]
    probs = np.asarray(cal.probs, dtype=np.float64)[rows]
    verdict, _, x = feature_rows(cal, cmap, probs, extras)
    agree = cal.agrees(verdict, np.asarray(cal.human, dtype=np.int64)[rows])
    names = [n for j, n in enumerate(ALL_FEATURES) if np.all(np.isfinite(x[:, j]))]
    return fit_logistic(x, agree, names)


def split_scores(cal: Calibration, cmap: C.CalibrationMap,
                 part_a: npt.NDArray[np.bool_]) -> tuple[ConfidenceModel | None, np.ndarray, np.ndarray]:
    """A selection's estimator fitted on part A (``None`` for the default one) and part B's verdicts and
    confidences under it and ``cmap``."""
    model = fit_model(cal, cmap, part_a) if cal.confidence == FEATURES else None
    extras = None if cal.features is None else [cal.features[i] for i in np.flatnonzero(~part_a)]
    verdict, conf, _ = confidences(cal, cmap, model, np.asarray(cal.probs, dtype=np.float64)[~part_a], extras)
    return model, verdict, conf


def read_features(raw: Any, n: int, source: str) -> list[list[float | None]] | None:
    """A calibration file's pair features (optional), checked: :data:`PAIR_FEATURES` numbers or nulls per unit."""
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != n:
        raise ConfigError(f"{source}: field 'calibration_set.features' needs one row per unit ({n})")
    for i, row in enumerate(raw):
        if not (isinstance(row, list) and len(row) == len(PAIR_FEATURES)
                and all(v is None or _finite(v) for v in row)):
            raise ConfigError(f"{source}: calibration_set.features[{i}] is not {len(PAIR_FEATURES)} finite numbers "
                              f"or nulls ({', '.join(PAIR_FEATURES)})")
    return raw


def read(d: Mapping[str, Any], n: int, source: str) -> dict[str, Any]:
    """A calibration file's estimator fields, checked: ``confidence``, ``features`` and ``model``."""
    confidence = check_estimator(d.get("confidence", CALIBRATED), f"{source}: field 'confidence'")
    features = read_features((d.get("calibration_set") or {}).get("features"), n, source)
    if confidence == ENSEMBLE:
        from ._ensemble import check_templates
        check_templates(d.get("ensemble_templates"), source)
    elif "ensemble_templates" in d:  # an ensemble's map and set, its estimator renamed (the hash refuses it too)
        raise ConfigError(f"{source}: field 'ensemble_templates' belongs to an ensemble calibration, but field "
                          f"'confidence' is {confidence!r} (the file was edited: refit it)")
    if confidence in (ANNOTATORS, CRITIQUES):
        from ._panel import read_panel
        return {"confidence": confidence, "features": features, "model": None,
                "panel": read_panel(d.get("panel"), confidence, source)}
    if confidence in (CALIBRATED, ENSEMBLE):
        return {"confidence": confidence, "features": features, "model": None}
    if features is None:
        raise ConfigError(f"{source}: a features calibration needs 'calibration_set.features'")
    return {"confidence": confidence, "features": features,
            "model": ConfidenceModel.from_dict(d.get("confidence_model"), source)}


def attach(cal: Calibration, confidence: str, features: list[list[float | None]]) -> dict[str, Any]:
    """The estimator fields of a newly fitted calibration (:func:`read`'s shape): the features model fitted on
    every unit under the file's map."""
    if check_estimator(confidence) in (CALIBRATED, *COMBINED):
        return {"confidence": confidence, "features": None, "model": None}
    with_features = replace(cal, confidence=confidence, features=features)
    return {"confidence": confidence, "features": features,
            "model": fit_model(with_features, cal.map, np.ones(cal.n, dtype=bool))}


def unit_block(cal: Calibration, model: ConfidenceModel | None, x: np.ndarray) -> dict[str, Any]:
    """What a features calibration adds to a verdict's ``calibrated`` block: the estimator and its features."""
    if cal.confidence == CALIBRATED:
        return {}
    if cal.confidence in COMBINED:
        return {"confidence_estimator": cal.confidence}
    return {"confidence_estimator": FEATURES,
            "features": {n: (float(x[ALL_FEATURES.index(n)]) if math.isfinite(x[ALL_FEATURES.index(n)]) else None)
                         for n in (model.names if model is not None else ALL_FEATURES)}}


def file_fields(cal: Calibration) -> dict[str, Any]:
    """What a calibration file says of its estimator: nothing for the default one, the features model, or the
    ensemble's templates (names and hashes)."""
    if cal.confidence == ENSEMBLE:
        from ._ensemble import template_ids
        return {"confidence": ENSEMBLE, "ensemble_templates": template_ids()}
    if cal.confidence in (ANNOTATORS, CRITIQUES):
        return {"confidence": cal.confidence, **({"panel": cal.panel} if cal.panel is not None else {})}
    return {"confidence": cal.confidence, "confidence_model": cal.model.to_dict()} if cal.model else {}


def check_records(cal: Calibration, records: Sequence[Mapping[str, Any]]) -> None:
    """An ensemble (or panel) calibration applies only to ensemble (panel) records (their probabilities combined
    over its templates or judgments); a one-judgment record is refused, naming its item."""
    if cal.confidence in (ANNOTATORS, CRITIQUES):
        for r in records:
            block = r.get("panel")
            if not isinstance(block, Mapping) or block.get("estimator") != cal.confidence:
                raise ConfigError(f"item {r.get('item_id')!r}: a {cal.confidence} calibration applies to pairs "
                                  f"judged by its panel (Judge.select, `trustjudge select --calibration FILE`: zero "
                                  "calls where the store holds them), not to a record judged once")
        return
    if cal.confidence != ENSEMBLE:
        return
    for r in records:
        if not isinstance(r.get("ensemble"), Mapping):
            raise ConfigError(f"item {r.get('item_id')!r}: an ensemble calibration applies to pairs judged under "
                              "each of its templates (Judge.select, `trustjudge select --calibration FILE`: zero "
                              "calls where the store holds them), not to a record judged under one template")


def judged_once(cal: Any, where: str, runner: str, instead: str) -> None:
    """Refuse, before any judging, a calibration whose estimator is one of :data:`COMBINED` where each unit is
    judged once: ``where`` names the calibration, ``runner`` what judges once, ``instead`` how to apply it (the
    records would otherwise be refused only once every item was judged)."""
    if cal.confidence in COMBINED:
        raise ConfigError(f"{where}: its confidence estimator {cal.confidence!r} judges each pair several times (a "
                          f"template ensemble or a panel), which {runner} does not: {instead}")
