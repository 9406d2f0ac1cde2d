"""Audits of the judging modes, over their stored records (dicts as ``to_dict()`` gives them).

* Criteria: per criterion, agreement with the human per-criterion scores (Spearman/Kendall within item
  and pooled) for every scoring method; with per-criterion pairwise records, the conflict ratio of the
  criterion's scores against its pairwise verdicts and NTR_k of those verdicts; and how often a response
  wins every criterion yet loses the aggregate.
* Grounding: the same items with and without their profile/knowledge/evidence blocks, and a
  wrong-profile counterfactual (:func:`grounding_audit`).
* Checklists: calibration of P(pass) against human labels (Brier, ECE, reliability bins, AUROC,
  accuracy, Cohen's kappa); with holistic pairwise records, the conflict ratio of the checklist's
  expected satisfaction against the pairwise verdicts.

The modes' :meth:`~._base.Task.audit` hooks (the ``*_hook`` functions at the end) run these over a
command's records, judging what else they need through an :class:`~._base.AuditContext`.

Each measure reuses the holistic audit (``_audit``) on per-criterion projections of the records, so
the definitions are the same as in the main audit.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any, ClassVar

from ..audit._agreement import score_agreement
from ..audit._consistency import conflict_ratio, ntr
from ..audit._stats import jsonable
from ..engine import _aggregates as A
from ..engine._scoring import SCORE_METHODS
from ..errors import ConfigError
from ..io._items import Claim, Item
from . import _reports
from ._base import AuditContext, Task
from ._prompts import YES_NO, LabelSet
from ._records import ChecklistRecord, CriteriaRecord, ScoreRecord
from ._sections import Section

Record = Mapping[str, Any]


def _criterion_scores(records: Sequence[Record], name: str) -> list[dict[str, Any]]:
    """Score-record-shaped projections of one criterion (what the holistic audit reads)."""
    out = []
    for rec in records:
        for c in rec.get("criteria") or []:
            if c["name"] == name:
                out.append({"item_id": rec["item_id"], "response_id": rec["response_id"], "scale": c["points"],
                            "scores": c["scores"], "human_score": c.get("human"), "unscored": c["unscored"]})
    return out


def _criterion_pairs(records: Sequence[Record], name: str) -> list[dict[str, Any]]:
    """Compare-record-shaped projections of one criterion's pairwise verdicts."""
    out = []
    for rec in records:
        for c in rec.get("criteria") or []:
            if c["name"] == name:
                out.append({"item_id": rec["item_id"], "first_id": rec["first_id"], "second_id": rec["second_id"],
                            "verdicts": {"likelihood": c["verdict"]}, "unscored": c["unscored"]})
    return out


def _names(records: Sequence[Record]) -> list[str]:
    return list(dict.fromkeys(c["name"] for rec in records for c in rec.get("criteria") or []))


def criteria_audit(score_records: Sequence[Record], pair_records: Sequence[Record] = (), *,
                   ks: Sequence[int] = (3, 4, 5), delta: float = 0.0, method: str = "trustjudge") -> dict[str, Any]:
    """The criteria audit (see the module docstring). ``method`` is the scoring method whose aggregate is
    compared with the pairwise verdicts."""
    report: dict[str, Any] = {"criteria": {}}
    for name in _names([*score_records, *pair_records]):
        scores = _criterion_scores(score_records, name)
        entry: dict[str, Any] = {"judged": len(scores),
                                 "unscored": sum(1 for s in scores if s["unscored"] is not None)}
        if any(s["human_score"] is not None for s in scores):
            entry["human_agreement"] = {m: asdict(score_agreement(scores, m)) for m in SCORE_METHODS}
        pairs = _criterion_pairs(pair_records, name)
        if pairs:
            if scores and len({s["scale"] for s in scores}) == 1:
                entry["conflict_ratio"] = {m: asdict(conflict_ratio(scores, pairs, m, "likelihood", delta))
                                           for m in SCORE_METHODS}
            entry["ntr"] = {str(k): asdict(ntr(pairs, "likelihood", k)) for k in ks}
        report["criteria"][name] = entry
    aggregate = [{"item_id": r["item_id"], "response_id": r["response_id"], "scale": 0, "scores": r["aggregate"],
                  "human_score": r.get("human_score"), "unscored": r["unscored"]} for r in score_records]
    if any(a["human_score"] is not None for a in aggregate):
        report["aggregate_vs_human_overall"] = {m: asdict(score_agreement(aggregate, m)) for m in SCORE_METHODS}
    if pair_records and score_records:
        report["wins_every_criterion"] = _wins_every_criterion(score_records, pair_records, method)
    return jsonable(report)  # type: ignore[no-any-return]


