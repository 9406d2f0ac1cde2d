"""The records judging produces, one definition each: the library returns them, the CLI writes their
``to_dict()`` as JSON lines, and the service's schema is derived from these classes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ConfigDict

_SCHEMA = ConfigDict(use_attribute_docstrings=True)


@dataclass
class ScoreRecord:
    """One response's scores under every method (all ``None`` when unscored)."""

    __pydantic_config__ = _SCHEMA

    item_id: str
    response_id: str
    system: str | None
    judge: str
    protocol: str
    scale: int
    scores: dict[str, float | None]
    entropy: float | None
    label_mass: float | None
    unscored: str | None
    human_score: float | None = None
    critique: str | None = None
    distribution: dict[str, float] | None = None
    closing: str | None = None
    """``needed`` when labels were read without the closing bracket (``Judge(closing=...)``); else absent."""
    method: str | None = None
    """How the label distribution was read: ``exact`` (every label teacher-forced) or ``top_k`` (from the
    server's top-k log-probabilities: labels outside them count 0); ``None`` when there was none."""

    def to_dict(self) -> dict[str, Any]:
        # Built by hand: dataclasses.asdict deep-copies every value, which dominated re-aggregation time.
        out = {f: getattr(self, f) for f in _SCORE_FIELDS}
        out["scores"] = dict(self.scores)
        if self.critique is not None:
            out["critique"] = self.critique
        if self.distribution is not None:
            out["distribution"] = dict(self.distribution)
        if self.closing is not None:
            out["closing"] = self.closing
        return out


_SCORE_FIELDS = ("item_id", "response_id", "system", "judge", "protocol", "scale", "scores", "entropy", "label_mass",
                 "method", "unscored", "human_score")


@dataclass
class CompareRecord:
    """One pair's verdict under every aggregation method, from both presentation orders."""

    __pydantic_config__ = _SCHEMA

    item_id: str
    first_id: str
    second_id: str
    judge: str
    protocol: str
    verdicts: dict[str, str | None]
    probabilities: dict[str, float] | None
    """Likelihood aggregation's combined probabilities, renormalised: first wins / second wins / tie."""
    orders: list[dict[str, Any]]
    unscored: str | None
    ppl_source: str
    human: str | None = None
    annotators: list[str] = field(default_factory=list)
    first_system: str | None = None
    second_system: str | None = None
    closing: str | None = None
    """As :attr:`ScoreRecord.closing`."""
    method: str | None = None
    """``exact`` when both orders' labels were read exactly, ``top_k`` when either came from the top-k
    (each order says which), ``None`` when neither was read."""

    def to_dict(self) -> dict[str, Any]:
        # By hand, like ScoreRecord.to_dict: asdict's deep copy was 60% of pairwise re-aggregation.
        out = {f: getattr(self, f) for f in _COMPARE_FIELDS}
        out["verdicts"] = dict(self.verdicts)
        out["probabilities"] = dict(self.probabilities) if self.probabilities is not None else None
        out["orders"] = [dict(order) for order in self.orders]
        out["annotators"] = list(self.annotators)
        if self.closing is not None:
            out["closing"] = self.closing
        return out


_COMPARE_FIELDS = ("item_id", "first_id", "second_id", "judge", "protocol", "verdicts", "probabilities", "orders",
                   "method", "unscored", "ppl_source", "human", "annotators", "first_system", "second_system")


@dataclass
class CriterionResult:
    """One criterion's judgment of one response."""

    __pydantic_config__ = _SCHEMA

    name: str
    weight: float
    points: int
    """The criterion's scale: 1..points (its number of levels, or the task's scale)."""
    scores: dict[str, float | None]
    """Every scoring method (discrete, geval, expected, trustjudge); all null when unscored."""
    sd: float | None
    """Standard deviation of the score under the judge's renormalised label distribution."""
    entropy: float | None
    label_mass: float | None
    unscored: str | None
    human: float | None = None
    critique: str | None = None
    distribution: dict[str, float] | None = None


@dataclass
class CriteriaRecord:
    """One response judged on every criterion, with the weighted aggregate."""

    __pydantic_config__ = _SCHEMA

    item_id: str
    response_id: str
    system: str | None
    judge: str
    protocol: str
    criteria: list[CriterionResult]
    aggregate: dict[str, float | None]
    """Weighted mean of the criteria's scores, per method, on ``scale`` (null when unscored)."""
    spread: float | None
    """Standard deviation of the ``expected`` aggregate, the criteria taken as independent."""
    scale: list[float]
    """The aggregate's range: the criteria's common scale [1, N], or [0, 1] when their scales differ."""
    unscored: str | None
    """Why there is no aggregate: the response is empty, or a criterion is unscored (without reweighting)."""
    reweighted: list[str] = field(default_factory=list)
    """Criteria left out of the aggregate (unscored) when reweighting was asked; the weights of the rest
    were renormalised."""
    human: float | None = None
    """The weighted mean of the human per-criterion scores, where every criterion has one."""
    human_score: float | None = None
    """The response's holistic human score, where given."""

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("item_id", "response_id", "system", "judge", "protocol")}
        out["criteria"] = [_compact(vars(c)) for c in self.criteria]
        out.update(aggregate=dict(self.aggregate), spread=self.spread, scale=list(self.scale),
                   unscored=self.unscored, reweighted=list(self.reweighted), human=self.human,
                   human_score=self.human_score)
        return out


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
    critique: str | None = None


