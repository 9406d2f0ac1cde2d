"""Calibration files and selective verdicts over judging records (zero model calls).

A *unit* is one probabilistic verdict a record holds: a pair's likelihood-aggregated verdict
(``compare``), one check of a checklist (``checklist``), one claim's verification (``claims``), one scored
response's distribution over the scale's levels (``score``; ``criteria``: one per criterion; a verdict agrees
within a tolerance, see :func:`score_verdicts`). This
module reads units and their human labels from record dicts, fits a :class:`Calibration` (saved as JSON
naming what it is valid for), and writes the calibrated probabilities, a confidence and, with a
:class:`~trustjudge.audit._calibration.Selection`, whether each verdict is kept or abstained on, back into the
records beside the raw ones (which stay as they were).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError
from . import _calibration as C
from . import _estimators as E
from . import _verify
from ._calfile import read_calibration_file
from ._levels import check_levels
from ._params import read_classes, read_map, read_position_bias
from ._readers import _SLACK, level_values_of, pairwise, scaled
from ._readers import CHECK_CLASSES as CHECK_CLASSES
from ._readers import PAIR_CLASSES as PAIR_CLASSES
from ._readers import _check_tolerance as _check_tolerance
from ._readers import nearest_level as nearest_level
from ._readers import position_bias_of as position_bias_of
from ._readers import score_agrees as score_agrees
from ._readers import score_verdicts as score_verdicts
from ._shift import ShiftMonitor
from ._split import SPLIT_SEED as SPLIT_SEED
from ._split import _read_keys
from ._split import selection_split as selection_split
from ._units import _READERS, UnitReader
from ._units import Unit as Unit
from ._verify import _digest as _digest

CALIBRATION_VERSION = _verify.ESTIMATOR_VERSION
"""The newest file version (plain calibrations are still written as version 1: :func:`~._verify.file_version`)."""
DEFAULT_TOLERANCE = 0.0
"""A pointwise verdict agrees with the human by default only on the same level (as the other modes' classes)."""

# Why a unit was not kept (``abstained`` holds one of these, or None when kept).
BELOW = "below_threshold"
UNSCORED = "unscored"


def calibration_modes() -> tuple[str, ...]:
    """Every mode a calibration can be fitted for now: those whose ``Mode`` declares its units."""
    return tuple(_READERS)


def calibrates(mode: str) -> bool:
    """Whether ``mode`` can be calibrated (whether its ``Mode`` declares its units)."""
    return mode in _READERS


def reader(mode: str) -> UnitReader:
    """``mode``'s calibration contract (``Mode(calibration=...)``); a ConfigError where it has none."""
    if mode not in _READERS:
        raise ConfigError(f"calibration covers the modes {', '.join(calibration_modes())}; got {mode!r} (a mode "
                          "declares its units with Mode(calibration=...))")
    return _READERS[mode]


def _check_mode(mode: str) -> None:
    reader(mode)


def levelled(mode: str) -> bool:
    """Whether ``mode``'s units are distributions over a scale's levels (agreement within a tolerance); ``False``
    for a mode without a calibration."""
    return mode in _READERS and scaled(_READERS[mode])


def _levelled_names() -> str:
    """The modes whose calibrations are over a scale's levels, for a message (``score and criteria``)."""
    return " and ".join(m for m in calibration_modes() if levelled(m))


def judge_scaled(mode: str) -> bool:
    """Whether ``mode``'s levels are the judge's own scale (``--scale`` sets the judge's, ``Judge(scale=...)``),
    rather than one its task or its records give."""
    return levelled(mode) and bool(getattr(_READERS[mode], "task_scale", False))


def classes_of(mode: str, records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The classes a mode's units are calibrated over (claims: the verification labels the records hold)."""
    return reader(mode).classes(records)


def units(mode: str, records: Sequence[Mapping[str, Any]], classes: Sequence[str] | None = None,
          levels: Sequence[float] | None = None) -> list[Unit]:
    """Every verdict of ``records`` (dicts as the CLI writes them) with its raw probabilities and human class
    (``levels``: a scale's level values, one per class; default: the classes read as numbers)."""
    found = reader(mode)
    classes = tuple(classes) if classes is not None else found.classes(records)
    if scaled(found):
        return found.units(records, classes, levels)  # type: ignore[call-arg]
    return found.units(records, classes)


def level_values(mode: str, records: Sequence[Mapping[str, Any]], classes: Sequence[str]) -> list[float] | None:
    """The value of each level as the records give it (a labelled scale: its ``labels``), or ``None`` where the
    labels are the values (decimal numbers)."""
    found = reader(mode)
    read = getattr(found, "level_values", None)
    return read(records, classes) if read is not None else None


_levels = level_values_of


def template_hash(text: str) -> str:
    """The identity of a prompt template: a calibration is valid only for the template it was fitted under."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Calibration:
    """A fitted calibration map and what it is valid for; self-contained (it keeps its calibration set).

    The calibration set (each unit's raw probabilities and human class) is kept in the file so that a
    selective threshold for any target can be chosen later without the items.
    """

    mode: str
    judge: str
    fingerprint: str
    template: str
    protocol: str
    map: C.CalibrationMap
    probs: list[list[float]]
    human: list[int]
    position_bias: float | None = None
    overridden: list[str] = field(default_factory=list)
    """What this file was accepted for despite a mismatch (``--calibration-override``); empty normally."""
    keys: list[list[str | int]] | None = None
    """Which verdict each calibration unit is (:func:`unit_key`), so that the calibration sets of several
    judges line up in a cascade; ``None`` in files written before cascades."""
    levels: list[float] | None = None
    """Score and criteria modes: each class's level value (the scale's values); ``None`` in the other modes."""
    tolerance: float | None = None
    """Score and criteria modes: a verdict agrees with a human level at most this many points away; ``None``
    in the other modes."""
    confidence: str = E.CALIBRATED
    """What ranks a verdict (:mod:`~trustjudge.audit._estimators`): ``calibrated`` or ``features``."""
    features: list[list[float | None]] | None = None
    """A features calibration: each unit's pair features (:data:`~trustjudge.audit._estimators.PAIR_FEATURES`)."""
    model: E.ConfidenceModel | None = None
    """A features calibration: its model, fitted on every unit under :attr:`map` (used without a target)."""
    panel: dict[str, Any] | None = None
    """An annotators or critiques calibration: its panel (:mod:`~trustjudge.audit._panel`)."""

    @property
    def n(self) -> int:
        return len(self.human)

    def verdicts(self, q: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], np.ndarray]:
        """Each calibrated row's verdict (class index) and confidence: the top class and its probability, or in
        the score mode the level with the most mass within the tolerance and that mass (:func:`score_verdicts`)."""
        p = np.atleast_2d(np.asarray(q, dtype=np.float64))
        if levelled(self.mode):
            return score_verdicts(p, _levels(self.map.classes, self.levels), self.tolerance or 0.0)
        return p.argmax(axis=1).astype(np.int64), p.max(axis=1)

    def agrees(self, verdict: npt.ArrayLike, human: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Whether each verdict agrees with the human class (score, criteria: within the tolerance)."""
        if levelled(self.mode):
            return score_agrees(verdict, human, _levels(self.map.classes, self.levels), self.tolerance or 0.0)
        return np.asarray(np.asarray(verdict) == np.asarray(human))

    def check_tolerance(self, tolerance: float | None) -> None:
        """Refuse a tolerance other than the one this (score, criteria) calibration was fitted with (never
        overridable: agreement would mean another thing); ``None`` takes the file's."""
        if tolerance is None:
            return
        if not levelled(self.mode):
            raise ConfigError(f"a tolerance applies to {_levelled_names()} calibrations, not to {self.mode} ones")
        if abs(_check_tolerance(tolerance, "--tolerance") - (self.tolerance or 0.0)) > _SLACK:
            raise ConfigError(f"this calibration was fitted with tolerance {self.tolerance:g}, not {tolerance:g}: "
                              f"refit it with `trustjudge calibrate --mode {self.mode} --tolerance {tolerance:g}` (the "
                              "store holds the judgments: zero model calls)")

    @property
    def data_hash(self) -> str:
        """The calibration set's hash, and a non-plain estimator's fields (:func:`~._verify.data_hash`)."""
        return _verify.data_hash(self)

    def calibrated(self, probs: Sequence[Sequence[float]]) -> np.ndarray:
        return self.map.apply(np.asarray(probs, dtype=np.float64))

    def fit_map(self, probs: npt.ArrayLike, human: npt.ArrayLike) -> C.CalibrationMap:
        """A map of this file's method over its classes, fitted on the given units (raw rows, human classes)."""
        return fit_map(self.mode, self.map.method, self.map.classes, probs, human)

    def split(self) -> npt.NDArray[np.bool_]:
        """Which calibration units a selection fits its map on (``True``, part A); the rest (part B) test its
        thresholds (:func:`selection_split`)."""
        return selection_split(self.keys, self.n)

    def selection(self, target: float, delta: float, force_delta: bool = False) -> C.Selection:
        """The threshold for agreement >= ``target`` with probability >= 1 - ``delta`` (ConfigError if unsupported).

        The calibration units are split in two (:meth:`split`): the selection map is fitted on part A with the
        file's method, and the thresholds are tested on part B's calibrated confidences under it; the returned
        selection carries that map, which :func:`annotate` applies to the verdicts it keeps or abstains on.
        """
        check_levels(target, delta, force_delta)  # a delta above 0.5 is refused unless force_delta
        part_a = self.split()
        n_fit, n_test = int(part_a.sum()), int((~part_a).sum())
        where = (f"calibration file of {self.n} labelled {self.mode} verdicts: the selection map is fitted on "
                 f"{n_fit} of them and the thresholds tested on the other {n_test}")
        if n_fit < 2:
            raise ConfigError(f"the calibration set cannot support a selection: its map needs at least 2 units to "
                              f"fit on besides those its thresholds are tested on ({where})")
        probs = np.asarray(self.probs, dtype=np.float64)
        human = np.asarray(self.human, dtype=np.int64)
        cmap = self.fit_map(probs[part_a], human[part_a])
        model, verdict, confidence = E.split_scores(self, cmap, part_a)  # the estimator fitted on part A too
        agree = self.agrees(verdict, human[~part_a])
        try:
            chosen = C.choose_threshold(confidence, agree, alpha=1 - target, delta=delta)
        except ConfigError as exc:
            raise ConfigError(f"{exc} ({where})") from None
        return replace(chosen, map=cmap, fit_units=n_fit, model=model)

    def check(self, *, mode: str, judge: str, fingerprint: str, template: str, protocol: str,
              override: bool = False) -> Calibration:
        """This calibration if it is valid for the given judging; a ConfigError naming the mismatch if not.

        With ``override`` a mismatch is accepted and the returned calibration lists it in ``overridden``.
        """
        wanted = {"mode": mode, "judge fingerprint": fingerprint, "template": template, "protocol": protocol}
        have = {"mode": self.mode, "judge fingerprint": self.fingerprint, "template": self.template,
                "protocol": self.protocol}
        bad = [k for k in wanted if wanted[k] != have[k]]
        if "mode" in bad:  # never overridable: the units differ
            raise ConfigError(f"this calibration is for the {self.mode} mode, not {mode}")
        if bad and not override:
            detail = "; ".join(f"{k}: calibrated {have[k]!r}, now {wanted[k]!r}" for k in bad)
            raise ConfigError(f"the calibration file does not fit this judging ({detail}; it was fitted for judge "
                              f"{self.judge}): refit it with `trustjudge calibrate`, or pass "
                              "--calibration-override to use it anyway (every record then says so)")
        return replace(self, overridden=bad) if bad else self

    # -- files ----------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"trustjudge_calibration": _verify.file_version(self), "mode": self.mode, "judge": self.judge,
                "fingerprint": self.fingerprint, "template": self.template, "protocol": self.protocol,
                "classes": list(self.map.classes), "method": self.map.method, "params": self.map.params,
                "n": self.n, "data_hash": self.data_hash, "position_bias": self.position_bias,
                **({"levels": self.levels, "tolerance": self.tolerance} if levelled(self.mode) else {}),
                **E.file_fields(self),
                "calibration_set": {"probs": self.probs, "human": self.human,
                                    **({"keys": self.keys} if self.keys is not None else {}),
                                    **({"features": self.features} if self.features is not None else {})}}

    def save(self, path: str | Path) -> None:
        from ..io._outputs import atomic_output

        with atomic_output(Path(path)) as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "calibration") -> Calibration:
        def need(key: str, kind: type | tuple[type, ...]) -> Any:
            if key not in d:
                raise ConfigError(f"{source}: missing field {key!r}")
            if not isinstance(d[key], kind) or (isinstance(d[key], bool) and kind is not bool):
                raise ConfigError(f"{source}: field {key!r} has the wrong type ({type(d[key]).__name__})")
            return d[key]

        version = d.get("trustjudge_calibration")
        if isinstance(version, bool) or version not in _verify.VERSIONS:
            raise ConfigError(f"{source}: not a trustjudge calibration file (version {version!r}, this release reads "
                              f"{' and '.join(map(str, _verify.VERSIONS))})")
        mode = need("mode", str)
        _check_mode(mode)
        classes = read_classes(need("classes", list), source)
        method = need("method", str)
        if method not in C.METHODS:
            raise ConfigError(f"{source}: field 'method' is {method!r}, not one of {', '.join(C.METHODS)}")
        cal_set = need("calibration_set", dict)
        probs, human = cal_set.get("probs"), cal_set.get("human")
        if not (isinstance(probs, list) and isinstance(human, list) and len(probs) == len(human)):
            raise ConfigError(f"{source}: field 'calibration_set' needs lists 'probs' and 'human' of equal length")
        for i, (row, h) in enumerate(zip(probs, human)):
            if (not isinstance(row, list) or len(row) != len(classes)
                    or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in row)):
                raise ConfigError(f"{source}: calibration_set.probs[{i}] is not {len(classes)} finite numbers")
            if not isinstance(h, int) or isinstance(h, bool) or not 0 <= h < len(classes):
                raise ConfigError(f"{source}: calibration_set.human[{i}] is not a class index")
        keys = _read_keys(cal_set.get("keys"), len(human), source)
        levels, tolerance = _read_pointwise(d, mode, classes, source)
        cal = cls(mode, need("judge", str), need("fingerprint", str), need("template", str), need("protocol", str),
                  read_map(method, classes, need("params", dict), source), probs, human,
                  read_position_bias(d.get("position_bias"), source), keys=keys, levels=levels, tolerance=tolerance,
                  **E.read(d, len(human), source))
        _verify.check_integrity(d.get("data_hash"), cal, source, version)  # its hash and version; no unit twice
        return cal

    @classmethod
    def load(cls, path: str | Path, max_bytes: int | None = None) -> Calibration:
        """Read ``path``, at most ``max_bytes`` (default ``$TRUSTJUDGE_MAX_CALIBRATION_BYTES``, else 64 MiB)."""
        data = read_calibration_file(path, max_bytes)
        try:
            return cls.from_dict(data, str(path))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: bad parameters ({exc})") from None


