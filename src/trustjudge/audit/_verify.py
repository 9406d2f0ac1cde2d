"""Re-verifying a calibration file against the labelled items and the judgments it claims to hold.

A calibration file is trusted input: its hash shows that it was not edited by accident, not who labelled it
(anyone can recompute the hash). :func:`verification_problems` compares a file with a calibration fitted
afresh on its labelled items (``trustjudge calibrate ITEMS --verify CAL``, judgments read from the store):
the same units with the same human classes, the same probabilities and a map with the same parameters.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..errors import ConfigError

Calibration = Any
"""A :class:`~trustjudge.audit._trust.Calibration` (named loosely: ``_trust`` imports this module)."""

PROB_TOLERANCE = 1e-6
"""Two probabilities of one unit agree within this (the store's numbers, rounded by JSON)."""
PARAM_TOLERANCE = 1e-4
"""A refitted map's parameters agree with the file's within this, relative (the optimiser's spread)."""


def _close(a: Any, b: Any, tol: float) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol)
    return bool(a == b)


def check_integrity(data_hash: Any, cal: Calibration, source: str) -> None:
    """Refuse a file whose ``data_hash`` is missing or is not its calibration set's, and a repeated unit: a unit
    counted twice is tested twice (a repeated key's copies fall on both sides of the selection split); in a
    file without keys, a repeated row (probabilities and human class)."""
    if not isinstance(data_hash, str):  # every file trustjudge writes has one
        raise ConfigError(f"{source}: field 'data_hash' is missing or not a string (every calibration file "
                          "trustjudge writes has one): refit it with `trustjudge calibrate`")
    if data_hash != cal.data_hash:
        raise ConfigError(f"{source}: field 'data_hash' does not match its calibration set (the file was edited)")
    seen: dict[str, int] = {}
    rows = cal.keys if cal.keys is not None else [[*p, h] for p, h in zip(cal.probs, cal.human)]
    for i, row in enumerate(rows):
        first = seen.setdefault(json.dumps(row), i)
        if first != i:
            what = (f"calibration_set.keys[{i}] repeats keys[{first}] ({row!r})" if cal.keys is not None else
                    f"calibration_set row {i} repeats row {first} (a file without unit keys: refit it with "
                    "`trustjudge calibrate`)")
            raise ConfigError(f"{source}: {what}: each labelled verdict may be in the calibration set once")


def verification_problems(claimed: Calibration, fresh: Calibration) -> list[str]:
    """What differs between the calibration file ``claimed`` and ``fresh``, fitted on the items it names with
    the same judge, template and method (empty: the file is what those items and judgments give)."""
    problems = [f"{what}: the file says {have!r}, the refit {want!r}"
                for what, have, want in (("mode", claimed.mode, fresh.mode),
                                         ("judge fingerprint", claimed.fingerprint, fresh.fingerprint),
                                         ("template", claimed.template, fresh.template),
                                         ("protocol", claimed.protocol, fresh.protocol),
                                         ("method", claimed.map.method, fresh.map.method),
                                         ("classes", list(claimed.map.classes), list(fresh.map.classes)),
                                         ("levels", claimed.levels, fresh.levels),
                                         ("tolerance", claimed.tolerance, fresh.tolerance),
                                         ("confidence", claimed.confidence, fresh.confidence)) if have != want]
    if problems:
        return problems

    def by_key(cal: Calibration) -> dict[str, tuple[list[float], int]]:
        keys = cal.keys if cal.keys is not None else [[i] for i in range(cal.n)]
        return {json.dumps(k): (p, h) for k, p, h in zip(keys, cal.probs, cal.human)}

    if (claimed.keys is None) != (fresh.keys is None):
        return ["the file has no unit keys: refit it with `trustjudge calibrate` to verify it unit by unit"]
    have, want = by_key(claimed), by_key(fresh)
    classes = claimed.map.classes
    for key, (probs, human) in have.items():
        if key not in want:
            problems.append(f"unit {key} is not a labelled verdict of the items")
        elif human != want[key][1]:
            problems.append(f"unit {key}: human {classes[human]!r} in the file, {classes[want[key][1]]!r} in the "
                            "items")
        elif not _close(probs, want[key][0], PROB_TOLERANCE):
            problems.append(f"unit {key}: probabilities {probs} in the file, {want[key][0]} in the store")
    missing = [key for key in want if key not in have]
    if missing:
        problems.append(f"{len(missing)} labelled verdict(s) of the items are not in the file (first: {missing[0]})")
    if not problems and claimed.features is not None and not _close(
            [[-1.0 if v is None else v for v in row] for row in claimed.features],
            [[-1.0 if v is None else v for v in row] for row in fresh.features or ()], PROB_TOLERANCE):
        problems.append("the units' pair features are not those the store's judgments give")
    if not problems and claimed.model is not None and not _close(
            claimed.model.to_dict(), fresh.model.to_dict() if fresh.model else None, PARAM_TOLERANCE):
        problems.append("the confidence model's coefficients are not those its units give")
    if not problems and not _close(claimed.map.params, fresh.map.params, PARAM_TOLERANCE):
        problems.append(f"the map's parameters {claimed.map.params} are not those its units give "
                        f"({fresh.map.params})")
    return problems
