"""Cascades of judges, each tier judging only what the tiers before it abstained on (*Trust or Escalate*).

A cascade is a list of model tiers, each a judge with its own calibration file, optionally ended by
``human``. A verdict is one unit of the calibrated modes: a pair's verdict (``compare``), one check of a
response (``checklist``: pass or fail) or one claim's verification (``claims``: its stance). Tier 1
judges every verdict; a verdict it keeps (its calibrated confidence reaches its threshold) is final, and
only the rest go to tier 2, and so on: a pair alone, or a response asked only the checks (verified only on
the claims) still open. Later tiers of a claims cascade verify the claims tier 1 had, given or extracted
by tier 1, so that every tier judges the same claims. What no model tier keeps is left for a person (the
``human`` tier: written in the items format for labelling) or, without one, reported as abstained.

**Thresholds.** They are chosen together, on one calibration set: the units of the tiers' calibration
files, lined up by :func:`~trustjudge.audit._trust.unit_key` (so every tier should be calibrated on the same
labelled items). Tier t's threshold is chosen by fixed-sequence testing on the calibration units that
tiers 1..t-1 abstained on, at level ``delta / T`` for T model tiers
(:func:`~trustjudge.audit._calibration.choose_cascade`); a tier that cannot support the target on what reaches
it keeps nothing and passes everything on. The lined-up units are first split in two by key
(:func:`~trustjudge.audit._trust.selection_split`): each tier's selection map is fitted on part A with its file's
method and every threshold is tested on part B under those maps, so that no threshold is tested on the units its
map was fitted to; the verdicts a tier keeps come from its selection map.

**What is guaranteed.** If the calibration units and the judged verdicts come from the same distribution:
with probability at least 1 - delta over the calibration set, agreement with humans is at least the
target on the verdicts each model tier keeps (each tier among the verdicts that reach it), hence on all
verdicts the models keep together (a mix of sets each with agreement >= target). A person decides the
rest. The tests of later tiers treat the earlier tiers' thresholds as fixed although they were chosen
on the same calibration set (as *Trust or Escalate* does); tests/test_cascade.py checks the guarantee
in simulation over 1,000 calibration sets (violation rate <= delta + 3 standard errors). The test counts
each unit as one draw: the checks (or claims) of one response are not independent of each other, so a
calibration set of many responses with few checks each is worth more than the reverse.

**Calls.** Each tier runs through its judge and the store, on its share only: a rerun reads every verdict
from the store (zero model calls), and the summary gives each tier's calls against the calls it would
need alone.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from .audit import _calibration as C
from .audit._estimators import COMBINED
from .audit._levels import check_levels, complement, quote
from .audit._trust import Calibration, Unit, annotate, selection_split, units
from .engine._engine import EngineStats, ProgressFn
from .errors import ConfigError
from .io._items import Item
from .modes._base import Task
from .modes._cascading import Cascading, UnitKey
from .modes._records import RecordBase
from .modes._registry import Mode, builtin_modes, get_mode, registered_modes

HUMAN = "human"
"""The name of the last tier when people decide what every model tier abstained on."""


class _CascadeModes(Collection[str]):
    """The modes that cascade (whose ``Mode`` declares ``cascade`` and a calibration): registered ones listed, an
    installed plug-in's found by name."""

    def __contains__(self, name: object) -> bool:
        try:
            return isinstance(name, str) and _cascading(get_mode(name)) is not None
        except ConfigError:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, mode in registered_modes().items() if _cascading(mode) is not None])

    def __len__(self) -> int:
        return len(list(iter(self)))


def _cascading(mode: Mode) -> Cascading | None:
    return mode.cascade if mode.calibration is not None or mode.name in builtin_modes() else None


CASCADE_MODES: Collection[str] = _CascadeModes()
"""The modes a cascade judges (``"claims" in CASCADE_MODES``): a mode cascades by its ``Mode.cascade``."""


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


