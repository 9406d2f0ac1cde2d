"""PQR (recipe ``pqr``): two-level criteria weights for P and Q (``two_level``: dimensions weighted, each over
its own weighted sub-criteria) and, for factual reliability, citation coverage (``citation_coverage``: the share
of a report's claims that cite a source) beside the claims mode's factual accuracy (precision) and citation
correctness (``citation_accuracy``).

Registered on import (``trustjudge.recipes`` imports it). Coverage is read off the record, no judge involved: a
claim covers when it names one of the item's sources; a response with no scored claim has no coverage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._metrics import Metric, register_metric

Record = Mapping[str, Any]


def citation_coverage(r: Record, p: Mapping[str, Any]) -> float | None:
    """The share of the record's scored claims that cite a source, or ``None`` where it has none."""
    claims = [c for c in r.get("claims") or [] if isinstance(c, Mapping) and c.get("unscored") is None]
    if not claims:
        return None
    return sum(1 for c in claims if c.get("source")) / len(claims)


register_metric(Metric(
    "citation_coverage", ("claims",), citation_coverage, {},
    "Claims: the share of a response's scored claims that cite a source (PQR's citation coverage; read off the "
    "claims, no judge); responses with no scored claim are unscored."))


SEPARATOR = " / "
"""Between a dimension's name and a sub-criterion's in a generated criterion's name (``DIMENSION / SUB``)."""


def _dimension(name: str) -> str:
    return " ".join(name.split()).casefold()


def two_level(r: Record, p: Mapping[str, Any]) -> float | None:
    """A criteria record's two-level weighted score: per dimension the weighted mean of its sub-criteria's
    scores (weights renormalised within the dimension), then the mean of the dimensions weighted by their own
    weights (renormalised over the dimensions), ``(score + offset) x factor``.

    A generated line ``DIMENSION | W`` is a dimension with its weight; ``DIMENSION / SUB | w`` a sub-criterion
    of it. A dimension without sub-criteria is scored on its own line; a sub-criterion whose dimension has no
    line of its own, or any unscored criterion, leaves the record unscored (``None``)."""
    crits = [c for c in r.get("criteria") or [] if isinstance(c, Mapping)]
    if not crits or r.get("unscored") is not None:
        return None
    dims: dict[str, tuple[float, float | None]] = {}
    subs: dict[str, list[tuple[float, float | None]]] = {}
    for c in crits:
        name, weight = str(c.get("name", "")), float(c.get("weight") or 0.0)
        score = (c.get("scores") or {}).get(p["method"])
        value = float(score) if isinstance(score, (int, float)) and c.get("unscored") is None else None
        if SEPARATOR in name:
            subs.setdefault(_dimension(name.split(SEPARATOR, 1)[0]), []).append((weight, value))
        else:
            dims[_dimension(name)] = (weight, value)
    if any(d not in dims for d in subs):
        return None
    total = mass = 0.0
    for d, (weight, own) in dims.items():
        parts = subs.get(d) or [(1.0, own)]
        within = sum(w for w, _ in parts)
        if any(v is None for _, v in parts) or within <= 0:
            return None
        total += weight * sum(w * (v or 0.0) for w, v in parts) / within
        mass += weight
    if mass <= 0:
        return None
    return (total / mass + float(p["offset"])) * float(p["factor"])


register_metric(Metric(
    "two_level", ("criteria",), two_level, {"method": "expected", "offset": 0.0, "factor": 1.0},
    "Criteria with two levels of weights (PQR's P and Q): generated dimensions `NAME | W` and their "
    "sub-criteria `NAME / SUB | w`; per dimension the weighted mean of its sub-criteria, then the dimensions' "
    "weighted mean, (score + offset) x factor.",
    readings={"hard": {"method": "discrete"}, "soft": {"method": "expected"}}))
