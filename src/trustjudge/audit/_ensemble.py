"""The prompt-ensemble confidence estimator: a pair's verdict under several judging templates, combined.

``calibrate --confidence ensemble`` judges each pair under the judge's own pairwise template and under every
template of :data:`TEMPLATES` (the library's ``pairwise_steps.txt``: G-Eval-style explicit evaluation steps), and
combines the judgments by mean log-probability: each of the pair's (first, second, tie) probabilities, and each
presentation order's A/B/C, is the geometric mean over the templates, renormalised to the mean label mass. The
combined record then goes through the calibration exactly as a one-template record does (map, split-fit
selection, threshold), so the guarantee's argument is unchanged; its confidence is the calibrated top
probability of the combined verdict. Where the store holds every template's judgments this costs zero calls;
otherwise one more judgment per order and template. Every record keeps each template's own probabilities under
``ensemble``, and the calibration file names the templates with their hashes (a run under other templates is
refused: refit).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError

ENSEMBLE = "ensemble"
TEMPLATES = ("pairwise_steps",)
"""The templates beside the judge's own (files of ``trustjudge/templates``)."""
PAIR = ("first", "second", "tie")
ORDER = ("A", "B", "C")


def template_text(name: str) -> str:
    """The text of the ensemble template ``name`` (a file the package ships)."""
    return (Path(__file__).resolve().parents[1] / "templates" / f"{name}.txt").read_text(encoding="utf-8")


def template_ids() -> list[dict[str, str]]:
    """Each ensemble template's name and hash (the 16 hex digits a calibration's ``template`` is), as a
    calibration file records them."""
    return [{"name": n, "hash": hashlib.sha256(template_text(n).encode()).hexdigest()[:16]} for n in TEMPLATES]


def check_templates(raw: Any, source: str) -> None:
    """A file's ``ensemble_templates``, which must be this library's (another set is another estimator)."""
    if raw != template_ids():
        raise ConfigError(f"{source}: field 'ensemble_templates' is {raw!r}, not this library's ensemble "
                          f"{template_ids()!r}: refit the calibration (`trustjudge calibrate --confidence ensemble`)")


def _key(r: Mapping[str, Any]) -> tuple[Any, ...]:
    return r.get("item_id"), r.get("first_id"), r.get("second_id")


def geometric(rows: Sequence[Mapping[str, Any] | None], labels: Sequence[str]) -> dict[str, float] | None:
    """The mean log-probability combination of ``rows`` (each a label -> probability mapping), renormalised to
    their mean total; ``None`` where a row is missing or puts no mass on a label."""
    if not rows or any(r is None or any(not r.get(k) for k in labels) for r in rows):
        return None
    logs = {k: sum(math.log(float(r[k])) for r in rows if r is not None) / len(rows) for k in labels}
    total = sum(math.exp(v) for v in logs.values())
    mass = sum(sum(float(r[k]) for k in labels) for r in rows if r is not None) / len(rows)
    return {k: mass * math.exp(v) / total for k, v in logs.items()}


def combine(own: Sequence[Mapping[str, Any]], others: Sequence[Sequence[Mapping[str, Any]]],
            names: Sequence[str] = TEMPLATES) -> list[dict[str, Any]]:
    """``own`` records with their probabilities and orders combined with the same pairs' records in ``others``
    (one list per template, named by ``names``); a pair some template left unscored is unscored."""
    if len(names) != len(others):
        raise ValueError(f"{len(others)} lists of records for {len(names)} template names")
    by_key = [{_key(r): r for r in recs} for recs in others]
    out = []
    for r in own:
        rows = [r, *(m.get(_key(r)) for m in by_key)]
        rec = dict(r)
        rec["ensemble"] = {"templates": ["own", *names],
                           "probabilities": [None if x is None else x.get("probabilities") for x in rows]}
        probs = geometric([None if x is None else x.get("probabilities") for x in rows], PAIR)
        orders = [geometric([(x.get("orders") or [None, None])[i] if x is not None else None for x in rows], ORDER)
                  for i in range(len(r.get("orders") or []))]
        if probs is None or any(o is None for o in orders):
            rec.update(probabilities=None, unscored=r.get("unscored") or "ensemble: a template left it unscored")
        else:
            rec["probabilities"] = probs
            rec["orders"] = [{**o, **c, "mass": sum(c.values())} for o, c in zip(r["orders"], orders, strict=True)
                             if c is not None]
            rec["verdicts"] = {**(r.get("verdicts") or {}), "likelihood": max(PAIR, key=probs.__getitem__)}
        out.append(rec)
    return out