def _wins_every_criterion(score_records: Sequence[Record], pair_records: Sequence[Record],
                          method: str) -> dict[str, Any]:
    """Pairs where one response wins every criterion's pairwise verdict: how many of them the pointwise
    aggregate (``method``) and the pairwise aggregate verdict give to the other response."""
    agg = {(r["item_id"], r["response_id"]): (r["aggregate"] or {}).get(method) for r in score_records
           if r["unscored"] is None}
    sweeps = lost_pointwise = lost_pairwise = 0
    for rec in pair_records:
        verdicts = {c["verdict"] for c in rec.get("criteria") or []}
        if len(verdicts) != 1 or not verdicts <= {"first", "second"} or rec["unscored"] is not None:
            continue
        winner = verdicts.pop()
        sweeps += 1
        a, b = agg.get((rec["item_id"], rec["first_id"])), agg.get((rec["item_id"], rec["second_id"]))
        if a is not None and b is not None and ((winner == "first" and a < b) or (winner == "second" and b < a)):
            lost_pointwise += 1
        if rec.get("verdict") not in (None, winner):
            lost_pairwise += 1
    return {"pairs_won_on_every_criterion": sweeps, "lost_pointwise_aggregate": lost_pointwise,
            "lost_pairwise_aggregate": lost_pairwise,
            "share_lost_pointwise": lost_pointwise / sweeps if sweeps else math.nan,
            "share_lost_pairwise": lost_pairwise / sweeps if sweeps else math.nan, "method": method}


def checklist_audit(records: Sequence[Record], compare_records: Sequence[Record] = (), *,
                    labels: LabelSet = YES_NO, bins: int = 10, delta: float = 0.0) -> dict[str, Any]:
    """The checklist audit (see the module docstring) of records judged with ``labels``.

    A check passes for the human when its human value is the top value of ``labels`` (the passing label's:
    YES, FULL), as its judged pass probability ``p_pass`` is that label's. Records that name other labels
    are refused: the passing value would be wrong."""
    top = max(labels.values) if labels.values is not None else 1.0  # without values the first label is 1
    probs: list[float] = []
    humans: list[int] = []
    values: list[tuple[float, float]] = []
    for rec in records:
        if "labels" in rec and list(rec["labels"]) != list(labels.labels):
            raise ConfigError(f"checklist audit: response {rec.get('item_id')}/{rec.get('response_id')} was judged "
                              f"with the labels {list(rec['labels'])}, not {list(labels.labels)}: give the audit "
                              "the label set the records were judged with")
        for c in rec.get("checks") or []:
            if c["unscored"] is None and c.get("human") is not None:
                probs.append(float(c["p_pass"]))
                humans.append(1 if c["human"] >= top else 0)
                values.append((float(c["value"]), float(c["human"])))
    report: dict[str, Any] = {"responses": len(records), "checks_with_human_labels": len(probs)}
    if probs:
        predicted = [1 if p > 0.5 else 0 for p in probs]
        report["calibration"] = {
            "brier": A.brier(probs, humans), "ece": A.ece(probs, humans, bins=bins), "auroc": A.auroc(probs, humans),
            "accuracy": sum(p == h for p, h in zip(predicted, humans)) / len(humans),
            "kappa": A.cohen_kappa(predicted, humans), "base_rate": sum(humans) / len(humans),
            "mean_p_pass": sum(probs) / len(probs),
            "reliability": [asdict(b) for b in A.reliability(probs, humans, bins=bins)]}
        report["value_mae"] = sum(abs(v - h) for v, h in values) / len(values)
    if compare_records:
        scores = [{"item_id": r["item_id"], "response_id": r["response_id"], "scale": 0,
                   "scores": {"satisfaction": r["satisfaction"]}, "unscored": r["unscored"]} for r in records]
        report["conflict_ratio_vs_pairwise"] = {
            agg: asdict(conflict_ratio(scores, compare_records, "satisfaction", agg, delta))
            for agg in ("two_pass", "likelihood")}
    return jsonable(report)  # type: ignore[no-any-return]