def fit_map(mode: str, method: str, classes: Sequence[str], probs: npt.ArrayLike,
            human: npt.ArrayLike) -> C.CalibrationMap:
    """A calibration map of ``method`` over ``classes`` fitted on raw rows and human classes, as :func:`fit`
    fits a file's (score and criteria: vector or temperature over the levels; two classes: platt, temperature
    or isotonic; more: vector)."""
    p = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    y = np.asarray(human, dtype=np.int64)
    if levelled(mode):
        return C.fit_vector(p, y, classes) if method == "vector" else C.fit_temperature(p, y, classes)
    if len(classes) == 2:
        return C.fit_binary(p[:, 1], y, method, (classes[0], classes[1]))  # type: ignore[arg-type]
    return C.fit_vector(p, y, classes)


def fit(mode: str, records: Sequence[Mapping[str, Any]], *, judge: str, fingerprint: str, template: str,
        protocol: str, method: str | None = None, levels: Sequence[float] | None = None,
        tolerance: float | None = None, confidence: str = E.CALIBRATED) -> Calibration:
    """Fit a calibration on the labelled, scored units of ``records``.

    ``method``: ``platt`` (default for checklists), ``temperature`` or ``isotonic`` on two classes;
    ``vector`` (default, and the only one) on several classes. The score mode (:func:`_fit_score`):
    ``levels`` are the scale's values (default: its labels read as numbers), ``tolerance`` the agreement's.
    ``confidence``: the estimator that ranks the verdicts (:mod:`~trustjudge.audit._estimators`).
    """
    if levelled(mode):
        return _fit_score(mode, records, judge=judge, fingerprint=fingerprint, template=template, protocol=protocol,
                          method=method, levels=levels, tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance,
                          confidence=confidence)
    if tolerance is not None:
        raise ConfigError(f"a tolerance applies to {_levelled_names()} calibrations, not to {mode} ones")
    classes = classes_of(mode, records)
    labelled = [u for u in units(mode, records, classes) if u.probs is not None and u.human is not None]
    if len(labelled) < 2:
        raise ConfigError(f"calibration needs labelled, scored verdicts: found {len(labelled)} in {len(records)} "
                          f"{mode} record(s) (give human labels: pairs' `human`, `human_checks`, claims' `human`)")
    probs = np.asarray([u.probs for u in labelled], dtype=np.float64)
    human = np.asarray([u.human for u in labelled], dtype=np.int64)
    if len(classes) == 2:
        chosen = method or "platt"
        if chosen not in ("platt", "temperature", "isotonic"):
            raise ConfigError(f"two-class calibration takes platt, temperature or isotonic, not {chosen!r}")
        cmap = C.fit_binary(probs[:, 1], human, chosen, (classes[0], classes[1]))  # type: ignore[arg-type]
    else:
        if method not in (None, "vector"):
            raise ConfigError(f"{len(classes)}-class calibration is vector scaling; {method!r} needs two classes")
        cmap = C.fit_vector(probs, human, classes)
    bias_of = getattr(reader(mode), "position_bias", None)
    bias = bias_of(records) if bias_of is not None else None
    keys = [list(unit_key(mode, records[u.record], u)) for u in labelled]
    cal = Calibration(mode, judge, fingerprint, template, protocol, cmap, probs.tolist(), human.tolist(), bias,
                      keys=keys)
    return replace(cal, **E.attach(cal, confidence, [E.pair_features(records[u.record], u.path) for u in labelled]))


