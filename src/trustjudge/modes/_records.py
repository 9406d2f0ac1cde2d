"""The records judging produces, one definition each: the library returns them, the CLI writes their
``to_dict()`` as JSON lines, and the service's schema is derived from these classes.

Every record starts with the same id header (:class:`ResponseHeader` or :class:`PairHeader`, both a
:class:`RecordBase`) and serializes through one function, :func:`to_json`: the fields in their
declaration order (``dataclasses.fields``), a ``None`` written as ``null`` except in the fields marked
:func:`optional` (left out when ``None``), containers copied, nested results serialized the same way. So
the declaration order *is* the JSON key order of stored and exported records (a test pins it); a field
that must sit elsewhere in the JSON than among the constructor's positional arguments is keyword-only.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ConfigDict, TypeAdapter

_SCHEMA = ConfigDict(use_attribute_docstrings=True)

_OMIT = "omit_none"


def optional(*, kw_only: bool = False) -> Any:
    """A field that defaults to ``None`` and is left out of the JSON when ``None``."""
    return field(default=None, metadata={_OMIT: True}, kw_only=kw_only)


def _copy(value: Any) -> Any:
    """A field's value as JSON whatever its type: containers copied, dataclasses serialized."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if hasattr(type(value), "__dataclass_fields__"):
        return to_json(value)
    return value


def _is_dataclass_type(t: Any) -> bool:
    return isinstance(t, type) and dataclasses.is_dataclass(t)


def _expression(hint: Any, value: str) -> str:
    """Python source that turns ``value`` (a field's value, not None) of type ``hint`` into JSON."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _expression(args[0], value) if len(args) == 1 else f"_copy({value})"
    if origin is dict:
        return f"dict({value})"
    if origin is list:
        inner = args[0] if args else Any
        if typing.get_origin(inner) is dict:
            return f"[dict(x) for x in {value}]"
        if _is_dataclass_type(inner):
            return f"[_to_json(x) for x in {value}]"
        if inner in (str, int, float, bool):
            return f"list({value})"
        return f"_copy({value})"
    if _is_dataclass_type(hint):
        return f"_to_json({value})"
    if hint in (str, int, float, bool):
        return value
    return f"_copy({value})"


_SERIALIZERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _compile(cls: type) -> Callable[[Any], dict[str, Any]]:
    """A serializer written for ``cls``: one dict display in field order, then the optional fields.

    Generated once per class, the way ``dataclasses`` writes ``__init__``: about 4x faster than walking the
    fields at run time (1 us against 4 us a score record), which re-aggregating large stores pays per record."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # a class whose annotations do not resolve here: every value goes through _copy
        hints = {}
    lines = ["def serialize(r):", "    out = {"]
    tail: list[str] = []
    for f in dataclasses.fields(cls):
        expr = _expression(hints.get(f.name, Any), "v")
        if f.metadata.get(_OMIT):
            tail += [f"    v = r.{f.name}", "    if v is not None:", f"        out[{f.name!r}] = {expr}"]
        elif tail:  # a required field after an optional one: keep declaration order
            tail += [f"    v = r.{f.name}", f"    out[{f.name!r}] = None if v is None else {expr}"]
        elif expr == "v":
            lines.append(f"        {f.name!r}: r.{f.name},")
        else:
            lines.append(f"        {f.name!r}: None if (v := r.{f.name}) is None else {expr},")
    lines += ["    }", *tail, "    return out"]
    scope: dict[str, Any] = {"_copy": _copy, "_to_json": to_json}
    exec("\n".join(lines), scope)  # exec on purpose: the source is built above from field names and fixed templates
    serialize: Callable[[Any], dict[str, Any]] = scope["serialize"]
    return serialize


def to_json(record: Any) -> dict[str, Any]:
    """A record (or a nested result) as a JSON object: fields in declaration order, ``None`` as ``null``
    except in :func:`optional` fields (left out), containers copied (a field typed ``dict``/``list`` is
    copied one level, a nested dataclass serialized the same way).

    Not ``dataclasses.asdict``, which deep-copies every value: that copy dominated re-aggregation time (60%
    of it, pairwise)."""
    cls = type(record)
    serialize = _SERIALIZERS.get(cls)
    if serialize is None:
        serialize = _SERIALIZERS[cls] = _compile(cls)
    return serialize(record)