def _value(rec: Any, method: str) -> tuple[float | None, float | None]:
    """(judged value, human value) of a record of any pointwise task."""
    if isinstance(rec, ScoreRecord):
        return rec.scores.get(method), rec.human_score
    if isinstance(rec, CriteriaRecord):
        return rec.aggregate.get(method), rec.human if rec.human is not None else rec.human_score
    if isinstance(rec, ChecklistRecord):
        humans = [c.human for c in rec.checks if c.human is not None]
        human = sum(humans) / len(humans) if humans and len(humans) == len(rec.checks) else None
        return rec.satisfaction, human
    raise TypeError(f"grounding audit: no value in a {type(rec).__name__}")


def _spearman(pairs: list[tuple[float, float]]) -> float:
    from scipy import stats  # type: ignore[import-untyped, unused-ignore]

    if len(pairs) < 3 or len({p[0] for p in pairs}) < 2 or len({p[1] for p in pairs}) < 2:
        return math.nan  # undefined for a constant side
    rho = stats.spearmanr([p[0] for p in pairs], [p[1] for p in pairs]).statistic
    return float(rho)


def grounding_audit(run: Callable[[Task, list[Item]], Iterable[Any]], items: Sequence[Item], task: Task, *,
                    method: str = "trustjudge") -> dict[str, Any]:
    """Judge ``items`` with their grounding (profile, knowledge, evidence), without it, and, where items
    have profiles, with each item's profile swapped for another item's (a wrong-profile counterfactual).

    Reports the score shift that the grounding causes, the pooled Spearman agreement with the human
    labels with and without it, and the share of responses whose score does not drop under a wrong
    profile (for personalised criteria it should drop). ``run`` is :meth:`Judge.run`.
    """
    with_g = [_value(r, method) for r in run(task, list(items))]
    bare = [replace(it, profile=None, knowledge=None, evidence=()) for it in items]
    without = [_value(r, method) for r in run(task, bare)]
    shifts = [a[0] - b[0] for a, b in zip(with_g, without) if a[0] is not None and b[0] is not None]
    report: dict[str, Any] = {
        "responses": len(with_g), "method": method, "compared": len(shifts),
        "mean_shift": sum(shifts) / len(shifts) if shifts else math.nan,
        "mean_abs_shift": sum(map(abs, shifts)) / len(shifts) if shifts else math.nan,
        "agreement_with_grounding": _spearman([(v, h) for v, h in with_g if v is not None and h is not None]),
        "agreement_without_grounding": _spearman([(v, h) for v, h in without if v is not None and h is not None]),
    }
    profiled = [i for i, it in enumerate(items) if it.profile]
    profiles = [items[i].profile for i in profiled]
    if len(set(profiles)) >= 2:
        swapped = list(items)
        for n, i in enumerate(profiled):  # each profiled item takes the next one's (different) profile
            other = next(p for k in range(1, len(profiles)) if (p := profiles[(n + k) % len(profiles)]) != profiles[n])
            swapped[i] = replace(items[i], profile=other)
        wrong = [_value(r, method) for r in run(task, [swapped[i] for i in profiled])]
        starts = [0]
        for it in items:
            starts.append(starts[-1] + task.count(it))
        right = [v for i in profiled for v in with_g[starts[i]:starts[i + 1]]]
        drops = [(r[0], w[0]) for r, w in zip(right, wrong) if r[0] is not None and w[0] is not None]
        report["wrong_profile"] = {
            "items": len(profiled), "responses": len(drops),
            "share_not_dropping": sum(1 for r, w in drops if w >= r) / len(drops) if drops else math.nan,
            "mean_drop": sum(r - w for r, w in drops) / len(drops) if drops else math.nan}
    return jsonable(report)  # type: ignore[no-any-return]


