"""The ``criteria`` mode: each response judged on each named criterion, with a weighted aggregate.

The criteria are the item's, else the suite's, else (``generate_criteria=N``) generated per item by the judge:
one stored generation per item (keyed by the model, the prompt and the seed, like a claim extraction: a rerun
makes no call), asking for N lines ``- NAME | WEIGHT | DESCRIPTION`` from the item's question, context and
profile (a persona), the weights normalised to sum 1. A generation that cannot be parsed leaves the item's
records unscored (``unparseable_criteria``, or ``truncated``) with the raw text kept; the generated criteria
are in every record of the item.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..audit._readers import LevelUnits
from ..backends import GenerateRequest
from ..engine import _aggregates as A
from ..engine import _scoring as S
from ..engine._asking import Question, Sampling
from ..engine._engine import EMPTY_RESPONSE, TRUNCATED, Outcome
from ..errors import BackendError, ConfigError, InputError
from ..io._items import Criterion, Item, Response
from ..io._rules import Rule
from . import _audits
from ._base import (
    PARTIAL,
    Asking,
    Cost,
    Format,
    _prefix,
    _require_criteria,
    _wmean,
    by_responses,
    criterion_text,
    grounding,
    judged_empty,
    pictures,
    point_mass,
    rule_label,
    rules_option,
    shared_bytes,
    text_bytes,
)
from ._prompts import (
    CRITERION_FIELDS,
    DEFAULT_TAGS,
    SCALE_METAVAR,
    SCORE_MARKER,
    Prompts,
    Protocol,
    Scale,
    _identifiers,
    quote,
    scale_text,
    tag_pattern,
)
from ._prompts import scale as make_scale
from ._provenance import score_se, stamp
from ._records import (
    CriteriaRecord,
    CriterionResult,
    GeneratedCriterion,
)
from ._registry import (
    KEEP_DISTRIBUTION_HELP,
    MAX_EXTRACTION_TOKENS,
    PROTOCOL_HELP,
    RULES_HELP,
    JudgeSettings,
    Mode,
    TemplateSpec,
    keep_distribution,
    option,
)
from ._stored import StoredJudgments
from ._summaries import CRITERIA_SUMMARY

POSITION = 30
"""Where the mode comes among the built-in ones (listings, help)."""

UNPARSEABLE_CRITERIA = "unparseable_criteria"
"""Why an item's records are unscored when its criteria generation gives no ``NAME | WEIGHT | ...`` line."""
NOT_GENERATED = "not_generated"
"""The unscored reason of a response whose item's criteria are to be generated, in :meth:`CriteriaTask.records`
(which sees only what is known before generation); :meth:`CriteriaTask.run` generates them."""
MAX_GENERATED = 20
"""The most criteria one generation may be asked for."""
GENERATE_FIELDS = frozenset({"question", "n"})
GENERATE_OPTIONAL = frozenset({"focus", "context_block", "profile_block"})
END = "END"
_END_LINE = re.compile(r"^\s*END\s*$", re.MULTILINE)
_GEN_LINE = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])?\s*(?P<name>[^|\n]*?)\s*\|\s*(?P<weight>\d+(?:\.\d*)?|\.\d+)\s*%?"
                       r"\s*(?:\|\s*(?P<desc>[^\n]*?))?\s*$")


def parse_generated_criteria(text: str, finish_reason: str, n: int) -> tuple[Criterion, ...] | str:
    """The criteria of a generation (at most the first ``n`` lines ``NAME | WEIGHT | DESCRIPTION``, weights
    normalised to sum 1, repeated names numbered), or why there are none (an unscored reason)."""
    if finish_reason == "length":
        return TRUNCATED
    body = _END_LINE.split(text, 1)[0]
    found: list[tuple[str, float, str]] = []
    for line in body.splitlines():
        m = _GEN_LINE.match(line)
        if m is None:
            continue
        name = m.group("name").strip().strip("*_`\"' ").strip()
        weight = float(m.group("weight"))
        if not name or not math.isfinite(weight) or weight < 0:
            continue
        found.append((name, weight, (m.group("desc") or "").strip() or name))
        if len(found) == n:
            break
    total = sum(w for _, w, _ in found)
    if not found or total <= 0:
        return UNPARSEABLE_CRITERIA
    seen: dict[str, int] = {}
    out: list[Criterion] = []
    for name, weight, desc in found:
        seen[name] = seen.get(name, 0) + 1
        unique = name if seen[name] == 1 else f"{name} ({seen[name]})"
        out.append(Criterion(unique, desc, weight / total))
    return tuple(out)


