"""The ``checklist`` mode: each response asked each check of its checklist."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ..audit._readers import CheckUnits
from ..engine import _aggregates as A
from ..engine._asking import Question
from ..engine._engine import EMPTY_RESPONSE, Outcome
from ..errors import InputError
from ..io._items import Check, Item, Response
from ..io._rules import Rule
from . import _audits, _reports
from ._base import (
    PARTIAL,
    AuditContext,
    Cost,
    Format,
    Task,
    _prefix,
    _wmean,
    by_responses,
    grounding,
    judged_empty,
    pictures,
    point_mass,
    rule_label,
    rules_option,
    shared_bytes,
    text_bytes,
)
from ._cascading import ByPart
from ._prompts import (
    ANSWER_MARKER,
    CHECK_FIELDS,
    YES_NO,
    LabelSet,
    Prompts,
    Protocol,
)
from ._provenance import share_se, stamp
from ._records import (
    ChecklistRecord,
    CheckResult,
)
from ._registry import PROTOCOL_HELP, RULES_HELP, JudgeSettings, Mode, TemplateSpec, option
from ._sections import Section
from ._stored import StoredJudgments
from ._summaries import CHECKLIST_SUMMARY

POSITION = 50
"""Where the mode comes among the built-in ones (listings, help)."""

# -- checklists --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChecklistTask(Task):
    """Each response asked each check of its checklist (one prompt per pair, labels such as YES/NO);
    per response the expected weighted satisfaction, P(all pass) and the distribution of the number
    passed (Poisson-binomial: the checks' outcomes taken as independent given the response)."""

    kind: ClassVar[str] = "checklist"
    prompts: Prompts
    protocol: Protocol = "direct"
    labels: LabelSet = YES_NO
    """The answers a check may get; the label with the highest value (the first, without values) passes."""
    checklist: tuple[Check, ...] = ()
    """The suite's checks: asked of responses whose item and response carry none."""
    reweight: bool = False
    keep_critique: bool = field(default=True, compare=False)
    rules: tuple[Rule, ...] = ()
    """Shortcuts checked before the judge, in order: each rule's label (one of :attr:`labels`) is given to
    every check of the response."""

    def calibration_prompt(self) -> str:
        return self.prompts.check.template

    def calibration_labels(self) -> tuple[str, str, str] | None:
        """A calibration is fitted on YES/NO checks: P(pass) under another label set is another quantity."""
        return None if self.labels == YES_NO else ("labels", "YES/NO", "/".join(self.labels.labels))

    def __post_init__(self) -> None:
        for i, rule in enumerate(self.rules):
            rule_label(rule, self.labels.labels, i, "the checklist's labels")

    def checks_of(self, item: Item, r: Response) -> tuple[Check, ...]:
        return item.checks(r) or self.checklist

    def check(self, item: Item) -> None:
        for i, r in enumerate(item.responses):
            if not self.checks_of(item, r):
                raise InputError("has no checklist, and no suite gives one (add \"checklist\" to the item or "
                                 "the response, or pass a suite file)", file=None, line=item.line,
                                 field=f"responses[{i}].checklist")
            for cid, label in (r.human_checks or {}).items():
                if isinstance(label, str) and label.upper() not in {x.upper() for x in self.labels.labels}:
                    raise InputError(f"is {label!r}, not one of the labels {list(self.labels.labels)}", file=None,
                                     line=item.line, field=f"responses[{i}].human_checks.{cid}")

    def size(self, item: Item) -> int:
        return sum(len(self.checks_of(item, r)) for r in item.responses)

    def cost(self, item: Item) -> Cost:
        shared = shared_bytes(item)
        suite = sum(text_bytes(c.text) for c in self.checklist)
        own = sum(text_bytes(c.text) for c in item.checklist)
        judgments = quoted = 0
        for r in item.responses:
            checks = self.checks_of(item, r)
            mine = sum(text_bytes(c.text) for c in r.checklist)
            # each text is measured once: the item's and the suite's checks are shared by its responses
            check_bytes = (own + mine) if (item.checklist or r.checklist) else suite
            judgments += len(checks)
            quoted += len(checks) * (shared + text_bytes(r.text)) + check_bytes
        return Cost(judgments, quoted, judgments * len(self.labels.labels))

    def parts(self, item: Item, size: int) -> list[Item]:
        return by_responses(item, size, lambda r: len(self.checks_of(item, r)))

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        out: list[Question | str] = []
        g = grounding(item)
        task = self.prompts.label_task(self.labels, self.protocol, "answer")
        for r in item.responses:
            for c in self.checks_of(item, r):
                if judged_empty(r):
                    out.append(EMPTY_RESPONSE)
                    continue
                user = self.prompts.render_check(item.question, r.text, item.context, item.reference, c.text, task, g,
                                                 pictures(item, r))
                out.append(Question(fmt(self.prompts.system, user, _prefix(self.protocol, ANSWER_MARKER)),
                                    self.labels.labels, ANSWER_MARKER))
        return out

    @property
    def _values(self) -> tuple[float, ...]:
        if self.labels.values is not None:
            return self.labels.values
        return tuple(1.0 if i == 0 else 0.0 for i in range(len(self.labels.labels)))

    def _human(self, label: float | str | None) -> float | None:
        if label is None or isinstance(label, float):
            return label
        return self.labels.value_of(label) if self.labels.values is not None else (
            1.0 if label.upper() == self.labels.labels[0].upper() else 0.0)

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[ChecklistRecord]:
        it = iter(outcomes)
        values = self._values
        passing = max(range(len(values)), key=lambda i: values[i])
        for item in items:
            for r in item.responses:
                results, outs = [], []
                for c in self.checks_of(item, r):
                    outs.append(out := next(it))
                    human = self._human((r.human_checks or {}).get(c.id))
                    if out.probs is None or out.unscored is not None:
                        results.append(CheckResult(c.id, c.text, c.weight, None, None, None,
                                                   out.mass if out.probs is not None else None, out.unscored, human,
                                                   out.critique))
                        continue
                    total = sum(out.probs)
                    probs = {lab: p / total for lab, p in zip(self.labels.labels, out.probs)}
                    value = sum(p * v for p, v in zip(probs.values(), values))
                    p = probs[self.labels.labels[passing]]
                    results.append(CheckResult(c.id, c.text, c.weight, probs, value, p, out.mass, None, human,
                                               out.critique, share_se(p, out)))
                yield stamp(self._record(item, r, results, judge), outs)

    def rule_record(self, item: Item, response: Response, rule: Rule, judge: str) -> ChecklistRecord:
        """Every check given the rule's label (a point mass), then satisfaction and P(all) as usual: no call."""
        label = rule_label(rule, self.labels.labels, 0, "the checklist's labels")
        values = self._values
        passing = self.labels.labels[max(range(len(values)), key=lambda i: values[i])]
        probs = dict(zip(self.labels.labels, point_mass(self.labels.labels, label)))
        value = values[self.labels.labels.index(label)]
        results = [CheckResult(c.id, c.text, c.weight, dict(probs), value, probs[passing], None, None,
                               self._human((response.human_checks or {}).get(c.id)))
                   for c in self.checks_of(item, response)]
        record = self._record(item, response, results, judge, ruled=True)
        record.rule = rule.id
        return record

    def _record(self, item: Item, r: Response, results: list[CheckResult], judge: str, *,
                ruled: bool = False) -> ChecklistRecord:
        left_out = [res.id for res in results if res.unscored is not None]
        use = [res for res in results if res.unscored is None]
        unscored = EMPTY_RESPONSE if judged_empty(r) and not ruled else (
            PARTIAL if left_out and (not self.reweight or not use) else None)
        satisfaction = p_all = expected = None
        passed = None
        if unscored is None:
            weights = [res.weight for res in use]
            if sum(weights) > 0:
                satisfaction = _wmean([res.value or 0.0 for res in use], weights)
            ps = [res.p_pass or 0.0 for res in use]
            p_all = A.prob_all(ps)
            passed = A.poisson_binomial(ps)
            expected = A.expected_count(ps)
        return ChecklistRecord(item.id, r.id, r.system, judge, self.protocol, list(self.labels.labels), results,
                               satisfaction, p_all, passed, expected, unscored,
                               left_out if self.reweight and unscored is None else [])


    # -- the audit hooks (the report: :mod:`._reports`) ------------------------------------------------------
    audit_options: ClassVar[Mapping[str, str]] = _audits.GROUNDING_OPTION

    def audit(self, records: Sequence[Mapping[str, Any]], context: AuditContext) -> dict[str, Any] | None:
        return _audits.checklist_hook(self, self.labels, records, context)

    @classmethod
    def report_sections(cls, audit: Mapping[str, Any]) -> list[Section]:
        return _reports.checklist_sections(audit)

    @classmethod
    def report_facts(cls, audit: Mapping[str, Any]) -> list[tuple[str, str]]:
        return _reports.checklist_facts(audit)


@dataclass(frozen=True)
class ChecklistOptions:
    checklist: tuple[Check, ...] = option((), "Checks for responses whose item carries none (a suite's).",
                                          suite="checklist")
    labels: LabelSet = option(YES_NO, 'The answers a check may get, e.g. "FULL=1,PARTIAL=0.5,NO=0".',
                              parse=LabelSet.parse, suite="labels", shown='"YES=1,NO=0"')
    reweight: bool = option(False, "When a check is unscored, aggregate over the rest with renormalised weights.")
    protocol: Protocol | None = option(None, PROTOCOL_HELP)
    rules: tuple[Rule, ...] = option((), RULES_HELP, suite="rules", served=False)


def build_checklist(j: JudgeSettings, o: ChecklistOptions) -> ChecklistTask:
    return ChecklistTask(j.prompts, o.protocol or j.protocol, o.labels, tuple(o.checklist), o.reweight,
                         rules=rules_option(o.rules))


def _label_checks(response: dict[str, Any], left: list[dict[str, Any]], every: list[dict[str, Any]]) -> None:
    """A response to label: its ``human_checks`` with an empty entry for each check no tier kept."""
    labels = dict(response.get("human_checks") or {})
    for check in left:
        labels.setdefault(check["id"], None)
    response["human_checks"] = labels


CASCADE = ByPart("checks", lambda item, r: item.checks(r),
                 lambda item, r, chosen: (replace(item, checklist=()), replace(r, checklist=chosen)), _label_checks)
"""A checklist cascades check by check: later tiers are asked only the checks still open (as the response's)."""


def _stored(task: ChecklistTask, item: Item, fmt: Format, asked: bool) -> Iterator[dict[str, Any]]:
    if asked:
        task.check(item)
    checks = [(r, check) for r in item.responses for check in task.checks_of(item, r)]
    for (responder, check), question in zip(checks, task.questions(item, fmt)):
        yield {"item_id": item.id, "response_id": responder.id, "check": check.id,
               "labels": list(task.labels.labels), "protocol": task.protocol, "question": question}


STORED = StoredJudgments(_stored, lambda e: f"checklist {e['item_id']} / {e['response_id']}: check {e['check']} "
                                            f"({'/'.join(e['labels'])}, {e['protocol']})", listed=True)
"""``store show``: each response asked each check (with ``--kind all``, where the item or suite has checks)."""


MODE = Mode(
    "checklist", ChecklistTask, ChecklistRecord, ChecklistOptions, build_checklist,
    templates={"check": TemplateSpec("check.txt", frozenset(CHECK_FIELDS))},
    min_responses=1, summary="Each response asked each check of its checklist.",
    command="checklist", route="/v1/checklist", cascade=CASCADE, summary_metrics=CHECKLIST_SUMMARY, stored=STORED,
    calibration=CheckUnits())