VECTOR_MAX_LEVELS = 11
"""Score scales up to this many levels (every 1-10 and 0-10 scale) get vector scaling; longer ones (0-100) a
temperature alone: a bias per level would need humans on every one of a hundred levels."""


def _fit_score(mode: str, records: Sequence[Mapping[str, Any]], *, judge: str, fingerprint: str, template: str,
               protocol: str, method: str | None, levels: Sequence[float] | None, tolerance: float,
               confidence: str = E.CALIBRATED) -> Calibration:
    """A score (or criteria) calibration: vector scaling over the levels (``temperature`` alone on scales of
    more than :data:`VECTOR_MAX_LEVELS` levels, or when asked), fitted by likelihood on the human's nearest
    level; criteria pool every criterion judged on the same levels."""
    tolerance = _check_tolerance(tolerance, "tolerance")
    classes = classes_of(mode, records)
    values = _levels(classes, levels if levels is not None else level_values(mode, records, classes))
    all_units = units(mode, records, classes, values)
    found = reader(mode)
    field_name, human_of, noun = (getattr(found, "field", "human"), getattr(found, "human", "human"),
                                  getattr(found, "noun", "entry"))
    for u in all_units:
        rec = records[u.record]
        part: Mapping[str, Any] = rec if not u.path else rec[u.path[0]][u.path[1]]  # type: ignore[index]
        h = part.get(human_of)
        if h is not None and u.human is None:
            name = "" if not u.path else f", {noun} {part.get('name')!r}"
            raise ConfigError(f"item {rec.get('item_id')!r}, response {rec.get('response_id')!r}{name}: {field_name} "
                              f"{h!r} lies outside the judging scale {min(values):g}..{max(values):g} (give human "
                              "scores on the scale the judge scores on)")
    labelled = [u for u in all_units if u.probs is not None and u.human is not None]
    if len(labelled) < 2:
        raise ConfigError(f"calibration needs labelled, scored verdicts: found {len(labelled)} in {len(records)} "
                          f"{mode} record(s) (give human scores: responses' `{field_name}`)")
    chosen = method or ("vector" if len(classes) <= VECTOR_MAX_LEVELS else "temperature")
    if chosen not in ("vector", "temperature"):
        raise ConfigError(f"score calibration is vector scaling or temperature over the levels, not {chosen!r}")
    probs = np.asarray([u.probs for u in labelled], dtype=np.float64)
    human = np.asarray([u.human for u in labelled], dtype=np.int64)
    cmap = C.fit_vector(probs, human, classes) if chosen == "vector" else C.fit_temperature(probs, human, classes)
    keys = [list(unit_key(mode, records[u.record], u)) for u in labelled]
    cal = Calibration(mode, judge, fingerprint, template, protocol, cmap, probs.tolist(), human.tolist(),
                      None, keys=keys, levels=list(values), tolerance=tolerance)
    return replace(cal, **E.attach(cal, confidence, [E.pair_features(records[u.record], u.path) for u in labelled]))