def generation_template(given: str | Path | None) -> string.Template:
    """The criteria generation template: a user's (a path, or the text itself where it holds a newline or a
    ``$``), else the packaged one; it must use ``${question}`` and ``${n}`` and may use ``${focus}``,
    ``${context_block}`` and ``${profile_block}``."""
    what = "the criteria generation template"
    if given is None:
        from importlib.resources import files

        text = files("trustjudge").joinpath("templates").joinpath("generate_criteria.txt").read_text("utf-8")
    elif isinstance(given, str) and ("\n" in given or "$" in given):
        text = given
    else:
        try:
            text = Path(given).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {what} {given}: {exc}") from exc
        what = f"{what} {given}"
    template = string.Template(text)
    names, valid = _identifiers(template)
    if not valid:
        raise ConfigError(f"{what}: a '$' that is not a field; write '$$' for a dollar sign")
    missing, unknown = GENERATE_FIELDS - names, names - GENERATE_FIELDS - GENERATE_OPTIONAL
    if missing:
        raise ConfigError(f"{what} lacks the field(s) {', '.join('${' + m + '}' for m in sorted(missing))}")
    if unknown:
        raise ConfigError(f"{what} uses unknown field(s) {', '.join(sorted(unknown))}")
    return template


def criterion_scale(c: Criterion, default: Scale) -> Scale:
    """A criterion's scale: its levels with their labels and values (a labelled scale), or their values
    (1..N unless it gives others), else ``default``."""
    if not c.levels:
        return default
    values = c.level_values()
    if c.labels:
        return Scale.labelled(list(zip(c.labels, values)))
    if values == tuple(range(values[0], values[0] + len(values))):
        return make_scale(values[-1], values[0])
    return Scale.labelled([(str(v), v) for v in values])  # numbered levels with gaps: their numbers as labels


