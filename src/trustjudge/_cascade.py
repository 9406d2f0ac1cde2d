"""Cascades of judges, each tier judging only what the tiers before it abstained on (*Trust or Escalate*).

A cascade is a list of model tiers, each a judge with its own calibration file, optionally ended by
``human``. Tier 1 judges every pair; a verdict it keeps (its calibrated confidence reaches its threshold)
is final, and only the rest go to tier 2, and so on. What no model tier keeps is left for a person (the
``human`` tier: written in the items format for labelling) or, without one, reported as abstained.

**Thresholds.** They are chosen together, on one calibration set: the units of the tiers' calibration
files, lined up by :func:`~trustjudge.audit._trust.unit_key` (so every tier should be calibrated on the same
labelled items). Tier t's threshold is chosen by fixed-sequence testing on the calibration units that
tiers 1..t-1 abstained on, at level ``delta / T`` for T model tiers
(:func:`~trustjudge.audit._calibration.choose_cascade`); a tier that cannot support the target on what reaches
it keeps nothing and passes everything on.

**What is guaranteed.** If the calibration units and the judged pairs come from the same distribution:
with probability at least 1 - delta over the calibration set, agreement with humans is at least the
target on the verdicts each model tier keeps (each tier among the pairs that reach it), hence on all
verdicts the models keep together (a mix of sets each with agreement >= target). A person decides the
rest. The tests of later tiers treat the earlier tiers' thresholds as fixed although they were chosen
on the same calibration set (as *Trust or Escalate* does); tests/test_cascade.py checks the guarantee
in simulation over 1,000 calibration sets (violation rate <= delta + 3 standard errors).

**Calls.** Each tier runs through its judge and the store, on its share only: a rerun reads every verdict
from the store (zero model calls), and the summary gives each tier's calls against the calls it would
need alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from .audit import _calibration as C
from .engine._engine import EngineStats, ProgressFn
from .io._items import Item
from .modes._records import RecordBase
from .modes._base import Task
from .audit._trust import Calibration, abstained_items, annotate
from .errors import ConfigError

HUMAN = "human"
"""The name of the last tier when people decide what every model tier abstained on."""
CASCADE_MODES = ("compare",)

PairKey = tuple[str, str, str]


class TierJudge(Protocol):
    """What a cascade needs of a judge (:class:`~trustjudge.Judge` has it)."""

    name: str

    @property
    def stats(self) -> EngineStats: ...

    def calibration_task(self, mode: str) -> Task: ...

    def check_calibration(self, calibration: Calibration, *, override: bool = False) -> Calibration: ...

    def run(self, task: Task, items: Iterable[Item], *,
            progress: ProgressFn | bool | None = None) -> Iterator[RecordBase]: ...


@dataclass(frozen=True)
class Tier:
    """One tier: a judge and its calibration, or the human tier (both ``None``)."""

    judge: TierJudge | None
    calibration: Calibration | None

    @property
    def name(self) -> str:
        return HUMAN if self.judge is None else self.judge.name


def thresholds(calibrations: Sequence[Calibration], target: float, delta: float) -> list[C.Selection]:
    """Each model tier's threshold, chosen on the calibration units the earlier tiers abstained on.

    The units of all files are lined up by key (a unit a file lacks has no verdict of that tier); their
    human labels must agree. A single tier needs no keys.
    """
    if not (math.isfinite(target) and 0 < target < 1):
        raise ConfigError(f"the target agreement must be between 0 and 1 (exclusive), got {target!r}")
    if len(calibrations) == 1:
        cal = calibrations[0]
        q = cal.calibrated(cal.probs)
        return C.choose_cascade([q.max(axis=1)], [q.argmax(axis=1) == np.asarray(cal.human)],
                                alpha=1 - target, delta=delta)
    missing = [i + 1 for i, cal in enumerate(calibrations) if cal.keys is None]
    if missing:
        raise ConfigError(f"the calibration file of tier {', '.join(map(str, missing))} does not say which verdict "
                          "each unit is (it was fitted before cascades): refit it with `trustjudge calibrate`")
    index: dict[tuple[Any, ...], int] = {}
    human: list[int] = []
    for t, cal in enumerate(calibrations):
        for key, h in zip(cal.keys or (), cal.human):
            k = tuple(key)
            if k not in index:
                index[k] = len(human)
                human.append(h)
            elif human[index[k]] != h:
                raise ConfigError(f"the calibration files disagree on the human label of {list(k)} (tier {t + 1} "
                                  "differs from an earlier tier): calibrate every tier on the same labelled items")
    confs, agrees = [], []
    for cal in calibrations:
        conf = np.full(len(human), np.nan)
        agree = np.zeros(len(human), dtype=bool)
        q = cal.calibrated(cal.probs)
        rows = [index[tuple(k)] for k in cal.keys or ()]
        conf[rows] = q.max(axis=1)
        agree[rows] = q.argmax(axis=1) == np.asarray(cal.human)
        confs.append(conf)
        agrees.append(agree)
    return C.choose_cascade(confs, agrees, alpha=1 - target, delta=delta)


def _narrow(items: Sequence[Item], keep: set[PairKey]) -> list[Item]:
    """The items with only the pairs in ``keep`` (items left with none are dropped)."""
    out = []
    for item in items:
        pairs = tuple(p for p in item.all_pairs() if (item.id, p.first, p.second) in keep)
        if pairs:
            out.append(replace(item, pairs=pairs))
    return out


def _key(rec: dict[str, Any]) -> PairKey:
    return (str(rec["item_id"]), str(rec["first_id"]), str(rec["second_id"]))


def run(items: Iterable[Item], tiers: Sequence[Tier], *, target: float, delta: float = 0.1,
        override: bool = False,
        progress: ProgressFn | bool | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Judge ``items`` through the cascade; return the records (one per pair, in input order) and a summary.

    Each record is the deciding tier's (with its ``calibrated`` block), plus ``tier`` (1-based; the human
    tier's number, or ``None`` without one, when no model tier kept the verdict), ``tier_judge`` and
    ``cascade``: what every tier that saw the pair said.
    """
    model, human = _check_tiers(tiers)
    cals = []
    for step in model:
        assert step.judge is not None and step.calibration is not None  # _check_tiers made sure
        cals.append(step.judge.check_calibration(step.calibration, override=override))
    mode = cals[0].mode
    selections = thresholds(cals, target, delta)
    if not any(s.supported for s in selections):
        sizes = ", ".join(f"tier {i + 1}: {c.n} verdicts" for i, c in enumerate(cals))
        raise ConfigError(f"no tier of the cascade can support agreement >= {target:g} at delta {delta:g} on its "
                          f"calibration set ({sizes}): label more items, or lower the target")
    items = list(items)
    order = [(item.id, p.first, p.second) for item in items for p in item.all_pairs()]
    total = len(order)
    final: dict[PairKey, dict[str, Any]] = {}
    last: dict[PairKey, dict[str, Any]] = {}
    trail: dict[PairKey, list[dict[str, Any]]] = {k: [] for k in order}
    rows: list[dict[str, Any]] = []
    todo = items
    for t, (tier, cal, sel) in enumerate(zip(model, cals, selections), start=1):
        judge = tier.judge
        assert judge is not None
        task = judge.calibration_task(mode)
        calls, stored = judge.stats.model_calls, judge.stats.from_store
        asked = sum(len(it.all_pairs()) for it in todo)
        records = [r.to_dict() for r in judge.run(task, todo, progress=progress)]
        decided = labelled = agreed = 0
        for rec in annotate(mode, records, cal, sel):
            key = _key(rec)
            block = rec["calibrated"]
            trail[key].append({"tier": t, "judge": judge.name, "verdict": block["verdict"],
                               "confidence": block["confidence"], "abstained": block["abstained"]})
            last[key] = rec
            if block["abstained"] is None:
                final[key] = rec
                rec.update(tier=t, tier_judge=judge.name)
                decided += 1
                if rec.get("human") is not None:
                    labelled += 1
                    agreed += rec["human"] == block["verdict"]
        rows.append({"tier": t, "judge": judge.name, "asked": asked, "alone": total, "decided": decided,
                     "share": decided / total if total else None,
                     "agreement": agreed / labelled if labelled else None, "labelled": labelled,
                     "judgments": sum(task.size(it) for it in todo),
                     "judgments_alone": sum(task.size(it) for it in items),
                     "model_calls": judge.stats.model_calls - calls, "from_store": judge.stats.from_store - stored,
                     "calibration": {"n": cal.n, "method": cal.map.method, "data_hash": cal.data_hash},
                     "guarantee": sel.to_dict(), "keeps_nothing": not sel.supported})
        todo = _narrow(todo, {k for k in order if k not in final})
    rest = [k for k in order if k not in final]
    for key in rest:
        rec = last[key]
        rec.update(tier=len(model) + 1 if human else None, tier_judge=HUMAN if human else None)
    if human:
        rows.append({"tier": len(model) + 1, "judge": HUMAN, "asked": len(rest), "alone": total,
                     "decided": len(rest), "share": len(rest) / total if total else None})
    out = []
    for key in order:
        rec = final.get(key) or last[key]
        rec["cascade"] = trail[key]
        out.append(rec)
    return out, _summary(mode, out, rows, [t.name for t in tiers], target, delta)