_HUMAN_VALUE = {"SUPPORTED": 1, "PARTIAL": 0, "UNSUPPORTED": 0, "UNKNOWN": 0}


def claims_audit(records: Sequence[Record], *, bins: int = 10) -> dict[str, Any]:
    """Claim-level agreement with human labels: calibration of P(supported) against "SUPPORTED" (Brier, ECE,
    reliability, AUROC), and the argmax label against the human label (accuracy, Cohen's kappa)."""
    probs: list[float] = []
    humans: list[int] = []
    argmax: list[str] = []
    labels: list[str] = []
    claims = unscored = 0
    for rec in records:
        for c in rec.get("claims") or []:
            claims += 1
            if c.get("unscored") is not None:
                unscored += 1
                continue
            human = c.get("human")
            if human is None:
                continue
            probs.append(float(c["p_supported"]))
            humans.append(_HUMAN_VALUE[human])
            dist = c["probabilities"]
            argmax.append(max(dist, key=dist.get))
            labels.append(human)
    report: dict[str, Any] = {"responses": len(records), "claims": claims, "unscored_claims": unscored,
                              "with_human_labels": len(probs),
                              "responses_unscored": Counter(r["unscored"] for r in records if r.get("unscored"))}
    if probs:
        report["supported_calibration"] = {
            "brier": A.brier(probs, humans), "ece": A.ece(probs, humans, bins=bins), "auroc": A.auroc(probs, humans),
            "accuracy": sum((p > 0.5) == bool(h) for p, h in zip(probs, humans)) / len(probs),
            "base_rate": sum(humans) / len(humans),
            "reliability": [asdict(b) for b in A.reliability(probs, humans, bins=bins)]}
        report["label_agreement"] = {"accuracy": sum(a == h for a, h in zip(argmax, labels)) / len(labels),
                                     "kappa": A.cohen_kappa(argmax, labels)}
    return jsonable(report)  # type: ignore[no-any-return]


def claims_sensitivity(run: Callable[[Task, list[Item]], Iterable[Any]], items: Sequence[Item], task: Task,
                       reruns: Sequence[Iterable[Any]] = ()) -> dict[str, Any]:
    """How much the verification moves when nothing it should depend on changes.

    * evidence order: the same claims with the item's passages in reverse order (mean |shift| of P(supported));
    * negation: each claim with "It is not true that" before it; a claim and its negation should not both
      be supported (share of claims where both P(supported) > 0.5);
    * extractor stability: claim counts of the given ``reruns`` (the same items extracted with other seeds
      or prompts) against the first run (mean |difference| in the number of claims per response).
    """
    base = list(run(task, list(items)))
    claims = {(r.item_id, r.response_id): [(c.text, c.source) for c in r.claims] for r in base}
    fixed = [replace(it, responses=tuple(replace(resp, claims=tuple(Claim(t, None, s)
                                                                    for t, s in claims[(it.id, resp.id)]))
                                         for resp in it.responses)) for it in items]
    original = {(r.item_id, r.response_id): [c.p_supported for c in r.claims] for r in run(task, fixed)}
    reversed_items = [replace(it, evidence=tuple(reversed(it.evidence))) for it in fixed]
    shifts = [abs(a - b) for r in run(task, reversed_items)
              for a, b in zip(original[(r.item_id, r.response_id)], [c.p_supported for c in r.claims])
              if a is not None and b is not None]
    negated = [replace(it, responses=tuple(replace(resp, claims=tuple(Claim("It is not true that " + c.text[:1].lower()
                                                                             + c.text[1:], None, c.source)
                                                                       for c in resp.claims or ()))
                                           for resp in it.responses)) for it in fixed]
    both = total = 0
    for r in run(task, negated):
        for a, c in zip(original[(r.item_id, r.response_id)], r.claims):
            if a is not None and c.p_supported is not None:
                total += 1
                both += a > 0.5 and c.p_supported > 0.5
    counts = {(r.item_id, r.response_id): len(r.claims) for r in base if r.source == "extracted" and not r.unscored}
    diffs = [abs(len(r.claims) - counts[(r.item_id, r.response_id)]) for rerun in reruns for r in rerun
             if (r.item_id, r.response_id) in counts and not r.unscored]
    return jsonable({  # type: ignore[no-any-return]
        "evidence_order": {"claims": len(shifts), "mean_abs_shift": sum(shifts) / len(shifts) if shifts else math.nan,
                           "max_abs_shift": max(shifts, default=math.nan)},
        "negation": {"claims": total, "both_supported": both, "share": both / total if total else math.nan},
        "extractor": {"responses": len(diffs), "mean_abs_count_difference": sum(diffs) / len(diffs) if diffs
                      else math.nan}})