@dataclass
class ChecklistRecord:
    """One response judged on every check of its checklist."""

    __pydantic_config__ = _SCHEMA

    item_id: str
    response_id: str
    system: str | None
    judge: str
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
    unscored: str | None
    reweighted: list[str] = field(default_factory=list)
    """Checks left out (unscored) when reweighting was asked."""

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("item_id", "response_id", "system", "judge", "protocol")}
        out["labels"] = list(self.labels)
        out["checks"] = [_compact(vars(c)) for c in self.checks]
        out.update(satisfaction=self.satisfaction, p_all=self.p_all,
                   passed=list(self.passed) if self.passed is not None else None,
                   expected_passed=self.expected_passed, unscored=self.unscored, reweighted=list(self.reweighted))
        return out


def _compact(d: dict[str, Any]) -> dict[str, Any]:
    """A nested result as JSON: optional texts left out when absent, containers copied."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in d.items() if not k.startswith("__")}
    for optional in ("critique", "distribution", "graded"):
        if out.get(optional) is None:
            out.pop(optional, None)
    return out




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
    graded: dict[str, float] | None = None
    """Graded verdicts only: the combined 5-way distribution, first's view (``first>>second`` .. ``second>>first``)."""


@dataclass
class CriteriaCompareRecord:
    """One pair judged on every criterion in both orders, with the weighted aggregate."""

    __pydantic_config__ = _SCHEMA

    item_id: str
    first_id: str
    second_id: str
    judge: str
    protocol: str
    criteria: list[CriterionVerdict]
    aggregate: dict[str, float] | None
    """Weighted mean of the criteria's probabilities (first / second / tie); null when unscored."""
    margin: float | None
    """Weighted mean of the criteria's margins."""
    verdict: str | None
    unscored: str | None
    reweighted: list[str] = field(default_factory=list)
    human: str | None = None
    first_system: str | None = None
    second_system: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("item_id", "first_id", "second_id", "judge", "protocol")}
        out["criteria"] = [_compact(vars(c)) for c in self.criteria]
        out.update(aggregate=dict(self.aggregate) if self.aggregate is not None else None, margin=self.margin,
                   verdict=self.verdict, unscored=self.unscored, reweighted=list(self.reweighted), human=self.human,
                   first_system=self.first_system, second_system=self.second_system)
        return out



@dataclass
class ClaimResult:
    """One claim of a response and its verification against the evidence."""

    __pydantic_config__ = _SCHEMA

    text: str
    probabilities: dict[str, float] | None
    """Each verification label's probability, renormalised over the labels; null when unscored."""
    p_supported: float | None
    """P(SUPPORTED), renormalised over the labels other than UNKNOWN (when UNKNOWN is asked)."""
    unknown: float | None = None
    """P(UNKNOWN): the evidence says nothing about the claim (only when UNKNOWN is asked)."""
    label_mass: float | None = None
    unscored: str | None = None
    human: str | None = None


@dataclass
class ClaimsRecord:
    """One response's claims: extraction, verification, and (against gold claims) matching."""

    __pydantic_config__ = _SCHEMA

    item_id: str
    response_id: str
    system: str | None
    judge: str
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
    """Against gold claims: P(match) per pair, noisy-OR coverage per gold claim, expected recall and precision,
    the one-to-one assignment's expected F1, and the greedy prediction-order rule for comparison."""
    unscored: str | None
    extraction: str | None = None
    """The judge's raw extraction text (when the claims were extracted)."""

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("item_id", "response_id", "system", "judge", "source")}
        out["claims"] = [{k: v for k, v in vars(c).items() if not k.startswith("__") and not (
            k in ("unknown", "human") and v is None)} for c in self.claims]
        out.update(precision=self.precision, supported=self.supported, expected_supported=self.expected_supported,
                   f1_at_k=self.f1_at_k, unknown_mass=self.unknown_mass, matching=self.matching,
                   unscored=self.unscored)
        if self.extraction is not None:
            out["extraction"] = self.extraction
        return out


Record = ScoreRecord | CompareRecord | CriteriaRecord | ChecklistRecord | CriteriaCompareRecord | ClaimsRecord