def _read_pointwise(d: Mapping[str, Any], mode: str, classes: tuple[str, ...],
                    source: str) -> tuple[list[float] | None, float | None]:
    """A calibration file's level values and tolerance, checked, for a mode whose units are distributions over a
    scale's levels (:func:`levelled`); ``None, None`` in the other modes."""
    if not levelled(mode):
        return None, None
    levels = d.get("levels")
    if not (isinstance(levels, list) and len(levels) == len(classes)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in levels)):
        raise ConfigError(f"{source}: field 'levels' needs one finite level value per class ({len(classes)})")
    if "tolerance" not in d:
        raise ConfigError(f"{source}: missing field 'tolerance'")
    return [float(v) for v in levels], _check_tolerance(d["tolerance"], f"{source}: field 'tolerance'")


def unit_key(mode: str, record: Mapping[str, Any], unit: Unit) -> tuple[str | int, ...]:
    """Which verdict ``unit`` of ``record`` is, the same for every judge: a pair's item and response ids; a
    check's or claim's item, response and place."""
    if pairwise(reader(mode)):
        return (str(record["item_id"]), str(record["first_id"]), str(record["second_id"]))
    return (str(record["item_id"]), str(record["response_id"]), *unit.path)


def annotate(mode: str, records: Sequence[dict[str, Any]], calibration: Calibration,
             selection: C.Selection | None = None) -> list[dict[str, Any]]:
    """Copies of ``records`` with each unit's ``calibrated`` block: probabilities, verdict, confidence and,
    with ``selection``, ``abstained`` (None when kept, else why). The raw fields are left as they were."""
    out = [json.loads(json.dumps(r)) for r in records]
    classes = calibration.map.classes
    cmap, model = selection_map(calibration, selection), selection_model(calibration, selection)
    E.check_records(calibration, out)
    for unit in units(mode, out, classes, calibration.levels):
        block: dict[str, Any] = {"probabilities": None, "verdict": None, "confidence": None}
        if unit.probs is not None:
            q = cmap.apply(np.asarray([unit.probs], dtype=np.float64))
            verdict, confidence, x = E.confidences(calibration, cmap, model, [unit.probs],
                                                   [E.pair_features(out[unit.record], unit.path)])
            block = {"probabilities": dict(zip(classes, map(float, q[0]))), "verdict": classes[int(verdict[0])],
                     "confidence": float(confidence[0]), **E.unit_block(calibration, model, x[0])}
        if levelled(mode):
            block.update(_score_block(calibration, block["probabilities"]))
        if selection is not None:
            block["abstained"] = (UNSCORED if block["confidence"] is None
                                  else None if block["confidence"] >= selection.threshold else BELOW)
            if selection.fit_units is not None:
                block["selection"] = {"fit_units": selection.fit_units, "test_units": selection.n}
        if calibration.overridden:
            block["overridden"] = list(calibration.overridden)
        target: dict[str, Any] = out[unit.record]
        for step in unit.path:
            target = target[step]  # type: ignore[index]
        target["calibrated"] = block
    return out


