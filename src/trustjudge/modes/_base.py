"""Tasks: what to ask of the judge for an item, and how its answers become records.

A task is a small frozen object. ``questions`` turns an item into label questions (a prompt ending at a
marker, the labels that may follow it); ``records`` turns the outcomes of one chunk of items back into
typed records; ``run`` does both through an :class:`Asking` (a task that asks in stages, such as claims,
overrides it). The engine never sees a task, and :class:`~trustjudge.Judge` runs any of them the same way.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from ..backends import Backend, GenerateRequest, Generation
from ..backends._recorded import RecordedBackend
from ..engine import _aggregates as A
from ..engine._asking import Question, Sampling
from ..engine._engine import Outcome
from ..engine._guard import BackendStopped
from ..errors import BackendError, ConfigError, InputError, TrustJudgeError
from ..io._items import Criterion, Item, Response, turns_digest
from ..io._rules import Rule, first_rule, parse_rules
from ._prompts import (
    NO_PICTURES,
    Grounding,
    Pictures,
    Protocol,
)
from ._records import (
    PairHeader,
    RecordBase,
    ResponseHeader,
)
from ._sections import Section, fields_section

Split = Literal["lines", "numbered"]
"""How a solution splits into steps (the steps mode's ``split``)."""
_NUMBERED_STEP = re.compile(r"^\s*(?:step\s*)?\d+\s*[.):]\s*", re.IGNORECASE)


def split_steps(text: str, split: Split) -> list[str]:
    """The steps of a solution: its non-empty lines, or (``numbered``) the lines that start a numbered step
    ("1.", "2)", "Step 3:"), each with the unnumbered lines after it."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if split == "lines":
        return lines
    steps: list[str] = []
    for line in lines:
        if _NUMBERED_STEP.match(line) or not steps:
            steps.append(line)
        else:
            steps[-1] += "\n" + line
    return steps


Format = Callable[[str, str, str], str]
"""``backend.format_prompt(system, user, assistant_prefix)``."""


@dataclass(frozen=True)
class Asking:
    """What a task's :meth:`Task.run` may ask of the judge (built by :meth:`Judge.run` per chunk of items)."""

    judge: str
    """The judge's name, as records give it."""
    fmt: Format
    """The backend's ``format_prompt(system, user, assistant_prefix)``."""
    labels: Callable[[Sequence[Question | str], Protocol], list[Outcome]]
    """Every question's outcome under a protocol (``cot``: a critique first), from the store where it has them."""
    generate: Callable[[Sequence[GenerateRequest]], list[Generation | BackendError]]
    """Stored generations (free text, such as claim extractions), from the store where it has them."""
    sampling: Sampling
    """The judge's sampling options (temperature, seed, max_new_tokens) for generations a task asks."""


def grounding(item: Item) -> Grounding:
    return Grounding(item.profile, item.knowledge, item.evidence)


def pictures(item: Item, response: Response | None = None, other: Response | None = None) -> Pictures:
    """The images of a judgment of ``response`` (pairwise: ``response`` shown as A, ``other`` as B)."""
    if not item.has_images:
        return NO_PICTURES
    return Pictures(item.images, item.reference_images, response.images if response else (),
                    other.images if other else ())


def judged_empty(response: Response) -> bool:
    """Nothing to judge: no text and no image."""
    return not response.text.strip() and not response.images


def _prefix(protocol: Protocol, marker: str) -> str:
    return marker if protocol == "direct" else ""


@dataclass(frozen=True)
class Cost:
    """What judging items under a task asks of the judge (the service bounds each per request).

    Bytes and labels are summed over the judgments: a passage quoted into 300 prompts counts 300 times,
    as it is sent (and stored) 300 times; a 1-100 score reads 100 labels.
    """

    judgments: int = 0
    """Label questions (prompts), as :meth:`Task.size` counts them."""
    prompt_bytes: int = 0
    """UTF-8 bytes of the texts quoted into those prompts (question, context, reference, profile, knowledge,
    evidence, the response or pair, the criterion or check); the template's own words are not counted."""
    labels: int = 0
    """Labels whose probability the judge reads, over all the judgments."""

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.judgments + other.judgments, self.prompt_bytes + other.prompt_bytes,
                    self.labels + other.labels)