def thresholds(calibrations: Sequence[Calibration], target: float, delta: float,
               force_delta: bool = False) -> list[C.Selection]:
    """Each model tier's threshold, chosen on the calibration units the earlier tiers abstained on.

    The units of all files are lined up by key (a unit a file lacks has no verdict of that tier); their
    human labels must agree. A single tier needs no keys. The lined-up units are split in two by key
    (:func:`~trustjudge.audit._trust.selection_split`): each tier's selection map is fitted on its units of
    part A with its file's method, and the thresholds are tested on part B under those maps; each returned
    selection carries its tier's map. A delta above 0.5 is refused unless ``force_delta``.
    """
    check_levels(target, delta, force_delta)
    ranked = [i + 1 for i, cal in enumerate(calibrations) if cal.model is not None or cal.confidence in COMBINED]
    if ranked:
        raise ConfigError(f"the calibration file of tier {', '.join(map(str, ranked))} ranks its verdicts by "
                          f"`--confidence {calibrations[ranked[0] - 1].confidence}`: cascades take "
                          "calibrated-confidence files for now (refit it "
                          "without --confidence: zero model calls)")
    index: dict[tuple[Any, ...], int] = {}
    human: list[int] = []
    if len(calibrations) == 1 and calibrations[0].keys is None:
        tier_keys: list[list[tuple[Any, ...]]] = [[(i,) for i in range(calibrations[0].n)]]
    else:
        missing = [i + 1 for i, cal in enumerate(calibrations) if cal.keys is None]
        if missing:
            raise ConfigError(f"the calibration file of tier {', '.join(map(str, missing))} does not say which verdict "
                              "each unit is (it was fitted before cascades): refit it with `trustjudge calibrate`")
        tier_keys = [[tuple(k) for k in cal.keys or ()] for cal in calibrations]
    for t, (cal, keys) in enumerate(zip(calibrations, tier_keys)):
        for k, h in zip(keys, cal.human):
            if k not in index:
                index[k] = len(human)
                human.append(h)
            elif human[index[k]] != h:
                raise ConfigError(f"the calibration files disagree on the human label of {list(k)} (tier {t + 1} "
                                  "differs from an earlier tier): calibrate every tier on the same labelled items")
    ordered = list(index)
    part_a = selection_split(None if calibrations[0].keys is None and len(calibrations) == 1
                             else [list(k) for k in ordered], len(ordered))
    test = ~part_a
    confs, agrees, maps, fitted = [], [], [], []
    for cal, keys in zip(calibrations, tier_keys):
        conf = np.full(len(human), np.nan)
        agree = np.zeros(len(human), dtype=bool)
        rows = np.asarray([index[k] for k in keys], dtype=np.int64)
        in_a = part_a[rows] if rows.size else np.zeros(0, dtype=bool)
        probs = np.asarray(cal.probs, dtype=np.float64)
        labels = np.asarray(cal.human, dtype=np.int64)
        cmap = cal.fit_map(probs[in_a], labels[in_a]) if int(in_a.sum()) >= 2 else None
        if cmap is not None and (~in_a).any():  # a tier with no map to test has no verdict in part B
            verdict, confidence = cal.verdicts(cmap.apply(probs[~in_a]))
            conf[rows[~in_a]] = confidence
            agree[rows[~in_a]] = cal.agrees(verdict, labels[~in_a])
        confs.append(conf[test])
        agrees.append(agree[test])
        maps.append(cmap)
        fitted.append(int(in_a.sum()))
    chosen = C.choose_cascade(confs, agrees, alpha=1 - target, delta=delta)
    return [replace(sel, map=cmap, fit_units=n_fit) for sel, cmap, n_fit in zip(chosen, maps, fitted)]


def _slots(mode: str, record: dict[str, Any], classes: Sequence[str]) -> Iterator[tuple[Unit, dict[str, Any]]]:
    """Each verdict of an annotated record and the dict that holds it (the record itself for a pair)."""
    for unit in units(mode, [record], classes):
        target: Any = record
        for step in unit.path:
            target = target[step]
        yield unit, target


