"""How each calibrated mode's verdicts are labelled in a verification sample (``trustjudge sample`` /
``check-sample``, :mod:`trustjudge.audit._sample`).

A sampled verdict is a calibration unit (:mod:`trustjudge.audit._units`): a pair, a check, a claim, a scored
response or one criterion of it. The sample is written in the items format with that verdict's label left
empty, and read back the same way. A mode's :class:`Labelling` says where: :meth:`Labelling.blank` empties the
labels of the sampled parts in a response written for labelling, and :meth:`Labelling.label` reads a
response's label for one part back, as a class name of the calibration (``pass``/``fail``, a claim's label)
or, on a scale, the human's score. A part is located by what its record says of it (``part``): a check's
``id``, a criterion's ``name``, a claim's ``text``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..io._items import Response

Part = Mapping[str, Any]
"""What a sampled verdict's record says of its part: ``{"id": ...}``, ``{"name": ...}``, ``{"text": ...}``."""


@dataclass(frozen=True)
class Labelling:
    """Where a mode's human labels live in the items format."""

    blank: Callable[[dict[str, Any], Sequence[Part]], None]
    """Empty the labels of ``parts`` in a response dict written for labelling (its other labels dropped)."""
    label: Callable[[Response, Part], Any]
    """A labelled response's label for one part: a class name, a number on a scale, or None (not labelled)."""
    pairs: bool = False
    """The verdicts are pairs (labelled in the item's ``pairs``, not in its responses)."""


def _check_label(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "pass" if value else "fail"
    if isinstance(value, (int, float)):
        return "pass" if float(value) >= 0.5 else "fail"
    word = str(value).strip().upper()
    return {"YES": "pass", "NO": "fail", "PASS": "pass", "FAIL": "fail", "TRUE": "pass",
            "FALSE": "fail"}.get(word, str(value))


def _blank_checks(response: dict[str, Any], parts: Sequence[Part]) -> None:
    response["human_checks"] = {str(p["id"]): None for p in parts}


def _blank_criteria(response: dict[str, Any], parts: Sequence[Part]) -> None:
    response["human_criteria"] = {str(p["name"]): None for p in parts}


def _blank_score(response: dict[str, Any], parts: Sequence[Part]) -> None:
    response["human_score"] = None


def _blank_claims(response: dict[str, Any], parts: Sequence[Part]) -> None:
    response["claims"] = [{"text": str(p["text"]), "human": None} for p in parts]


def _claim_label(r: Response, part: Part) -> str | None:
    for claim in r.claims or ():
        if claim.text == part.get("text"):
            return claim.human.upper() if claim.human is not None else None
    return None


LABELLING: dict[str, Labelling] = {
    "compare": Labelling(lambda response, parts: None, lambda r, part: None, pairs=True),
    "checklist": Labelling(_blank_checks, lambda r, part: _check_label((r.human_checks or {}).get(str(part["id"])))),
    "claims": Labelling(_blank_claims, _claim_label),
    "score": Labelling(_blank_score, lambda r, part: r.human_score),
    "criteria": Labelling(_blank_criteria, lambda r, part: (r.human_criteria or {}).get(str(part["name"]))),
}
"""The built-in calibrated modes' labelling, by mode name."""


def labelling(mode: str) -> Labelling:
    """The labelling of ``mode``'s verification samples (a ConfigError for a mode without one)."""
    found = LABELLING.get(mode)
    if found is None:
        raise ConfigError(f"a verification sample covers the modes {', '.join(LABELLING)}; the {mode} mode has no "
                          "labelling for one yet")
    return found
