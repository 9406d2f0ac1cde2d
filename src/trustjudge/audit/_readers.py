"""The calibration units of verdicts the built-in modes share the shape of (each mode file declares one with
``Mode(calibration=...)``, exactly as a plug-in declares :class:`~trustjudge.audit._units.LabelUnits`):

- :class:`PairUnits`: one pair's verdict (first / second / tie) per record, keyed by the pair;
- :class:`PartUnits`: one verdict per entry of a list field (a checklist's checks, two classes from
  ``p_pass``; a claim list's claims over the labels the records hold);
- :class:`LevelUnits`: a distribution over a scale's levels (a scored response, or each criterion), whose
  verdict agrees with the human within a tolerance (:attr:`LevelUnits.levels` is ``True``).

Every reader says what :mod:`trustjudge.audit._trust` needs beyond the :class:`UnitReader` protocol through
optional attributes (:func:`scaled`, :func:`pairwise`); a reader without them is one of discrete classes keyed
by item, response and place.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError
from . import _calibration as C
from ._units import Unit, UnitReader

PAIR_CLASSES = ("first", "second", "tie")
CHECK_CLASSES = ("fail", "pass")
CLAIM_CLASSES = ("SUPPORTED", "PARTIAL", "UNSUPPORTED")

_SLACK = 1e-9  # a level exactly the tolerance away is within it, whatever the rounding


def scaled(reader: UnitReader) -> bool:
    """Whether ``reader``'s units are distributions over a scale's levels (agreement within a tolerance)."""
    return bool(getattr(reader, "levels", False))


def pairwise(reader: UnitReader) -> bool:
    """Whether each of ``reader``'s units is a pair of responses (keyed by the pair, abstained by the pair)."""
    return bool(getattr(reader, "pairwise", False))


def position_bias_of(records: Iterable[Mapping[str, Any]]) -> float | None:
    """The label-free first-slot bias of pairwise records (None without a pair judged in both orders)."""
    rows = []
    for rec in records:
        orders = rec.get("orders") or []
        if len(orders) == 2 and all(o.get("A") is not None for o in orders):
            rows.append([[o["A"], o["B"], o["C"]] for o in orders])
    return C.position_bias(rows) if rows else None


def _pair_human(value: Any) -> int | None:
    if isinstance(value, str) and value.lower() in PAIR_CLASSES:
        return PAIR_CLASSES.index(value.lower())
    return None