# -- the modes' audit hooks ---------------------------------------------------------------------------------

GROUNDING = "grounding-audit"
SENSITIVITY = "sensitivity"
GROUNDING_OPTION = {GROUNDING: "With --audit: judge the items again without their profile/knowledge/evidence and "
                               "with swapped profiles, and report the shift."}
SENSITIVITY_OPTION = {SENSITIVITY: "With --audit: evidence order, negation and extractor stability (a second "
                                   "extraction at temperature 0.7)."}


def criteria_hook(records: Sequence[Record], context: AuditContext, *, pairwise: bool) -> dict[str, Any]:
    """The criteria audit of a ``criteria`` run (``pairwise``: of a ``criteria-compare`` run): the other
    side's judgments come from the context (the criteria-compare pairs of items with two responses or more,
    or the criteria scores of every item); ``grounding-audit`` adds :func:`grounding_audit` of the scores."""
    listed = context.items()
    scoring = context.task_of("criteria")
    if not pairwise:
        several = [it for it in listed if len(it.responses) >= 2]
        pairs = [r.to_dict() for r in context.run(context.task_of("criteria-compare"), several)]
        report = criteria_audit(records, pairs)
    else:
        report = criteria_audit([r.to_dict() for r in context.run(scoring, listed)], records)
    if GROUNDING in context.asked:
        report["grounding"] = grounding_audit(context.run, listed, scoring)
    return report


def checklist_hook(task: Task, labels: LabelSet, records: Sequence[Record], context: AuditContext) -> dict[str, Any]:
    """The checklist audit of a run judged with ``labels``, with holistic pairwise verdicts (the compare mode's,
    on items with two responses or more) for its conflict ratio; ``grounding-audit`` adds :func:`grounding_audit`."""
    listed = context.items()
    several = [it for it in listed if len(it.responses) >= 2]
    pairs = [r.to_dict() for r in context.run(context.task_of("compare"), several)] if several else []
    report = checklist_audit(records, pairs, labels=labels)
    if GROUNDING in context.asked:
        report["grounding"] = grounding_audit(context.run, listed, task)
    return report


def claims_hook(task: Task, records: Sequence[Record], context: AuditContext) -> dict[str, Any]:
    """The claims audit; ``sensitivity`` adds :func:`claims_sensitivity` (extractor stability from the context's
    :attr:`~._base.AuditContext.resampled` judge, where it offers one)."""
    report = claims_audit(records)
    if SENSITIVITY in context.asked:
        listed = context.items()
        reruns = [context.resampled(listed)] if context.resampled is not None else []
        report["sensitivity"] = claims_sensitivity(context.run, listed, task, reruns)
    return report


class CriteriaHooks(Task):
    """The audit hooks the two criteria modes share (:func:`criteria_hook`, drawn by :mod:`._reports`); a task
    sets ``audit_pairwise`` to say which of the two it is."""

    audit_pairwise: ClassVar[bool] = False
    audit_options: ClassVar[Mapping[str, str]] = GROUNDING_OPTION

    def audit(self, records: Sequence[Mapping[str, Any]], context: AuditContext) -> dict[str, Any] | None:
        return criteria_hook(records, context, pairwise=self.audit_pairwise)

    @classmethod
    def report_sections(cls, audit: Mapping[str, Any]) -> list[Section]:
        return _reports.criteria_sections(audit)

    @classmethod
    def report_facts(cls, audit: Mapping[str, Any]) -> list[tuple[str, str]]:
        return _reports.criteria_facts(audit)