def _check_tiers(tiers: Sequence[Tier]) -> tuple[list[Tier], bool]:
    if not tiers:
        raise ConfigError("a cascade needs at least one judge")
    human = tiers[-1].judge is None
    model = list(tiers[:-1] if human else tiers)
    if not model:
        raise ConfigError("a cascade needs a model tier before `human`")
    for i, t in enumerate(model, start=1):
        if t.judge is None:
            raise ConfigError(f"`human` can only be the last tier of a cascade (it is tier {i})")
        if t.calibration is None:
            raise ConfigError(f"tier {i} ({t.judge.name}) has no calibration file: every model tier needs one "
                              "(`trustjudge calibrate` with that judge, on the same labelled items)")
    modes = {t.calibration.mode for t in model if t.calibration is not None}
    if len(modes) > 1:
        raise ConfigError(f"the tiers' calibration files are for different modes ({', '.join(sorted(modes))}): "
                          "a cascade judges one mode")
    mode = modes.pop()
    if mode not in CASCADE_MODES:
        raise ConfigError(f"cascades judge pairwise verdicts (the compare mode) so far, not {mode}")
    return model, human


def _summary(mode: str, records: list[dict[str, Any]], rows: list[dict[str, Any]], names: list[str], target: float,
             delta: float) -> dict[str, Any]:
    total = len(records)
    machine = [r for r in records if r.get("tier_judge") not in (None, HUMAN)]
    labelled = [r for r in machine if r.get("human") is not None]
    agreed = sum(r["human"] == r["calibrated"]["verdict"] for r in labelled)
    models = sum(1 for n in names if n != HUMAN)
    return {"mode": mode, "cascade": names, "verdicts": total, "target_agreement": target, "delta": delta,
            "machine_decided": len(machine), "machine_coverage": len(machine) / total if total else None,
            "agreement_on_machine_verdicts": agreed / len(labelled) if labelled else None,
            "labelled_machine_verdicts": len(labelled), "tiers": rows,
            "guarantee": (f"with probability >= {1 - delta:g} over the calibration set, agreement with humans is >= "
                          f"{target:g} on the verdicts each model tier keeps (each tier tested at delta "
                          f"{delta / models:g}; union bound over {models} model tier(s)); the rest are "
                          + ("left to people" if names[-1] == HUMAN else "abstained"))}


def human_items(records: Sequence[dict[str, Any]], items_by_id: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The items behind the pairs no model tier kept, in the items format with ``human`` empty (for labelling)."""
    rest = [{**r, "calibrated": {"abstained": "cascade"}} for r in records if r.get("tier_judge") in (None, HUMAN)]
    return abstained_items("compare", rest, items_by_id)