@dataclass(frozen=True)
class PairUnits:
    """One pairwise verdict per record: ``probabilities`` over first / second / tie, the human's ``human``."""

    part: str | None = None
    pairwise: bool = True

    def classes(self, records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        return PAIR_CLASSES

    def units(self, records: Sequence[Mapping[str, Any]], classes: Sequence[str]) -> list[Unit]:
        out = []
        for i, rec in enumerate(records):
            p = rec.get("probabilities")
            probs = tuple(float(p[c]) for c in PAIR_CLASSES) if p else None
            out.append(Unit(i, (), probs, _pair_human(rec.get("human"))))
        return out

    def position_bias(self, records: Sequence[Mapping[str, Any]]) -> float | None:
        return position_bias_of(records)


@dataclass(frozen=True)
class CheckUnits:
    """One two-class verdict per entry of ``part``: ``p_pass`` (fail, pass), the human's 0/1 ``human``."""

    part: str = "checks"

    def classes(self, records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        return CHECK_CLASSES

    def units(self, records: Sequence[Mapping[str, Any]], classes: Sequence[str]) -> list[Unit]:
        out = []
        for i, rec in enumerate(records):
            for j, check in enumerate(rec.get(self.part) or ()):
                pp = check.get("p_pass")
                probs = (1.0 - float(pp), float(pp)) if pp is not None and check.get("unscored") is None else None
                h = check.get("human")
                out.append(Unit(i, (self.part, j), probs, None if h is None else int(float(h) >= 0.5)))
        return out


@dataclass(frozen=True)
class PartLabelUnits:
    """One verdict per entry of ``part`` over the labels its ``probabilities`` name (the first entry that has
    them; ``default`` where none does), the human's label under ``human`` (matched in upper case)."""

    part: str = "claims"
    default: tuple[str, ...] = CLAIM_CLASSES

    def classes(self, records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        for rec in records:
            for entry in rec.get(self.part) or ():
                if entry.get("probabilities"):
                    return tuple(entry["probabilities"])
        return self.default

    def units(self, records: Sequence[Mapping[str, Any]], classes: Sequence[str]) -> list[Unit]:
        out = []
        for i, rec in enumerate(records):
            for j, entry in enumerate(rec.get(self.part) or ()):
                p = entry.get("probabilities")
                probs = tuple(float(p.get(c, 0.0)) for c in classes) if p and not entry.get("unscored") else None
                h = entry.get("human")
                human = classes.index(h.upper()) if isinstance(h, str) and h.upper() in classes else None
                out.append(Unit(i, (self.part, j), probs, human))
        return out


# -- units over a scale's levels -------------------------------------------------------------------------------

def level_values_of(classes: Sequence[str], levels: Sequence[float] | None) -> tuple[float, ...]:
    """The value of each level (class) of a score calibration: ``levels`` as given, or the labels as numbers."""
    if levels is not None:
        if len(levels) != len(classes):
            raise ConfigError(f"{len(classes)} score levels {list(classes)} but {len(levels)} level values")
        return tuple(float(v) for v in levels)
    try:
        return tuple(float(c) for c in classes)
    except ValueError:
        raise ConfigError(f"the score levels {list(classes)} are not numbers: give the scale's level values") from None


def nearest_level(value: float, levels: Sequence[float]) -> int | None:
    """The index of the level nearest a human score (a tie: the lower level); ``None`` when the score lies more
    than half a point outside the scale (a score on another scale, which no level stands for)."""
    if not min(levels) - 0.5 <= value <= max(levels) + 0.5:
        return None
    gaps = [abs(value - v) for v in levels]
    best = min(gaps)
    return min((j for j, g in enumerate(gaps) if g == best), key=lambda j: levels[j])


@dataclass(frozen=True)
class LevelUnits:
    """Units over a scale's levels: each record (``part`` ``None``) or each entry of its list ``part`` holds its
    ``distribution`` over the levels (and, for a labelled scale, ``labels``: each level's value) and the
    human's score under ``human``. ``field`` names the human scores in messages (an item's field),
    ``noun`` one entry of ``part``; ``task_scale``: the levels' values are the judging task's scale's."""

    part: str | None = None
    human: str = "human_score"
    field: str = "human_score"
    noun: str = "entry"
    task_scale: bool = True
    levels: bool = True

    def parts(self, records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """What holds each unit's distribution: the records, or every entry of their ``part``."""
        if self.part is None:
            return list(records)
        return [c for rec in records for c in rec.get(self.part) or ()]

    def classes(self, records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        for part in self.parts(records):
            if part.get("distribution"):
                return tuple(part["distribution"])
        raise ConfigError("no score or criterion carries its distribution over the scale's levels (each is unscored, "
                          "or was judged without `--distribution` / keep_distribution=True): calibration reads that "
                          "distribution")

    def level_values(self, records: Sequence[Mapping[str, Any]], classes: Sequence[str]) -> list[float] | None:
        """The value of each level as the records give it (a labelled scale: its ``labels``), or ``None`` where
        the labels are the values (decimal numbers)."""
        for part in self.parts(records):
            if part.get("distribution"):  # the first distribution, whose levels the classes are
                labels = part.get("labels")
                return [float(labels[c]) for c in classes] if isinstance(labels, dict) else None
        return None

    def units(self, records: Sequence[Mapping[str, Any]], classes: Sequence[str],
              levels: Sequence[float] | None = None) -> list[Unit]:
        values = level_values_of(classes, levels)
        if self.part is None:
            return [self._unit(i, rec, tuple(classes), values) for i, rec in enumerate(records)]
        return [self._unit(i, c, tuple(classes), values, rec, (self.part, j))
                for i, rec in enumerate(records) for j, c in enumerate(rec.get(self.part) or ())]

    def _unit(self, i: int, rec: Mapping[str, Any], classes: tuple[str, ...], levels: tuple[float, ...],
              record: Mapping[str, Any] | None = None, path: tuple[str | int, ...] = ()) -> Unit:
        """A record's unit, or (``record`` and ``path`` given) the unit of one entry ``rec`` of a record."""
        dist = rec.get("distribution")
        scored = rec.get("unscored") is None and any(v is not None for v in (rec.get("scores") or {}).values())
        head = record if record is not None else rec
        where = f"record {i + 1} (item {head.get('item_id')!r}, response {head.get('response_id')!r}" + \
            (f", {self.noun} {rec.get('name')!r})" if record is not None else ")")
        probs = None
        if scored:
            if not dist:
                raise ConfigError(f"{where}: a score record without its distribution over the levels; judge with "
                                  "`--distribution` (keep_distribution=True) to calibrate or apply a calibration")
            labels = rec.get("labels")
            if set(dist) != set(classes) or (isinstance(labels, dict)
                                             and [float(labels[c]) for c in classes] != list(levels)):
                raise ConfigError(f"{where}: its levels {list(dist)} are not the calibration's {list(classes)} "
                                  "(another scale)")
            probs = tuple(float(dist[c]) for c in classes)
        h = rec.get(self.human)
        human = nearest_level(float(h), levels) if isinstance(h, (int, float)) and not isinstance(h, bool) else None
        return Unit(i, path, probs, human)


def score_verdicts(probs: npt.ArrayLike, levels: Sequence[float],
                   tolerance: float) -> tuple[npt.NDArray[np.int64], np.ndarray]:
    """Each row's pointwise verdict and its confidence: the level whose window ``|level - verdict| <= tolerance``
    holds the most probability, and that mass (the probability that a human within the tolerance agrees).

    With tolerance 0 the verdict is the most probable level and the confidence its probability, as in the other
    modes; a tie goes to the lower level.
    """
    q = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    v = np.asarray(levels, dtype=np.float64)
    window = (np.abs(v[:, None] - v[None, :]) <= tolerance + _SLACK).astype(np.float64)
    mass = q @ window  # mass[i, k]: probability within the tolerance of level k
    verdict = mass.argmax(axis=1)
    return verdict.astype(np.int64), mass[np.arange(q.shape[0]), verdict]


def score_agrees(verdict: npt.ArrayLike, human: npt.ArrayLike, levels: Sequence[float],
                 tolerance: float) -> npt.NDArray[np.bool_]:
    """Whether each verdict level is within ``tolerance`` of the human's level (indices into ``levels``)."""
    v = np.asarray(levels, dtype=np.float64)
    gap = np.abs(v[np.asarray(verdict, dtype=np.int64)] - v[np.asarray(human, dtype=np.int64)])
    return np.asarray(gap <= tolerance + _SLACK)


def _check_tolerance(tolerance: Any, source: str = "calibration") -> float:
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not math.isfinite(tolerance) \
            or tolerance < 0:
        raise ConfigError(f"{source}: the tolerance must be a finite number >= 0 (score points), got {tolerance!r}")
    return float(tolerance)