R = TypeVar("R", bound="RecordBase")


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type) -> TypeAdapter[Any]:
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


@dataclass
class RecordBase:
    """What every record shares: the judged item's id first, and one serializer both ways."""

    __pydantic_config__ = _SCHEMA

    item_id: str

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON (:func:`to_json`): what the CLI writes, the service returns and the store exports."""
        return to_json(self)

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        """The record from its :meth:`to_dict` (or a written JSON line), validated against its fields."""
        renamed = "method" in data and "label_method" not in data
        if renamed and "label_method" in {f.name for f in dataclasses.fields(cls)}:  # written before the rename
            data = {("label_method" if k == "method" else k): v for k, v in data.items()}
        record: R = _adapter(cls).validate_python(data)
        return record


@dataclass
class ResponseHeader(RecordBase):
    """The id header of a record about one response."""

    response_id: str
    system: str | None
    judge: str
    turns_sha256: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """A response given as turns: the digest of its turns (``sha256:`` and hex), left out for a text response."""


@dataclass
class PairHeader(RecordBase):
    """The id header of a record about one pair of responses (first as given, second as given)."""

    first_id: str
    second_id: str
    judge: str
    first_turns_sha256: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """The first response given as turns: the digest of its turns; left out for a text response."""
    second_turns_sha256: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """The second response given as turns: the digest of its turns; left out for a text response."""


@dataclass
class ScoreRecord(ResponseHeader):
    """One response's scores under every method (all ``None`` when unscored)."""

    protocol: str
    scale: int
    scores: dict[str, float | None]
    entropy: float | None
    label_mass: float | None
    label_method: str | None = field(default=None, kw_only=True)
    """How the label distribution was read: ``exact`` (every label teacher-forced), ``top_k`` (from the
    server's top-k log-probabilities, the label trie walked: labels outside them count 0) or ``top_k_first``
    (a chat answer's top-k at the label's first position); ``None`` when there was none. (Records written
    before the field was renamed call it ``method``; :meth:`RecordBase.from_dict` reads both.)"""
    api: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """The HTTP API the labels came through (``completions`` or ``chat``); absent for an in-process judge."""
    unscored: str | None
    human_score: float | None = None
    critique: str | None = optional()
    distribution: dict[str, float] | None = optional()
    closing: str | None = optional()
    """``needed`` when labels were read without the closing bracket (``Judge(closing=...)``); else absent."""
    scale_min: int | None = optional()
    """The scale's bottom when it is not 1 (``scale="0-5"``: 0, with ``scale`` 5); absent on a 1-based scale."""
    rule: str | None = optional(kw_only=True)
    """The id of the rule that gave this record its verdict with no model call (a point mass on the rule's
    label); absent where the judge was asked."""
    samples: int | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """``label_method: sampled`` (a judge named with ``labels=sampled&samples=N``): the N answers the distribution
    was estimated from; absent otherwise."""
    score_se: float | None = optional(kw_only=True)
    """``label_method: sampled``: the Monte-Carlo standard error of the expected score (``scores.expected``) from the
    answers that wrote a label, sqrt(variance / n); absent otherwise, and with fewer than 2 such answers."""