def selection_map(calibration: Calibration, selection: C.Selection | None) -> C.CalibrationMap:
    """The map a run's verdicts come from: the selection's (fitted on part A of the split) when there is one,
    else the calibration file's (fitted on every unit)."""
    return selection.map if selection is not None and selection.map is not None else calibration.map


def selection_model(calibration: Calibration, selection: C.Selection | None) -> E.ConfidenceModel | None:
    """The features model a run's confidences come from: the selection's (fitted on part A), else the file's."""
    return selection.model if selection is not None and selection.map is not None else calibration.model


def _score_block(calibration: Calibration, probs: Mapping[str, float] | None) -> dict[str, Any]:
    """What a calibrated score adds: the calibrated expected score and the tolerance the verdict is read with."""
    values = _levels(calibration.map.classes, calibration.levels)
    expected = None if probs is None else float(sum(v * probs[c] for c, v in zip(calibration.map.classes, values)))
    return {"expected": expected, "tolerance": calibration.tolerance}


class Tally:
    """Running totals of annotated records for a run's summary (constant memory: records are added one by one).

    A verdict is *kept* when it has a calibrated confidence and, with a selection, is not abstained on;
    agreement is counted on the kept verdicts whose record carries a human label.
    """

    def __init__(self, mode: str, calibration: Calibration, selection: C.Selection | None) -> None:
        self.mode, self.calibration, self.selection = mode, calibration, selection
        self.verdicts = self.kept = self.labelled = self.agreed = 0
        self.abstained: dict[str, int] = {}
        self.shift = ShiftMonitor(calibration, selection)  # the run's verdicts against the calibration set's

    def add(self, record: Mapping[str, Any]) -> None:
        """Count the units of one annotated record."""
        classes = self.calibration.map.classes
        for unit in units(self.mode, [record], classes, self.calibration.levels):
            target: Any = record
            for step in unit.path:
                target = target[step]
            block = target.get("calibrated") or {}
            self.verdicts += 1
            self.shift.add(record, unit)
            reason = block.get("abstained") if self.selection is not None else None
            if reason is None and block.get("confidence") is None:
                reason = UNSCORED
            if reason is not None:
                self.abstained[reason] = self.abstained.get(reason, 0) + 1
                continue
            self.kept += 1
            if unit.human is not None:
                self.labelled += 1
                verdict = block.get("verdict")
                self.agreed += verdict in classes and bool(
                    self.calibration.agrees([classes.index(verdict)], [unit.human])[0])

    def result(self) -> dict[str, Any]:
        """The summary: coverage, agreement on kept labelled verdicts, the guarantee and what it rests on."""
        cal = self.calibration
        out: dict[str, Any] = {
            "mode": self.mode, "verdicts": self.verdicts, "kept": self.kept,
            "coverage": self.kept / self.verdicts if self.verdicts else None,
            "abstained": dict(sorted(self.abstained.items())),
            "agreement_on_kept": self.agreed / self.labelled if self.labelled else None,
            "labelled_kept": self.labelled,
            "calibration": {"judge": cal.judge, "n": cal.n, "method": cal.map.method, "data_hash": cal.data_hash,
                            "overridden": list(cal.overridden)}}
        if levelled(cal.mode):
            out["calibration"]["tolerance"] = cal.tolerance
        if self.selection is not None:
            out["guarantee"] = self.selection.to_dict()
        out["shift"] = self.shift.result()
        return out


