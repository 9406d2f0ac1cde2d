"""What targets a calibration file can support, asked at ``calibrate`` time with ``select``'s own test.

``trustjudge select --target-agreement T`` refuses a calibration set too small or too poor for T
(:meth:`~trustjudge.audit._trust.Calibration.selection`). :func:`selection_support` runs that same selection
for a rising series of targets, so ``calibrate`` can say at once which targets the file will support, or warn
that it supports none, instead of leaving the surprise to ``select``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

DEFAULT_RISK_DELTA = 0.1
"""``select``'s default risk level (the allowed probability that the guarantee fails)."""
TARGETS = tuple(round(0.05 * k, 2) for k in range(1, 20))
"""The targets tried, lowest first: 0.05, 0.10, ..., 0.95 (``select`` accepts any target in (0, 1)), less
those a guess meets: at or under chance agreement, one over the number of classes (a third for pairwise
verdicts, a half for checks)."""


@dataclass(frozen=True)
class Support:
    """The highest target of :data:`TARGETS` a calibration supports at ``delta`` (``None``: none of them), and
    ``select``'s refusal of the lowest one where it supports none."""

    delta: float
    highest: float | None
    lowest: float
    """The lowest target tried (the first above chance)."""
    refusal: str = ""

    def message(self, n: int, mode: str) -> str:
        if self.highest is None:
            return (f"warning: these {n} labelled {mode} verdicts cannot support any target agreement above chance "
                    f"at --risk-delta {self.delta:g}: `select --target-agreement` will refuse every target from "
                    f"{self.lowest:g} up ({self.refusal}). Label more items before selecting")
        return (f"this calibration supports `select --target-agreement` up to {self.highest:g} at --risk-delta "
                f"{self.delta:g} (tried {self.lowest:g} to {TARGETS[-1]:g} in steps of 0.05)")


def selection_support(calibration: Any, delta: float = DEFAULT_RISK_DELTA) -> Support:
    """Run ``calibration.selection`` (``select``'s test) for each of :data:`TARGETS`, lowest first, until one is
    refused: a lower target asks less of the set."""
    targets = above_chance(len(calibration.map.classes))
    highest: float | None = None
    for target in targets:
        try:
            calibration.selection(target, delta)
        except ConfigError as exc:
            return Support(delta, highest, targets[0], "" if highest is not None else str(exc))
        highest = target
    return Support(delta, highest, targets[0])


def above_chance(classes: int) -> tuple[float, ...]:
    """:data:`TARGETS` above the agreement of a uniform guess among ``classes`` classes."""
    return tuple(t for t in TARGETS if t > 1 / max(classes, 1) + 1e-9) or TARGETS[-1:]
