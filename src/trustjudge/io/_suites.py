"""Judging suites: the criteria, checklist, label set, scale and rules that apply to items carrying none (a suite
file, ``--suite``); read by :func:`trustjudge.io._files.load_suite`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ._items import Check, Criterion, _Fields, parse_checklist, parse_criteria, shown
from ._rules import Rule, parse_rules


@dataclass(frozen=True)
class Suite:
    """A judging suite: the criteria, checklist and label set that apply to items carrying none."""

    criteria: tuple[Criterion, ...] = ()
    checklist: tuple[Check, ...] = ()
    labels: str | None = None
    """The checklist's label set as ``"FULL=1,PARTIAL=0.5,NO=0"`` (default YES/NO)."""
    scale: int | str | None = None
    """The scale of criteria without level descriptions, as the command line's ``--scale`` takes it: a top value
    (``10``: 1..10) as an int, or an integer range as its text (``"0-5"``)."""
    rules: tuple[Rule, ...] = ()
    """Shortcuts checked before the judge, in order (:mod:`trustjudge.io._rules`)."""


SUITE_FIELDS = {"criteria", "checklist", "labels", "scale", "rules"}

SCALE_SPAN = re.compile(r"\s*(-?\d+)\s*(?:-|\.\.|to)\s*(-?\d+)\s*")
"""An integer range as a scale's text gives it: ``0-5``, ``0..5``, ``0 to 5``."""


def _suite_scale(f: _Fields) -> int | str | None:
    """A suite's ``scale``: what ``--scale`` takes (a top value of 2 or more, or a range ``LO-HI`` with HI > LO)."""
    value = f.record.get("scale")
    if value is None or value == "":
        return None
    wanted = "must be a top value (10: 1..10) or an integer range ('0-5')"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise f.error("scale", f"{wanted}, got {type(value).__name__} {shown(value)}")
    if isinstance(value, str):
        text = value.strip()
        span = SCALE_SPAN.fullmatch(text)
        if span is not None:
            lo, hi = int(span.group(1)), int(span.group(2))
            if hi <= lo:
                raise f.error("scale", f"needs two or more levels, got {shown(value)}")
            return text
        if not re.fullmatch(r"-?\d+", text):
            raise f.error("scale", f"{wanted}, got {shown(value)}")
        value = int(text)
    if isinstance(value, float):
        if not value.is_integer():
            raise f.error("scale", f"{wanted}, got {value!r}")
        value = int(value)
    if value < 2:
        raise f.error("scale", f"needs two or more levels (a top value of 2 or more: 1..N), got {value}")
    return value


def parse_suite(record: Any, name: str) -> Suite:
    """Validate a decoded suite record (the file's criteria, checklist, labels, scale and rules); problems
    name the file ``name`` and the field."""
    f = _Fields(record, name, 1)
    unknown = set(record) - SUITE_FIELDS
    if unknown:
        raise f.error(sorted(unknown)[0], f"is not a suite field (known: {', '.join(sorted(SUITE_FIELDS))})")
    suite = Suite(parse_criteria(record.get("criteria"), name, 1), parse_checklist(record.get("checklist"), name, 1),
                  f.text("labels", required=False), _suite_scale(f), parse_rules(record.get("rules"), name, 1))
    if not suite.criteria and not suite.checklist and not suite.rules:
        raise InputError("holds neither criteria nor a checklist (nor rules)", file=name)
    return suite