def text_bytes(text: str | None) -> int:
    """UTF-8 length of ``text`` (0 for ``None``)."""
    return len(text.encode("utf-8", "surrogatepass")) if text else 0


def shared_bytes(item: Item) -> int:
    """Bytes of the texts an item quotes into every one of its prompts: question, context, reference
    and grounding (profile, knowledge, evidence)."""
    return (text_bytes(item.question) + text_bytes(item.context) + text_bytes(item.reference)
            + text_bytes(item.profile) + text_bytes(item.knowledge) + sum(map(text_bytes, item.evidence)))


def by_responses(item: Item, size: int, per: Callable[[Response], int]) -> list[Item]:
    """``item`` cut into items of consecutive responses, of about ``size`` judgments each (``per(r)`` for a
    response); for a task whose judgments and records are each one response's, their records in order
    are the item's."""
    parts: list[Item] = []
    group: list[Response] = []
    n = 0
    for r in item.responses:
        group.append(r)
        n += per(r)
        if n >= size:
            parts.append(replace(item, responses=tuple(group), pairs=None))
            group, n = [], 0
    if group:
        parts.append(replace(item, responses=tuple(group), pairs=None))
    return parts if len(parts) > 1 else [item]


def by_pairs(item: Item, size: int, per_pair: int) -> list[Item]:
    """``item`` cut into items of consecutive pairs (all responses kept), of about ``size`` judgments each."""
    pairs = item.all_pairs()
    step = max(1, size // max(1, per_pair))
    if len(pairs) <= step:
        return [item]
    return [replace(item, pairs=pairs[i:i + step]) for i in range(0, len(pairs), step)]


def _pair_bytes(item: Item) -> Iterator[int]:
    """Per pair of ``item``, the bytes of its two responses."""
    sizes = {r.id: text_bytes(r.text) for r in item.responses}
    for pair in item.all_pairs():
        yield sizes.get(pair.first, 0) + sizes.get(pair.second, 0)


@dataclass(frozen=True)
class AuditContext:
    """What a task's :meth:`Task.audit` may use besides its records: the input's items and the judge, to judge
    more (an audit that compares with another mode's judgments, or judges the items again altered)."""

    items: Callable[[], list[Item]]
    """Every valid item of the input (read when called)."""
    run: Callable[[Task, Sequence[Item]], Iterable[RecordBase]]
    """The judge's :meth:`~trustjudge.Judge.run`: the store answers what it has, the rest is judged."""
    task_of: Callable[[str], Task]
    """The task of another mode by name, for this judge: with the options of the same command line and
    suite where the command runs that mode, else with the mode's defaults."""
    asked: frozenset[str] = frozenset()
    """The optional parts of the audit asked for (names among the task's :attr:`Task.audit_options`)."""
    resampled: Callable[[Sequence[Item]], list[RecordBase]] | None = None
    """The records of items judged again under this task by a second judge sampling at temperature 0.7 with
    the next seed (a stability probe), where the caller offers one."""

    @staticmethod
    def records_only(task_of: Callable[[str], Task]) -> AuditContext:
        """A context that offers no item and so judges nothing: the audit of the records alone (the measures
        that need more judgments are left out)."""
        return AuditContext(list, lambda task, items: iter(()), task_of)


class Task(ABC):
    """Turns items into label questions and their outcomes into records.

    Optional hooks give a mode an audit and its report, reached through the registry (``get_mode(name).task``)
    by ``trustjudge <command> --audit / --report`` with no other file touched: :meth:`audit` (its records to
    JSON-able data), :meth:`report_sections` (that data to sections of notes, tables and figures, drawn by
    :mod:`trustjudge.report`) and :meth:`report_facts` (lines of the report's summary); a task holds no HTML
    and no plotting code.
    """

    kind: ClassVar[str]
    protocol: Protocol
    plan_note: ClassVar[str] = ""
    """What a plan (:meth:`Judge.plan`, ``--dry-run``) of this task leaves out, if anything."""
    chunk_weight: ClassVar[int] = 1
    """How much one of :meth:`size`'s questions weighs when items are cut into chunks of about
    ``Judge(chunk_size=...)`` questions (a task whose :meth:`size` is an upper bound weighs more)."""

    def check(self, item: Item) -> None:  # noqa: B027 (optional hook: most tasks judge any item)
        """Raise :class:`InputError` (naming the item's line) if this task cannot judge ``item``."""

    @abstractmethod
    def size(self, item: Item) -> int:
        """How many questions ``item`` asks."""

    def count(self, item: Item) -> int:
        """How many records ``item`` gives (one per response unless a task says otherwise)."""
        return len(item.responses)

    def parts(self, item: Item, size: int) -> list[Item]:
        """``item`` as items of about ``size`` judgments each whose records, in order, are the item's (a
        service takes turns by such parts). The default keeps the item whole."""
        return [item]

    def cost(self, item: Item) -> Cost:
        """What ``item`` costs (:class:`Cost`). This default bounds it from :meth:`size`: every judgment
        quoting the item's shared texts and its longest response, reading 100 labels."""
        n = self.size(item)
        longest = max((text_bytes(r.text) for r in item.responses), default=0)
        return Cost(n, n * (shared_bytes(item) + longest), n * 100)

    @abstractmethod
    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        """The item's questions in order; a ``str`` is an unscored reason (an empty response)."""

    @abstractmethod
    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[RecordBase]:
        """The records of ``items`` from their questions' outcomes, in the same order."""

    def for_backend(self, backend: Backend) -> Task:
        """This task as ``backend`` can answer it. A recorded judge (``recorded/<path>``) answers only what a
        task reads from its file (the compare mode's recorded variant), so by default it is refused."""
        if isinstance(backend, RecordedBackend):
            raise backend.refusal(f"the {self.kind} mode")
        return self

    def run(self, items: Sequence[Item], ask: Asking) -> Iterator[RecordBase]:
        """The records of one chunk of (checked) ``items``: by default their questions, asked in one go under
        this task's protocol, then their records. A task that asks in stages overrides it."""
        questions = [q for item in items for q in self.questions(item, ask.fmt)]
        yield from self.records(items, ask.labels(questions, self.protocol), ask.judge)

    def rule_list(self) -> tuple[Rule, ...]:
        """The rules checked before the judge (:mod:`trustjudge.io._rules`): none unless a task takes them."""
        rules = getattr(self, "rules", ())
        return tuple(rules) if rules else ()

    def rule_record(self, item: Item, response: Response, rule: Rule, judge: str) -> RecordBase:
        """The record ``rule`` gives ``response`` with no model call (a task that takes rules overrides it)."""
        raise ConfigError(f"the {self.kind} mode takes no rules")


    def calibration_prompt(self) -> str:
        """What a calibration of this task holds for (hashed into the file's ``template``): a mode with a
        calibration (``Mode(calibration=...)``) returns its prompt template's text, so a calibration fitted under
        another prompt is refused. This default names the task's class only."""
        return f"{type(self).__module__}.{type(self).__qualname__}"

    def check_calibration(self, calibration: Any) -> None:
        """Refuse a calibration of this task's mode that no override makes fit (another scale, other classes):
        a ConfigError. This default accepts every one."""
        return None

    def calibration_labels(self) -> tuple[str, str, str] | None:
        """Where this task asks with other labels than a calibration of its mode is fitted on: what they are,
        the calibrated ones and these (an overridable mismatch); ``None`` (this default) where they are the same."""
        return None

    # -- optional hooks: the mode's audit and its report ------------------------------------------------------
    audit_options: ClassVar[Mapping[str, str]] = {}
    """Optional parts of :meth:`audit`, by name (a word with dashes), each with its help: a command takes each
    as the flag ``--<name>`` (with ``--audit`` / ``--report``), and :attr:`AuditContext.asked` holds those asked."""

    def audit(self, records: Sequence[Mapping[str, Any]], context: AuditContext) -> dict[str, Any] | None:
        """The audit of this task's ``records`` (dicts, as ``to_dict()`` gives them), as JSON-able data; ``None``
        (this default) where the mode has no audit."""
        return None

    @classmethod
    def report_sections(cls, audit: Mapping[str, Any]) -> list[Section]:
        """The report of an :meth:`audit` (or its JSON read back) as sections of plain data. This default shows
        each field of the audit in one table."""
        found = fields_section(audit, id="audit", title="Audit")
        return [] if found is None else [found]

    @classmethod
    def report_facts(cls, audit: Mapping[str, Any]) -> list[tuple[str, str]]:
        """Lines (name, text) for the report's summary, after the mode and the run's details; default none."""
        return []


# -- rules: shortcuts before the judge ------------------------------------------------------------------

RULE_MODES = ("score", "criteria", "checklist")
"""The built-in modes that take rules."""


def rules_option(given: object) -> tuple[Rule, ...]:
    """A mode's ``rules`` option as rules: :class:`Rule` objects, or mappings read as a suite's rules."""
    return parse_rules(given, None)


def rule_label(rule: Rule, labels: Sequence[str], index: int, what: str) -> str:
    """``rule``'s label as one of ``labels`` (case-insensitively where it is not exactly one), else an
    :class:`InputError` naming the rule's field; ``what`` says whose labels they are."""
    if rule.label in labels:
        return rule.label
    folded = [lab for lab in labels if lab.casefold() == rule.label.casefold()]
    if len(folded) == 1:
        return folded[0]
    raise InputError(f"{rule.label!r} is not a label of {what} ({', '.join(labels)})", field=f"rules[{index}].label")


def point_mass(labels: Sequence[str], label: str) -> list[float]:
    """The distribution a rule gives: all of its mass on ``label``."""
    return [1.0 if lab == label else 0.0 for lab in labels]


def ruled(task: Task, items: Sequence[Item]) -> tuple[list[Item], list[list[Rule | None]]]:
    """``items`` less the responses a rule of ``task`` fires on (items left with none are dropped), and per
    item and response the rule that fired (``None``: judged)."""
    rules = task.rule_list()
    if not rules:
        return list(items), [[None] * len(item.responses) for item in items]
    fired = [[first_rule(rules, item, r) for r in item.responses] for item in items]
    rest: list[Item] = []
    for item, hits in zip(items, fired):
        if all(h is None for h in hits):
            rest.append(item)
            continue
        keep = tuple(r for r, h in zip(item.responses, hits) if h is None)
        if keep:
            rest.append(replace(item, responses=keep, pairs=None))
    return rest, fired


PLUGIN_ORIGINS: dict[str, str] = {}
"""Where each mode loaded from an entry point came from (``mode plug-in 'name' (module:object from dist
version)``), by mode name: what an error raised by its code names."""


def run_task(task: Task, items: Sequence[Item], ask: Asking) -> Iterator[RecordBase]:
    """``task.run`` on one chunk of checked ``items``, its rules first: a response a rule fires on gets the
    rule's record (no question, no store look-up, no model call), the rest are judged; records in input order.

    A plug-in mode's code that calls ``sys.exit`` or raises a ``BaseException`` of its own while judging stops
    the run with a :class:`~trustjudge.errors.TrustJudgeError` naming the plug-in, never a silent exit (every
    stored judgment stays: the same run resumes); Ctrl-C stays Ctrl-C, and under a built-in mode a
    ``BaseException`` (the process dying) passes as it is. A backend that stops the run so
    (:mod:`trustjudge.engine._guard`) is named with the item(s) it was judging."""
    records = _run_task(task, items, ask)
    while True:
        try:
            record = next(records)
        except StopIteration:
            return
        except BackendStopped as exc:
            raise exc.naming(asked_by(task, items, ask.fmt, exc.prompts)) from exc.__cause__
        except (Exception, KeyboardInterrupt, GeneratorExit):
            raise
        except BaseException as exc:
            if task.kind not in PLUGIN_ORIGINS:  # a built-in mode's: the process dying, as it was
                raise
            what = PLUGIN_ORIGINS[task.kind]
            how = f"called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else \
                f"raised {type(exc).__name__}: {exc}"
            raise TrustJudgeError(f"{what} {how} while judging: the run is stopped (every judgment already made is "
                                  "in the store: fix the mode and run the same command to resume, asking none of "
                                  "them again)") from None
        yield record


def asked_by(task: Task, items: Sequence[Item], fmt: Format, prompts: Sequence[str]) -> list[str]:
    """The ids of ``items`` whose questions under ``task`` begin one of ``prompts`` (a ``cot`` label prompt
    continues its question's after the critique), else of every item (the batch came from one of them)."""
    found: list[str] = []
    for item in items:
        try:
            heads = [q.prompt for q in task.questions(item, fmt) if isinstance(q, Question)]
        except Exception:  # a task that asks otherwise: named with the others
            continue
        if item.id not in found and any(p.startswith(h) for p in prompts for h in heads):
            found.append(item.id)
    return found or list(dict.fromkeys(item.id for item in items))


def _run_task(task: Task, items: Sequence[Item], ask: Asking) -> Iterator[RecordBase]:
    if not task.rule_list():
        yield from task.run(items, ask)
        return
    rest, fired = ruled(task, items)
    judged = iter(task.run(rest, ask) if rest else ())
    for item, hits in zip(items, fired):
        for r, rule in zip(item.responses, hits):
            yield task.rule_record(item, r, rule, ask.judge) if rule is not None else next(judged)


def with_turns(records: Iterable[RecordBase], items: Sequence[Item]) -> Iterator[RecordBase]:
    """``records`` of ``items``, each about a response given as turns stamped with the digest of its turns
    (``turns_sha256``; a pair's ``first_turns_sha256`` / ``second_turns_sha256``): the record says what was
    judged. Records of text responses pass unchanged."""
    digests = {(item.id, r.id): turns_digest(r.turns) for item in items for r in item.responses
               if r.turns is not None}
    if not digests:
        yield from records
        return
    for record in records:
        if isinstance(record, ResponseHeader):
            record.turns_sha256 = digests.get((record.item_id, record.response_id))
        elif isinstance(record, PairHeader):
            record.first_turns_sha256 = digests.get((record.item_id, record.first_id))
            record.second_turns_sha256 = digests.get((record.item_id, record.second_id))
        yield record


def _wmean(values: Sequence[float], weights: Sequence[float]) -> float:
    """The weighted mean (``_aggregates.weighted_aggregate`` without variances)."""
    return A.weighted_aggregate(values, [0.0] * len(values), weights).mean


def check_item(task: Task, item: Item, file: str | None, text_only: str | None = None) -> None:
    """``task.check(item)``, its error naming the item (and ``file``, where the task could not); ``text_only``:
    the name of a judge that reads text only, which refuses an item with images before any call."""
    if text_only is not None and item.has_images:
        where = f" (line {item.line})" if item.line is not None else ""
        raise ConfigError(f"the judge {text_only} reads text only, but item {item.id!r}{where} has images: judge it "
                          "with a vision judge (an OpenAI-compatible vision server, or hf/ with an image-text-to-text "
                          "model folder)")
    try:
        task.check(item)
    except InputError as exc:
        raise InputError(f"item {item.id!r} {exc.reason}", file=exc.file or file, line=exc.line,
                         field=exc.field) from None



# -- criteria (rubrics) ------------------------------------------------------------------------------

PARTIAL = "unscored_criteria"
"""Why a criteria or checklist record has no aggregate: one of its parts is unscored."""


def _require_criteria(criteria: tuple[Criterion, ...], item: Item) -> None:
    if not criteria:
        raise InputError("has no criteria, and no suite gives any (add \"criteria\" to the item or pass a "
                         "suite file)", file=None, line=item.line, field="criteria")


def criterion_text(c: Criterion) -> str:
    """How a criterion reads in the prompt: name, description and, where given, what each level means."""
    text = f"{c.name}: {c.description}"
    if c.levels:
        names = c.labels or tuple(str(v) for v in c.level_values())
        text += "\nLevels:\n" + "\n".join(f"{n}: {desc}" for n, desc in zip(names, c.levels))
    return text


class VerifiedCalibration:
    """The calibration hooks of a task whose verdicts are over its ``labels`` (a label set) and whose
    calibration holds for its verification template (``templates[1]``, else the packaged one)."""

    labels: Any
    templates: Any
    kind: ClassVar[str]

    def calibration_prompt(self) -> str:
        from ._prompts import VERIFY_FIELDS, read_template
        return self.templates[1] if self.templates is not None else read_template(None, "verify.txt",
                                                                                   VERIFY_FIELDS).template

    def check_calibration(self, calibration: Any) -> None:
        from ..audit._trust import check_classes
        check_classes(self.kind, calibration, self.labels.labels)
