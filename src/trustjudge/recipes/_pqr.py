"""PQR's factual reliability (recipe ``pqr``): citation coverage, the share of a report's claims that cite a
source, beside the claims mode's factual accuracy (precision) and citation correctness (``citation_accuracy``).

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
