"""A shift warning with no labels: do a run's verdicts look like the calibration set's?

The guarantee of a selection assumes the new verdicts are exchangeable with the calibration set's. Labels are
what would show it fails; without them, the distributions of what the estimator sees still can. The reference
is the calibration set the file keeps (every unit's probabilities and, for a features calibration, its pair
features): with a target, part B of the selection split (the units the thresholds were tested on) under the
selection's map and model, so that both samples are scored by a map that never saw them; without one, every
unit under the file's map. Each feature (the confidence, the calibrated top's margin and entropy, the raw top,
and a features calibration's own features) is compared by a two-sample Kolmogorov-Smirnov test, the p-values
Holm-corrected across features; a corrected p-value below :data:`SHIFT_LEVEL` is a warning that names the
features and the verification-sample command (:mod:`trustjudge.audit._sample`). With no shift the warning
fires in at most a share :data:`SHIFT_LEVEL` of runs (Holm keeps the family-wise level; KS is conservative
on ties).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import _calibration as C
from . import _estimators as E
from ._units import Unit

Calibration = Any
"""A :class:`~trustjudge.audit._trust.Calibration` (named loosely: ``_trust`` imports this module)."""

SHIFT_LEVEL = 0.01
"""The family-wise level of the shift warning (Holm over the features tested)."""
MIN_UNITS = 20
"""Fewer scored verdicts in the run (or the reference) than this: nothing is tested."""
COLUMNS = ("confidence", *E.ALL_FEATURES)
VERIFY_COMMAND = "trustjudge sample VERDICTS --items ITEMS --out sample.jsonl"


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def _maps(cal: Calibration, selection: C.Selection | None) -> tuple[C.CalibrationMap, E.ConfidenceModel | None]:
    if selection is not None and selection.map is not None:
        return selection.map, selection.model
    return cal.map, cal.model


def reference(cal: Calibration, selection: C.Selection | None) -> np.ndarray:
    """The calibration set's rows (columns :data:`COLUMNS`) as a run's would be scored."""
    rows = ~cal.split() if selection is not None and selection.map is not None else np.ones(cal.n, dtype=bool)
    cmap, model = _maps(cal, selection)
    extras = None if cal.features is None else [cal.features[i] for i in np.flatnonzero(rows)]
    _, conf, x = E.confidences(cal, cmap, model, np.asarray(cal.probs, dtype=np.float64)[rows], extras)
    return np.asarray(np.c_[conf, x], dtype=np.float64)


def tested(cal: Calibration) -> tuple[str, ...]:
    """The columns a run is compared on: the confidence and the features the estimator reads."""
    if cal.model is not None:
        return ("confidence", *(n for n in cal.model.names if n != "top"))
    return ("confidence", "margin", "entropy", "raw_top")


def compare(ref: np.ndarray, run: np.ndarray, names: Sequence[str], level: float = SHIFT_LEVEL) -> dict[str, Any]:
    """The per-feature KS tests of ``run`` against ``ref`` (columns :data:`COLUMNS`), Holm-corrected."""
    from scipy.stats import ks_2samp  # type: ignore[import-untyped, unused-ignore]

    out: dict[str, Any] = {"test": "two-sample Kolmogorov-Smirnov per feature, Holm-corrected", "level": level,
                           "run_verdicts": int(run.shape[0]), "calibration_verdicts": int(ref.shape[0]),
                           "features": {}, "shifted": [], "warning": None}
    stats: list[tuple[str, float, float]] = []
    for name in names:
        j = COLUMNS.index(name)
        a, b = ref[:, j][np.isfinite(ref[:, j])], run[:, j][np.isfinite(run[:, j])]
        if a.size >= MIN_UNITS and b.size >= MIN_UNITS:
            res = ks_2samp(a, b)
            stats.append((name, float(res.statistic), float(res.pvalue)))
    if not stats:
        out["skipped"] = f"fewer than {MIN_UNITS} scored verdicts to compare"
        return out
    for (name, d, p), adjusted in zip(stats, holm([p for _, _, p in stats])):
        out["features"][name] = {"statistic": d, "p_value": p, "holm_p": adjusted}
        if adjusted < level:
            out["shifted"].append(name)
    if out["shifted"]:
        worst = min(out["features"][n]["holm_p"] for n in out["shifted"])
        out["warning"] = (f"shift: this run's {', '.join(out['shifted'])} differ from the calibration set's (KS, "
                          f"Holm-corrected p {worst:.2g} < {level:g}); the guarantee assumes they do not: check it on "
                          f"this data with a verification sample (`{VERIFY_COMMAND}`, label it, then `trustjudge "
                          "check-sample sample.jsonl`)")
    return out


class ShiftMonitor:
    """Collects a run's verdicts one by one (as :class:`~trustjudge.audit._trust.Tally` counts them) and tests
    them against the calibration set at the end."""

    def __init__(self, cal: Calibration, selection: C.Selection | None) -> None:
        self.cal, self.selection = cal, selection
        self.rows: list[np.ndarray] = []

    def add(self, record: Mapping[str, Any], unit: Unit) -> None:
        if unit.probs is None:
            return
        cmap, model = _maps(self.cal, self.selection)
        _, conf, x = E.confidences(self.cal, cmap, model, [unit.probs], [E.pair_features(record, unit.path)])
        self.rows.append(np.r_[conf, x[0]])

    def result(self) -> dict[str, Any]:
        run = np.array(self.rows, dtype=np.float64).reshape(len(self.rows), len(COLUMNS))
        return compare(reference(self.cal, self.selection), run, tested(self.cal))