@dataclass(frozen=True)
class CriteriaTask(_audits.CriteriaHooks):
    """Each response judged on each named criterion (one prompt per pair, ending at the score marker),
    then a weighted aggregate. All criteria of a response share the prompt up to the criterion."""

    kind: ClassVar[str] = "criteria"
    prompts: Prompts
    scale: Scale
    """The scale of criteria without level descriptions."""
    protocol: Protocol = "direct"
    criteria: tuple[Criterion, ...] = ()
    """The suite's criteria: used for items that carry none."""
    reweight: bool = False
    """Aggregate over the scored criteria when some are unscored (renormalising the weights); the record
    lists the criteria left out. Without it an unscored criterion leaves the aggregate unscored."""
    keep_distribution: bool = False
    generate: int | None = None
    """Generate this many criteria per item that carries none (one stored generation per item)."""
    focus: str = ""
    """What the generated criteria are to assess (``for ...`` in the generation prompt); empty: the whole task."""
    generation_tokens: int = 512
    """Longest criteria generation (a longer one is unscored: truncated)."""
    generation_prompt: string.Template | None = None
    """The criteria generation template (:func:`generation_template`); ``None``: the packaged one."""
    rules: tuple[Rule, ...] = ()
    """Shortcuts checked before the judge, in order: each rule's label is given on every criterion (a label
    of each criterion's scale)."""

    def calibration_prompt(self) -> str:
        return self.prompts.criterion.template

    def __post_init__(self) -> None:
        for i, rule in enumerate(self.rules):
            for c in self.criteria:
                rule_label(rule, self.scale_of(c).labels, i, f"criterion {c.name!r}")
            if not self.criteria:
                rule_label(rule, self.scale.labels, i, f"the scale {self.scale.low}-{self.scale.points}")
        if self.generate is not None:  # what a plan (--dry-run) leaves out, for this task only
            object.__setattr__(self, "plan_note", "criteria generations, and the questions of the criteria they "
                                                  "give: items whose criteria are generated plan none")

    def criteria_of(self, item: Item) -> tuple[Criterion, ...]:
        return item.criteria or self.criteria

    def generates(self, item: Item) -> bool:
        """Whether ``item``'s criteria are generated (it carries none and generation is on)."""
        return self.generate is not None and not self.criteria_of(item)

    def _k(self, item: Item) -> int:
        """How many criteria ``item`` is judged on (at most, where they are generated)."""
        return int(self.generate or 0) if self.generates(item) else len(self.criteria_of(item))

    def check(self, item: Item) -> None:
        if not self.generates(item):
            _require_criteria(self.criteria_of(item), item)
        if item.criteria and self.rules:
            for i, rule in enumerate(self.rules):
                for k, c in enumerate(item.criteria):
                    try:
                        rule_label(rule, self.scale_of(c).labels, i, f"criterion {c.name!r}")
                    except InputError as exc:
                        raise InputError(f"criterion {c.name!r} cannot take the label of rule {rule.id!r} "
                                         f"({exc.reason})", file=None, line=item.line,
                                         field=f"criteria[{k}]") from None

    def rule_record(self, item: Item, response: Response, rule: Rule, judge: str) -> CriteriaRecord:
        """Every criterion given the rule's label (a point mass), then the aggregate as usual: no model call."""
        criteria = self.criteria_of(item)
        results = []
        for c in criteria:
            sc = self.scale_of(c)
            label = rule_label(rule, sc.labels, 0, f"criterion {c.name!r}")
            probs = point_mass(sc.labels, label)
            value = float(sc.values[sc.labels.index(label)])
            results.append(CriterionResult(c.name, c.weight, sc.points, dict.fromkeys(S.SCORE_METHODS, value), 0.0,
                                           0.0, None, None, (response.human_criteria or {}).get(c.name), None,
                                           dict(zip(sc.labels, probs)), None if sc.low == 1 else sc.low,
                                           dict(zip(sc.labels, sc.values)) if sc.names else None))
        record = self._record(item, response, criteria, results, judge, ruled=True)
        record.rule = rule.id
        return record

    def scale_of(self, c: Criterion) -> Scale:
        """The criterion's scale: its levels (their values, or labels), else the task's scale."""
        return criterion_scale(c, self.scale)

    def points(self, c: Criterion) -> int:
        """The top of the criterion's scale."""
        return self.scale_of(c).points

    def size(self, item: Item) -> int:
        return len(item.responses) * self._k(item)

    def cost(self, item: Item) -> Cost:
        """Where criteria are generated: ``generate`` criteria on the task's scale, their texts not counted,
        and the generation's prompt (question, context, profile) counting its bytes but no labels."""
        if self.generates(item):
            n, k = len(item.responses), self._k(item)
            quoted = (n * k * shared_bytes(item) + k * sum(text_bytes(r.text) for r in item.responses)
                      + text_bytes(item.question) + text_bytes(item.context) + text_bytes(item.profile))
            return Cost(n * k, quoted, n * k * len(self.scale.values))
        criteria = self.criteria_of(item)
        n, k = len(item.responses), len(criteria)
        quoted = (n * k * shared_bytes(item) + k * sum(text_bytes(r.text) for r in item.responses)
                  + n * sum(text_bytes(criterion_text(c)) for c in criteria))
        return Cost(n * k, quoted, n * sum(len(self.scale_of(c).values) for c in criteria))

    def parts(self, item: Item, size: int) -> list[Item]:
        k = self._k(item)
        return by_responses(item, size, lambda r: k)

    def generation(self, item: Item, fmt: Format, sampling: Sampling) -> GenerateRequest:
        """The generation that writes ``item``'s criteria (from its question, context and profile)."""
        template = self.generation_prompt or generation_template(None)
        tags = tag_pattern((*DEFAULT_TAGS, *re.findall(r"<\s*/?\s*([A-Za-z_][\w-]*)", template.template)))
        ctx = f"\n<context>\n{quote(item.context, tags)}\n</context>\n" if item.context else ""
        profile = f"\n<profile>\n{quote(item.profile, tags)}\n</profile>\n" if item.profile else ""
        user = template.substitute(question=quote(item.question, tags), n=str(self.generate),
                                   focus=f" for {self.focus}" if self.focus else "", context_block=ctx,
                                   profile_block=profile)
        return GenerateRequest(fmt(self.prompts.system, user, ""), (END,), self.generation_tokens,
                               sampling.temperature, sampling.seed)

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        """The item's questions; none where its criteria are still to be generated (:meth:`run` does that)."""
        return [] if self.generates(item) else self._questions(item, self.criteria_of(item), fmt)

    def _questions(self, item: Item, criteria: tuple[Criterion, ...], fmt: Format) -> list[Question | str]:
        out: list[Question | str] = []
        g = grounding(item)
        for r in item.responses:  # response-major: a response's criteria share the prompt up to the criterion
            for c in criteria:
                if judged_empty(r):
                    out.append(EMPTY_RESPONSE)
                    continue
                sc = self.scale_of(c)
                user = self.prompts.render_criterion(item.question, r.text, item.context, item.reference,
                                                     criterion_text(c), sc.points,
                                                     self.prompts.score_task(sc, self.protocol), g, sc.low,
                                                     pictures(item, r))
                out.append(Question(fmt(self.prompts.system, user, _prefix(self.protocol, SCORE_MARKER)), sc.labels,
                                    SCORE_MARKER))
        return out

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[CriteriaRecord]:
        """The records from the outcomes of :meth:`questions` (items whose criteria are to be generated give
        ``not_generated`` records)."""
        it = iter(outcomes)
        for item in items:
            yield from self._item_records(item, NOT_GENERATED if self.generates(item) else self.criteria_of(item),
                                          None, it, judge)

    def run(self, items: Sequence[Item], ask: Asking) -> Iterator[CriteriaRecord]:
        """Generate the criteria of the items that need them (stored generations), then judge every response
        on its item's criteria in one go."""
        if self.generate is None:
            yield from super().run(items, ask)  # type: ignore[misc]
            return
        wanted = {i: self.generation(item, ask.fmt, ask.sampling) for i, item in enumerate(items)
                  if self.generates(item)}
        gens = dict(zip(wanted, ask.generate(list(wanted.values())))) if wanted else {}
        plan: list[tuple[Item, tuple[Criterion, ...] | str, str | None]] = []
        questions: list[Question | str] = []
        for i, item in enumerate(items):
            raw: str | None = None
            criteria: tuple[Criterion, ...] | str
            if i not in gens:
                criteria = self.criteria_of(item)
            elif isinstance(gens[i], BackendError):
                criteria = "backend_error"
            else:
                gen = gens[i]
                raw = gen.text  # type: ignore[union-attr]
                criteria = parse_generated_criteria(raw, gen.finish_reason, int(self.generate))  # type: ignore[union-attr]
            if not isinstance(criteria, str):
                questions.extend(self._questions(item, criteria, ask.fmt))
            plan.append((item, criteria, raw))
        it = iter(ask.labels(questions, self.protocol))
        for i, (item, criteria, raw) in enumerate(plan):
            yield from self._item_records(item, criteria, raw if i in gens else None, it, ask.judge,
                                          generated=i in gens)

    def _item_records(self, item: Item, criteria: tuple[Criterion, ...] | str, raw: str | None,
                      outcomes: Iterator[Outcome], judge: str, *, generated: bool = False) -> Iterator[CriteriaRecord]:
        """One item's records: judged on ``criteria``, or unscored for the reason ``criteria`` gives."""
        for r in item.responses:
            if isinstance(criteria, str):
                low, top = self.scale.low, self.scale.points
                yield CriteriaRecord(item.id, r.id, r.system, judge, self.protocol, [],
                                     dict.fromkeys(S.SCORE_METHODS), None, [float(low), float(top)], criteria, [],
                                     None, r.human_score, generation=raw)
                continue
            outs = [next(outcomes) for _ in criteria]
            record = stamp(self._record(item, r, criteria, [self._result(c, o, r) for c, o in zip(criteria, outs)],
                                        judge), outs)
            if generated:
                record.generated_criteria = [GeneratedCriterion(c.name, c.weight, c.description) for c in criteria]
                record.generation = raw
            yield record

    def _result(self, c: Criterion, out: Outcome, r: Response) -> CriterionResult:
        sc = self.scale_of(c)
        human = (r.human_criteria or {}).get(c.name)
        low = None if sc.low == 1 else sc.low
        labels = dict(zip(sc.labels, sc.values)) if sc.names else None
        if out.probs is None or out.unscored is not None:
            return CriterionResult(c.name, c.weight, sc.points, dict.fromkeys(S.SCORE_METHODS), None, None,
                                   out.mass if out.probs is not None else None, out.unscored, human, out.critique,
                                   scale_min=low, labels=labels)
        _mean, var = A.distribution_moments(sc.values, out.probs)
        dist = dict(zip(sc.labels, out.probs)) if self.keep_distribution else None
        scores: dict[str, float | None] = dict(S.score_all(sc.values, out.probs))
        return CriterionResult(c.name, c.weight, sc.points, scores, math.sqrt(var), S.entropy_bits(out.probs),
                               out.mass, None, human, out.critique, dist, low, labels,
                               score_se([float(v) for v in sc.values], out))

    def _record(self, item: Item, r: Response, criteria: tuple[Criterion, ...], results: list[CriterionResult],
                judge: str, *, ruled: bool = False) -> CriteriaRecord:
        ranges = [(1 if res.scale_min is None else res.scale_min, res.points) for res in results]
        common = len(set(ranges)) == 1
        scale = [float(ranges[0][0]), float(ranges[0][1])] if common else [0.0, 1.0]
        span = {id(res): float(hi - lo) for res, (lo, hi) in zip(results, ranges)}
        bottom = {id(res): float(lo) for res, (lo, _) in zip(results, ranges)}

        def norm(x: float, res: CriterionResult) -> float:  # onto the record's scale
            return x if common else (x - bottom[id(res)]) / span[id(res)]

        left_out = [res.name for res in results if res.unscored is not None]
        use = [res for res in results if res.unscored is None]
        empty = bool(item.responses) and judged_empty(r) and not ruled  # a rule judges an empty answer too
        unscored = EMPTY_RESPONSE if empty else (PARTIAL if left_out and (not self.reweight or not use) else None)
        aggregate: dict[str, float | None] = dict.fromkeys(S.SCORE_METHODS)
        spread = None
        if unscored is None:
            weights = [res.weight for res in use]
            if sum(weights) <= 0:
                unscored = PARTIAL
            else:
                for m in S.SCORE_METHODS:
                    vals = [norm(float(res.scores[m] or 0.0), res) for res in use]
                    aggregate[m] = _wmean(vals, weights)
                sds = [(res.sd or 0.0) / (1 if common else span[id(res)]) for res in use]
                means = [norm(float(res.scores["expected"] or 0.0), res) for res in use]
                spread = A.weighted_aggregate(means, [s * s for s in sds], weights).sd
        human = None
        if results and all(res.human is not None for res in results):
            vals = [norm(float(res.human or 0.0), res) for res in results]
            weights = [res.weight for res in results]
            human = _wmean(vals, weights) if sum(weights) > 0 else None
        return CriteriaRecord(item.id, r.id, r.system, judge, self.protocol, results, aggregate, spread, scale,
                              unscored, left_out if self.reweight and unscored is None else [], human, r.human_score)