def run(items: Iterable[Item], tiers: Sequence[Tier], *, target: float, delta: float = 0.1,
        override: bool = False, force_delta: bool = False,
        progress: ProgressFn | bool | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Judge ``items`` through the cascade; return the records (in input order) and a summary.

    A record that is one verdict (a pair, a plug-in's response): the deciding tier's (with its ``calibrated``
    block), plus ``tier`` (1-based; the human tier's number, or ``None`` without one, when no model tier kept
    the verdict), ``tier_judge`` and ``cascade``: what every tier that saw it said. A record of many verdicts
    (checks, claims): tier 1's, each verdict replaced by its deciding tier's, with ``tier``, ``tier_judge``
    and ``cascade`` on it (the record's own aggregates stay tier 1's). What later tiers judge is the mode's
    (``Cascading.given``: a claims cascade verifies the claims tier 1 had).
    """
    model, human = _check_tiers(tiers)
    cals, selections = _chosen(model, target, delta, override, force_delta)
    mode = cals[0].mode
    spec = cascade_of(mode)
    items = list(items)
    classes = cals[0].map.classes
    order: list[UnitKey] = []
    final: dict[UnitKey, tuple[int, str, dict[str, Any]]] = {}
    last: dict[UnitKey, dict[str, Any]] = {}
    humans: dict[UnitKey, int | None] = {}
    trail: dict[UnitKey, list[dict[str, Any]]] = {}
    base: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    todo, full, origin = items, items, None
    for t, (tier, cal, sel) in enumerate(zip(model, cals, selections), start=1):
        judge = tier.judge
        assert judge is not None
        task = judge.calibration_task(mode)
        calls, stored, looked = judge.stats.model_calls, judge.stats.from_store, judge.stats.recorded_lookups
        asked = len(order) - len(final) if t > 1 else None
        records = [r.to_dict() for r in judge.run(task, todo, progress=progress)]
        decided = labelled = agreed = 0
        annotated = annotate(mode, records, cal, sel)
        for rec in annotated:
            for unit, slot in _slots(mode, rec, classes):
                key = spec.key(rec, unit, origin)
                if t == 1:
                    order.append(key)
                    trail[key] = []
                    humans[key] = unit.human
                block = slot["calibrated"]
                trail[key].append({"tier": t, "judge": judge.name, "verdict": block["verdict"],
                                   "confidence": block["confidence"], "abstained": block["abstained"]})
                last[key] = slot
                if block["abstained"] is None:
                    final[key] = (t, judge.name, slot)
                    decided += 1
                    if unit.human is not None:
                        labelled += 1
                        agreed += classes[unit.human] == block["verdict"]
        if t == 1:
            base = annotated
            asked = len(order)
            full = spec.given(base, items)
        total = len(order)
        rows.append({"tier": t, "judge": judge.name, "asked": asked, "alone": total, "decided": decided,
                     "share": decided / total if total else None,
                     "agreement": agreed / labelled if labelled else None, "labelled": labelled,
                     "judgments": sum(task.size(it) for it in todo),
                     "judgments_alone": sum(task.size(it) for it in (items if t == 1 else full)),
                     "model_calls": judge.stats.model_calls - calls, "from_store": judge.stats.from_store - stored,
                     "recorded_lookups": judge.stats.recorded_lookups - looked,
                     "calibration": {"n": cal.n, "method": cal.map.method, "data_hash": cal.data_hash},
                     "guarantee": sel.to_dict(), "keeps_nothing": not sel.supported})
        keep = {k for k in order if k not in final}
        todo, origin = spec.narrow(full, keep)
    rest = [k for k in order if k not in final]
    if human:
        rows.append({"tier": len(model) + 1, "judge": HUMAN, "asked": len(rest), "alone": len(order),
                     "decided": len(rest), "share": len(rest) / len(order) if order else None})
    out = _assemble(mode, base, order, classes, final, last, trail, len(model) + 1 if human else None)
    summary = _summary(mode, out, rows, [t.name for t in tiers], target, delta, classes, humans, final)
    return out, summary


def _chosen(model: Sequence[Tier], target: float, delta: float, override: bool,
            force_delta: bool = False) -> tuple[list[Calibration], list[C.Selection]]:
    """The model tiers' calibrations, each checked against its judge, and their thresholds (refused when no
    tier can support the target)."""
    cals = []
    for step in model:
        assert step.judge is not None and step.calibration is not None  # _check_tiers made sure
        cals.append(step.judge.check_calibration(step.calibration, override=override))
    selections = thresholds(cals, target, delta, force_delta)
    if not any(s.supported for s in selections):
        sizes = ", ".join(f"tier {i + 1}: {c.n} verdicts, thresholds tested on {s.n} of them"
                          for i, (c, s) in enumerate(zip(cals, selections)))
        raise ConfigError(f"no tier of the cascade can support agreement >= {quote(target)} at delta {quote(delta)} "
                          f"on its calibration set ({sizes}): label more items, or lower the target")
    return cals, selections


def _assemble(mode: str, base: list[dict[str, Any]], order: list[UnitKey], classes: Sequence[str],
              final: dict[UnitKey, tuple[int, str, dict[str, Any]]], last: dict[UnitKey, dict[str, Any]],
              trail: dict[UnitKey, list[dict[str, Any]]], human_tier: int | None) -> list[dict[str, Any]]:
    """Tier 1's records with each verdict replaced by its deciding tier's (a record that is one verdict: the
    record), with ``tier``, ``tier_judge`` and the ``cascade`` trail; ``human_tier``: the human tier's number."""
    def decided_by(key: UnitKey) -> dict[str, Any]:
        got = final.get(key)
        tier_no: int | None
        name: str | None
        if got is not None:
            slot, tier_no, name = got[2], got[0], got[1]
        else:
            slot, tier_no, name = last[key], human_tier, (HUMAN if human_tier is not None else None)
        return {**slot, "tier": tier_no, "tier_judge": name, "cascade": trail[key]}

    out, place = [], iter(order)
    for rec in base:
        rec = json.loads(json.dumps(rec))
        for _unit, slot in list(_slots(mode, rec, classes)):
            new = decided_by(next(place))
            slot.clear()
            slot.update(new)
        out.append(rec)
    return out


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
    cascade_of(modes.pop())
    return model, human


def cascade_of(mode: str) -> Cascading:
    """The cascade contract of ``mode`` (its ``Mode.cascade``), else a :class:`ConfigError` naming the modes
    that have one."""
    found = _cascading(get_mode(mode))
    if found is None:
        raise ConfigError(f"cascades judge the modes {', '.join(CASCADE_MODES)}, not {mode}")
    return found


def _summary(mode: str, records: list[dict[str, Any]], rows: list[dict[str, Any]], names: list[str], target: float,
             delta: float, classes: Sequence[str], humans: dict[UnitKey, int | None],
             final: dict[UnitKey, tuple[int, str, dict[str, Any]]]) -> dict[str, Any]:
    total = len(humans)
    labelled = [(humans[k], slot) for k, (_t, _n, slot) in final.items() if humans[k] is not None]
    agreed = sum(classes[h] == slot["calibrated"]["verdict"] for h, slot in labelled if h is not None)
    models = sum(1 for n in names if n != HUMAN)
    return {"mode": mode, "unit": cascade_of(mode).unit, "cascade": names, "verdicts": total,
            "records": len(records), "target_agreement": target, "delta": delta,
            "machine_decided": len(final), "machine_coverage": len(final) / total if total else None,
            "agreement_on_machine_verdicts": agreed / len(labelled) if labelled else None,
            "labelled_machine_verdicts": len(labelled), "tiers": rows,
            "guarantee": (f"of the procedure, over calibration sets: with probability >= {complement(delta)}, every "
                          f"model tier keeps only verdicts agreeing with humans >= {quote(target)} (each tier tested "
                          f"at delta {quote(delta / models)}; union bound over {models} model tier(s)); the rest are "
                          + ("left to people" if names[-1] == HUMAN else "abstained"))}


def human_items(records: Sequence[dict[str, Any]], items_by_id: dict[str, dict[str, Any]],
                mode: str = "compare") -> list[dict[str, Any]]:
    """The items behind the verdicts no model tier kept, in the items format, ready for labels (the mode's
    ``Cascading.to_label``: pairs with ``human`` empty; for checks, the responses with such a check, its
    ``human_checks`` entry empty; for claims, the responses with such a claim, their claims written out as the
    cascade judged them; for a verdict per response, those responses)."""
    return cascade_of(mode).to_label(records, items_by_id)