@dataclass
class CompareRecord(PairHeader):
    """One pair's verdict under every aggregation method, from both presentation orders."""

    protocol: str
    verdicts: dict[str, str | None]
    probabilities: dict[str, float] | None
    """Likelihood aggregation's combined probabilities, renormalised: first wins / second wins / tie."""
    orders: list[dict[str, Any]]
    label_method: str | None = field(default=None, kw_only=True)
    """``exact`` when both orders' labels were read exactly, else the top-k method of either (``top_k``, or
    ``top_k_first`` when either order had only a chat answer's first position; each order says which),
    ``None`` when neither was read."""
    api: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """The HTTP API the labels came through (``completions`` or ``chat``); absent for an in-process judge."""
    samples: int | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """``label_method: sampled``: the N answers each order's verdict was estimated from; absent otherwise."""
    probabilities_se: dict[str, float] | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """``label_method: sampled``: the Monte-Carlo standard error of each of :attr:`probabilities` (first,
    second, tie), the labelled answers of each order taken as given; each order's ``se`` is that of its own
    shares (``A``, ``B``, ``C``). Absent otherwise."""
    unscored: str | None
    ppl_source: str
    human: str | None = None
    annotators: list[str] = field(default_factory=list)
    first_system: str | None = None
    second_system: str | None = None
    closing: str | None = optional()
    """As :attr:`ScoreRecord.closing`."""
    labels: dict[str, str] | None = optional()
    """Verdict labels of the user's choosing (``compare(labels=...)``): each label and the preference it stands
    for (first, second, tie; first: the response shown as A). Absent with the default A/B/C. Each order then
    keeps every label's probability under ``labels`` (its A/B/C: those summed per preference, as shown)."""
    label_probabilities: dict[str, float] | None = optional()
    """With :attr:`labels`: each label's probability over both orders, read as the pair is given (the first
    response as A; the second order's labels mirrored), renormalised."""
    label_verdict: str | None = optional()
    """With :attr:`labels`: the most probable label of :attr:`label_probabilities`."""


@dataclass
class CriterionResult:
    """One criterion's judgment of one response."""

    __pydantic_config__ = _SCHEMA

    name: str
    weight: float
    points: int
    """The top of the criterion's scale (1..points unless :attr:`scale_min` says otherwise): its number of
    levels, its highest level's value, or the task's scale."""
    scores: dict[str, float | None]
    """Every scoring method (discrete, geval, expected, trustjudge); all null when unscored."""
    sd: float | None
    """Standard deviation of the score under the judge's renormalised label distribution."""
    entropy: float | None
    label_mass: float | None
    unscored: str | None
    human: float | None = None
    critique: str | None = optional()
    distribution: dict[str, float] | None = optional()
    scale_min: int | None = optional()
    """The bottom of the criterion's scale when it is not 1 (levels from 0, a 0-3 scale); else absent."""
    labels: dict[str, int] | None = optional()
    """A labelled scale's labels (what the judge answered) and the value each stands for; else absent."""
    score_se: float | None = optional()
    """``label_method: sampled``: the Monte-Carlo standard error of the expected score, as
    :attr:`ScoreRecord.score_se`; absent otherwise."""


@dataclass
class GeneratedCriterion:
    """One criterion the judge generated for an item: its name, normalised weight and description."""

    __pydantic_config__ = _SCHEMA

    name: str
    weight: float
    """Its share of the aggregate: the generated weights normalised to sum 1."""
    description: str


@dataclass
class CriteriaRecord(ResponseHeader):
    """One response judged on every criterion, with the weighted aggregate."""

    protocol: str
    criteria: list[CriterionResult]
    aggregate: dict[str, float | None]
    """Weighted mean of the criteria's scores, per method, on ``scale`` (null when unscored)."""
    spread: float | None
    """Standard deviation of the ``expected`` aggregate, the criteria taken as independent."""
    scale: list[float]
    """The aggregate's range: the criteria's common scale [low, top] ([1, N] on 1-based scales), or [0, 1] when
    their scales differ (each criterion's scores mapped onto it, low to 0 and top to 1)."""
    label_method: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """How its labels were read, as :attr:`ScoreRecord.label_method` (or ``sampled``); the least exact method
    of its labels where they differ; absent where no label was read."""
    api: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """The HTTP API the labels came through (``completions`` or ``chat``); absent for an in-process judge."""
    samples: int | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """``label_method: sampled``: the N answers each label distribution was estimated from; absent otherwise."""
    unscored: str | None
    """Why there is no aggregate: the response is empty, or a criterion is unscored (without reweighting)."""
    reweighted: list[str] = field(default_factory=list)
    """Criteria left out of the aggregate (unscored) when reweighting was asked; the weights of the rest
    were renormalised."""
    human: float | None = None
    """The weighted mean of the human per-criterion scores, where every criterion has one."""
    human_score: float | None = None
    """The response's holistic human score, where given."""
    generated_criteria: list[GeneratedCriterion] | None = optional()
    """The criteria the judge generated for the item (``generate_criteria``), weights normalised to sum 1;
    absent where the criteria were given."""
    generation: str | None = optional()
    """The judge's raw criteria generation text (kept above all when it could not be parsed: ``unscored`` is
    then ``unparseable_criteria``)."""
    rule: str | None = optional(kw_only=True)
    """The id of the rule that gave this record its verdict with no model call (a point mass on the rule's
    label); absent where the judge was asked."""