@dataclass(frozen=True)
class CriteriaOptions:
    criteria: tuple[Criterion, ...] = option((), "Criteria for items that carry none (a suite's).", suite="criteria")
    reweight: bool = option(False, "When a criterion is unscored, aggregate over the rest with renormalised "
                                   "weights (default: the aggregate is unscored).")
    scale: int | str = option(5, "Scale of criteria without level descriptions: a top value (5: 1..5) or an "
                                 "integer range ('0-3').", suite="scale", parse=scale_text,
                              metavar=SCALE_METAVAR)
    scale_min: int | None = option(None, "Bottom of that scale when it is given by its top (0: 0..scale); "
                                         "default 1.")
    protocol: Protocol | None = option(None, PROTOCOL_HELP)
    keep_distribution: bool | None = option(None, KEEP_DISTRIBUTION_HELP, flag="--distribution")
    generate_criteria: int | None = option(None, "Generate N weighted criteria per item that carries none, with "
                                                 "the judge (one stored generation per item, from its question, "
                                                 "context and profile).", ge=1, le=MAX_GENERATED,
                                           flag="--generate")
    criteria_focus: str | None = option(None, "With --generate: what the criteria are to assess (e.g. "
                                              "'how well the report fits the user in the profile').",
                                        flag="--focus")
    rules: tuple[Rule, ...] = option((), RULES_HELP, suite="rules", served=False)
    generation_tokens: int = option(512, "Longest criteria generation (a longer one is unscored: truncated).",
                                    ge=1, le=MAX_EXTRACTION_TOKENS)
    generation_template: str | None = option(None, "With --generate: the generation prompt's template (a path; "
                                                   "fields ${question}, ${n}, optional ${focus}, "
                                                   "${context_block}, ${profile_block}).", served=False)


