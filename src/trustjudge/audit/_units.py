"""Calibration units: one probabilistic verdict a record holds, and the contract by which a mode says where its
units are (:class:`UnitReader`; :class:`LabelUnits` for a verdict over fixed labels). The built-in modes' units
are read in :mod:`trustjudge.audit._trust`; a registered mode's through the reader its ``Mode`` declares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConfigError


@dataclass(frozen=True)
class Unit:
    """One verdict of a record: where it sits, its raw class probabilities and the human's class."""

    record: int
    """Index of the record in the list it was read from."""
    path: tuple[str | int, ...]
    """Where the verdict lives inside the record: ``()`` for a pair, ``("checks", i)``, ``("claims", i)``."""
    probs: tuple[float, ...] | None
    human: int | None


class UnitReader(Protocol):
    """A mode's calibration contract (``Mode(calibration=...)``): the classes its verdicts are calibrated over
    and the units its records hold. :class:`LabelUnits` is the ready-made one for a verdict over fixed labels."""

    @property
    def part(self) -> str | None:
        """The record field holding a list of verdicts (each a unit), ``None`` where the record is one unit."""
        ...

    def classes(self, records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """The classes the units are calibrated over."""
        ...

    def units(self, records: Sequence[Mapping[str, Any]], classes: Sequence[str]) -> list[Unit]:
        """Every verdict of ``records`` with its raw probabilities and the human's class."""
        ...


@dataclass(frozen=True)
class LabelUnits:
    """Units of a verdict over fixed ``labels``: each record (or each entry of its list field ``part``) holds
    its probabilities by label under ``probabilities`` and the human's label under ``human`` (matched without
    case); an entry without probabilities, or marked ``unscored``, is a unit with none."""

    labels: tuple[str, ...]
    part: str | None = None
    probabilities: str = "probabilities"
    human: str = "human"

    def __post_init__(self) -> None:
        if len(self.labels) < 2 or len(set(self.labels)) != len(self.labels):
            raise ConfigError(f"a calibration needs two or more distinct labels, got {list(self.labels)}")

    def classes(self, records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        return self.labels

    def units(self, records: Sequence[Mapping[str, Any]], classes: Sequence[str]) -> list[Unit]:
        folded = [c.casefold() for c in classes]
        out = []
        for i, rec in enumerate(records):
            parts = [((), rec)] if self.part is None else [
                ((self.part, j), p) for j, p in enumerate(rec.get(self.part) or ())]
            for path, part in parts:
                p = part.get(self.probabilities)
                probs = (tuple(float(p.get(c, 0.0)) for c in classes)
                         if isinstance(p, Mapping) and p and not part.get("unscored") else None)
                h = part.get(self.human)
                human = folded.index(h.casefold()) if isinstance(h, str) and h.casefold() in folded else None
                out.append(Unit(i, path, probs, human))
        return out


_READERS: dict[str, UnitReader] = {}
"""The calibration contracts of registered modes, by mode name (``register_units``)."""


def register_units(mode: str, reader: UnitReader) -> None:
    """Let ``mode`` be calibrated through ``reader`` (the mode registry calls it for a mode's ``calibration``;
    the built-in modes' units are read by :mod:`trustjudge.audit._trust` itself)."""
    _READERS[mode] = reader


def unregister_units(mode: str) -> None:
    _READERS.pop(mode, None)