def summary(mode: str, annotated: Sequence[Mapping[str, Any]], calibration: Calibration,
            selection: C.Selection | None) -> dict[str, Any]:
    """Coverage, and agreement with humans where the records carry labels, of annotated records."""
    tally = Tally(mode, calibration, selection)
    for record in annotated:
        tally.add(record)
    return tally.result()


def check_classes(mode: str, calibration: Calibration, classes: Sequence[str]) -> None:
    """Refuse a calibration whose classes are not those the judging asks for (claims with ``--unknown``)."""
    if tuple(classes) != tuple(calibration.map.classes):
        raise ConfigError(f"the calibration covers the {mode} classes {', '.join(calibration.map.classes)}, but "
                          f"this judging asks for {', '.join(classes)}: refit it on judgments with these labels")


def abstained_items(mode: str, annotated: Sequence[Mapping[str, Any]],
                    items_by_id: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The items behind abstained verdicts, in the items format, for human labelling.

    Pairs keep only the abstained pairs (``human`` left empty to fill in); checklists and claims keep the
    responses with an abstained check or claim. Labels written back into the file make it a calibration set.
    """
    wanted: dict[str, set[Any]] = {}
    found = reader(mode)
    by_pair = pairwise(found)
    for rec in annotated:
        if by_pair:
            if (rec.get("calibrated") or {}).get("abstained") is not None:
                wanted.setdefault(rec["item_id"], set()).add((rec["first_id"], rec["second_id"]))
        else:
            parts = [rec] if found.part is None else rec.get(found.part) or ()
            if any((p.get("calibrated") or {}).get("abstained") is not None for p in parts):
                wanted.setdefault(rec["item_id"], set()).add(rec["response_id"])
    out = []
    for item_id, keys in wanted.items():
        item = json.loads(json.dumps(items_by_id[item_id]))
        if by_pair:
            item["pairs"] = [{"first": f, "second": s, "human": None} for f, s in sorted(keys)]
        else:
            item["responses"] = [r for r in item.get("responses", []) if r.get("id") in keys]
        out.append(item)
    return out