def build_criteria(j: JudgeSettings, o: CriteriaOptions) -> CriteriaTask:
    generate = o.generate_criteria
    if generate is not None:
        if isinstance(generate, bool) or not isinstance(generate, int) or not 1 <= generate <= MAX_GENERATED:
            raise ConfigError(f"generate_criteria must be a whole number from 1 to {MAX_GENERATED}, got {generate!r}")
        if o.criteria:
            raise ConfigError("generate_criteria and criteria exclude each other: criteria are given or generated "
                              "(an item's own criteria are always used)")
    elif o.criteria_focus or o.generation_template:
        raise ConfigError("criteria_focus and generation_template need generate_criteria")
    if not isinstance(o.generation_tokens, int) or not 1 <= o.generation_tokens <= MAX_EXTRACTION_TOKENS:
        raise ConfigError(f"generation_tokens must be from 1 to {MAX_EXTRACTION_TOKENS}, got {o.generation_tokens!r}")
    prompt = generation_template(o.generation_template) if o.generation_template else None
    rules = rules_option(o.rules)
    if rules and generate is not None:
        raise ConfigError("rules and generate_criteria exclude each other: a rule gives its label on the item's "
                          "criteria, and generated ones are not known before the judge is asked")
    return CriteriaTask(j.prompts, make_scale(o.scale, o.scale_min), o.protocol or j.protocol, tuple(o.criteria),
                        o.reweight, keep_distribution(j, o.keep_distribution), generate,
                        (o.criteria_focus or "").strip(), o.generation_tokens, prompt, rules)


