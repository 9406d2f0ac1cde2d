"""Re-verifying a calibration file against the labelled items and the judgments it claims to hold.

A calibration file is trusted input: its hash shows that it was not edited by accident, not who labelled it
(anyone can recompute the hash). :func:`verification_problems` compares a file with a calibration fitted
afresh on its labelled items (``trustjudge calibrate ITEMS --verify CAL``, judgments read from the store):
the same units with the same human classes, the same probabilities and a map with the same parameters.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any

from ..errors import ConfigError
from ._estimators import CALIBRATED, file_fields

Calibration = Any
"""A :class:`~trustjudge.audit._trust.Calibration` (named loosely: ``_trust`` imports this module)."""

PLAIN_VERSION = 1
"""The file version of a ``calibrated`` (plain) calibration: its data hash covers its calibration set."""
ESTIMATOR_VERSION = 2
"""The file version of every other estimator's calibration: its data hash covers the calibration set and the
confidence estimator (its name and the fields that say what it is: the features model, the ensemble's templates,
the panel). Version 1 files of those estimators are refused: their hash did not cover the estimator, so a plain
file edited to one read the same."""
VERSIONS = (PLAIN_VERSION, ESTIMATOR_VERSION)

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


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def file_version(cal: Calibration) -> int:
    """The version a calibration's file is written with: 1 for a plain one (its hash as before), else 2."""
    return PLAIN_VERSION if cal.confidence == CALIBRATED else ESTIMATOR_VERSION


def set_hash(cal: Calibration) -> str:
    """The version-1 hash: the calibration set (probabilities, human classes, keys, pair features) and the panel."""
    return _digest([cal.probs, cal.human, *([cal.keys] if cal.keys is not None else []),
                    *([cal.features] if cal.features is not None else []),
                    *([cal.panel] if cal.panel is not None else [])])  # a panel's examples too


def data_hash(cal: Calibration) -> str:
    """A calibration's data hash: :func:`set_hash` for a plain one (unchanged, so its files, ledgers and run
    summaries keep theirs); for another estimator, the calibration set and the estimator's file fields (its name,
    the features model, the ensemble's templates or the panel: :func:`~trustjudge.audit._estimators.file_fields`)."""
    if file_version(cal) == PLAIN_VERSION:
        return set_hash(cal)
    return _digest({"calibration_set": [cal.probs, cal.human, cal.keys, cal.features], "estimator": file_fields(cal)})


def known_hashes(cal: Calibration) -> tuple[str, ...]:
    """The hashes a ledger entry or run summary may name ``cal`` by: its data hash, then (a non-plain one) its
    version-1 hash, under which the previous release recorded the same calibration set before it was refitted."""
    older = set_hash(cal)
    return (cal.data_hash,) if older == cal.data_hash else (cal.data_hash, older)


def _remedy(cal: Calibration, source: str) -> str:
    """How to write the file again (zero model calls where the store holds its judgments); ``source`` names the
    file where it is one (not a service request's field)."""
    size = f" --panel-size {cal.panel['size']}" if cal.panel is not None and "size" in cal.panel else ""
    out = source if os.path.isfile(source) else "FILE"
    return (f"refit it from the labelled items it was fitted on, zero model calls where the store holds their "
            f"judgments: `trustjudge calibrate ITEMS -j {cal.judge} --mode {cal.mode} --confidence {cal.confidence}"
            f"{size} --out {out}`")


def _check_version(version: Any, cal: Calibration, source: str) -> None:
    """Refuse a file whose version is not the one its estimator is written with (the hash rule follows it)."""
    if version == file_version(cal):
        return
    if version == PLAIN_VERSION:  # before: a plain file edited to another estimator read the same
        raise ConfigError(f"{source}: field 'confidence' is {cal.confidence!r} in a version-1 calibration file, whose "
                          "data_hash does not cover the confidence estimator (a plain file edited to another one "
                          f"reads the same): this release reads {cal.confidence} calibrations as version "
                          f"{ESTIMATOR_VERSION} files only; {_remedy(cal, source)}")
    raise ConfigError(f"{source}: field 'trustjudge_calibration' is {version!r}, but field 'confidence' is "
                      f"{cal.confidence!r}, written as version {PLAIN_VERSION} (the file was edited): refit it with "
                      "`trustjudge calibrate`")


def check_integrity(data_hash: Any, cal: Calibration, source: str, version: Any) -> None:
    """Refuse a file whose ``data_hash`` is missing or is not its calibration set's (and, at version 2, its
    estimator's), a file whose version is not its estimator's (:func:`file_version`), and a repeated unit: a unit
    counted twice is tested twice (a repeated key's copies fall on both sides of the selection split); in a
    file without keys, a repeated row (probabilities and human class)."""
    if not isinstance(data_hash, str):  # every file trustjudge writes has one
        raise ConfigError(f"{source}: field 'data_hash' is missing or not a string (every calibration file "
                          "trustjudge writes has one): refit it with `trustjudge calibrate`")
    _check_version(version, cal, source)
    if data_hash != cal.data_hash:
        if version == PLAIN_VERSION:
            raise ConfigError(f"{source}: field 'data_hash' does not match its calibration set (the file was edited)")
        fields = ", ".join(f"'{k}'" for k in file_fields(cal))
        why = (f"it is the version-1 hash of the calibration set alone, which does not cover fields {fields} (a "
               "file edited to another estimator, its version raised by hand)" if data_hash == set_hash(cal) else
               f"the file was edited: its calibration set or its estimator's fields {fields}")
        raise ConfigError(f"{source}: field 'data_hash' does not match its calibration set and confidence estimator "
                          f"({why}); {_remedy(cal, source)}")
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