@dataclass
class CheckResult:
    """One check's judgment of one response."""

    __pydantic_config__ = _SCHEMA

    id: str
    text: str
    weight: float
    probabilities: dict[str, float] | None
    """Each label's probability, renormalised over the label set; null when unscored."""
    value: float | None
    """Expected value under ``probabilities`` (YES = 1, NO = 0 by default)."""
    p_pass: float | None
    """Probability of the passing label (the highest-valued one: YES)."""
    label_mass: float | None
    unscored: str | None
    human: float | None = None
    """The human label's value, where given."""
    critique: str | None = optional()
    p_pass_se: float | None = optional()
    """``label_method: sampled``: the Monte-Carlo standard error of :attr:`p_pass`, sqrt(p (1 - p) / n) over the
    n answers that wrote a label; absent otherwise."""


@dataclass
class ChecklistRecord(ResponseHeader):
    """One response judged on every check of its checklist."""

    protocol: str
    labels: list[str]
    checks: list[CheckResult]
    satisfaction: float | None
    """Expected weighted satisfaction: the weighted mean of the checks' expected values."""
    p_all: float | None
    """Probability that every check passes, the checks taken as independent."""
    passed: list[float] | None
    """Distribution of the number of passed checks (entry k: P(k pass)), exact Poisson-binomial under the
    same independence assumption."""
    expected_passed: float | None
    label_method: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """How its labels were read, as :attr:`ScoreRecord.label_method` (or ``sampled``); the least exact method
    of its labels where they differ; absent where no label was read."""
    api: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """The HTTP API the labels came through (``completions`` or ``chat``); absent for an in-process judge."""
    samples: int | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """``label_method: sampled``: the N answers each label distribution was estimated from; absent otherwise."""
    unscored: str | None
    reweighted: list[str] = field(default_factory=list)
    """Checks left out (unscored) when reweighting was asked."""
    rule: str | None = optional(kw_only=True)
    """The id of the rule that gave this record its verdict with no model call (a point mass on the rule's
    label); absent where the judge was asked."""


@dataclass
class CriterionVerdict:
    """One criterion's verdict on a pair, from both presentation orders."""

    __pydantic_config__ = _SCHEMA

    name: str
    weight: float
    probabilities: dict[str, float] | None
    """Likelihood aggregation of the two orders, renormalised: first wins / second wins / tie."""
    verdict: str | None
    """The most probable of ``probabilities`` (first, second or tie)."""
    margin: float | None
    """Expected margin in favour of the first response: graded, the mean of +2 (much better) .. -2 under the
    combined 5-way distribution; otherwise P(first) - P(second)."""
    orders: list[dict[str, Any]]
    """Each order's raw label probabilities (labels as shown in that order) and unscored reason."""
    unscored: str | None
    graded: dict[str, float] | None = optional()
    """Graded verdicts only: the combined 5-way distribution, first's view (``first>>second`` .. ``second>>first``)."""
    label_probabilities: dict[str, float] | None = optional()
    """Pairwise labels of your own (``labels``): each label's probability over both orders (the second's mirrored,
    as first's view), so that AutoFigure's both good and both bad stay apart."""
    probabilities_se: dict[str, float] | None = optional()
    """``label_method: sampled`` (not graded): the Monte-Carlo standard error of each of :attr:`probabilities`, as
    :attr:`CompareRecord.probabilities_se`; absent otherwise."""