def _stored(task: CriteriaTask, item: Item, fmt: Format, asked: bool) -> Iterator[dict[str, Any]]:
    criteria = task.criteria_of(item)
    if asked:
        task.check(item)
    pairs = [(r, c) for r in item.responses for c in criteria]
    for (r, c), question in zip(pairs, task.questions(item, fmt)):
        yield {"item_id": item.id, "response_id": r.id, "criterion": c.name, "scale": task.points(c),
               "protocol": task.protocol, "question": question}


STORED = StoredJudgments(_stored, lambda e: f"criteria {e['item_id']} / {e['response_id']}: {e['criterion']} "
                                            f"({e['scale']} points, {e['protocol']})", listed=True)
"""``store show``: each response on each criterion (with ``--kind all``, where the item or suite has criteria)."""


def _ranked(items: Sequence[Item], scale: int | str) -> dict[str, Any]:
    """``rank --mode criteria``: rank's ``--scale`` where it is one of criteria's usual tops (else 5)."""
    return {"scale": scale if scale in (5, 10) else 5}


MODE = Mode(
    "criteria", CriteriaTask, CriteriaRecord, CriteriaOptions, build_criteria,
    templates={"criterion": TemplateSpec("criterion.txt", frozenset(CRITERION_FIELDS)),
               "generate_criteria": TemplateSpec("generate_criteria.txt", GENERATE_FIELDS)},
    min_responses=1, summary="Each response judged on each named criterion, with a weighted aggregate.",
    command="criteria", route="/v1/criteria", summary_metrics=CRITERIA_SUMMARY,
    rank_options=_ranked, stored=STORED,
    calibration=LevelUnits("criteria", "human", "human_criteria", "criterion", task_scale=False))