@dataclass
class CriteriaCompareRecord(PairHeader):
    """One pair judged on every criterion in both orders, with the weighted aggregate."""

    protocol: str
    criteria: list[CriterionVerdict]
    aggregate: dict[str, float] | None
    """Weighted mean of the criteria's probabilities (first / second / tie); null when unscored."""
    margin: float | None
    """Weighted mean of the criteria's margins."""
    verdict: str | None
    label_method: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """How its labels were read, as :attr:`ScoreRecord.label_method` (or ``sampled``); the least exact method
    of its labels where they differ; absent where no label was read."""
    api: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """The HTTP API the labels came through (``completions`` or ``chat``); absent for an in-process judge."""
    samples: int | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """``label_method: sampled``: the N answers each label distribution was estimated from; absent otherwise."""
    unscored: str | None
    reweighted: list[str] = field(default_factory=list)
    human: str | None = None
    first_system: str | None = None
    second_system: str | None = None


@dataclass
class ClaimResult:
    """One claim of a response and its verification against the evidence."""

    __pydantic_config__ = _SCHEMA

    text: str
    probabilities: dict[str, float] | None
    """Each verification label's probability, renormalised over the labels; null when unscored."""
    p_supported: float | None
    """P(SUPPORTED), renormalised over the labels other than UNKNOWN (when UNKNOWN is asked)."""
    unknown: float | None = optional()
    """P(UNKNOWN): the evidence says nothing about the claim (only when UNKNOWN is asked)."""
    label_mass: float | None = None
    unscored: str | None = None
    human: str | None = optional()
    source: str | None = optional()
    """The id of the item's source the claim cites: it was verified against that source's text alone."""
    p_supported_se: float | None = optional()
    """``label_method: sampled``: the Monte-Carlo standard error of :attr:`p_supported`, sqrt(p (1 - p) / n) over
    the n answers that wrote a label other than UNKNOWN; absent otherwise."""


@dataclass
class ClaimsRecord(ResponseHeader):
    """One response's claims: extraction, verification, and (against gold claims) matching."""

    source: str
    """Where the claims came from: ``given`` (the input) or ``extracted`` (a stored judge generation)."""
    claims: list[ClaimResult]
    precision: float | None
    """Expected factual precision: the mean of P(supported) over the scored claims."""
    supported: list[float] | None
    """Distribution of the number of supported claims (entry k: P(k)), exact Poisson-binomial with the claims
    taken as independent."""
    expected_supported: float | None
    f1_at_k: dict[str, Any] | None
    """E[precision], E[recall@K] and E[F1@K] under ``supported`` (exact, not F1 of the expectations)."""
    unknown_mass: float | None
    """Mean P(UNKNOWN) over the claims: how much was not decidable from the evidence (apart, not in precision)."""
    matching: dict[str, Any] | None
    """Against gold claims: P(match) per pair, coverage per gold claim (``coverage_rule``: noisy-OR or max),
    expected recall and precision, the one-to-one assignment's expected F1, and the greedy prediction-order
    rule for comparison."""
    label_method: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """How its labels were read, as :attr:`ScoreRecord.label_method` (or ``sampled``); the least exact method
    of its labels where they differ; absent where no label was read."""
    api: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """The HTTP API the labels came through (``completions`` or ``chat``); absent for an in-process judge."""
    samples: int | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """``label_method: sampled``: the N answers each label distribution was estimated from; absent otherwise."""
    unscored: str | None
    extraction: str | None = optional()
    """The judge's raw extraction text (when the claims were extracted)."""
    verification: str | None = optional()
    """``skipped`` where the claims were not verified (match-only: each claim is unscored ``not_verified``)."""
    cited: int | None = optional()
    """How many scored claims cite a source (left out where none does)."""
    citation_accuracy: float | None = optional()
    """The expected share of cited claims that their cited source supports: mean P(supported) over them."""


Record = ScoreRecord | CompareRecord | CriteriaRecord | ChecklistRecord | CriteriaCompareRecord | ClaimsRecord
