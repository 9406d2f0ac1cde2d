"""From label distributions to scores (pointwise) and verdicts (pairwise).

Every method reads the same stored probabilities, so switching method never calls the model.
See ../shared/TRUSTJUDGE.md sections 2 and 3 for the definitions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

SCORE_METHODS = ("discrete", "geval", "expected", "trustjudge")
AGGREGATIONS = ("single", "two_pass", "likelihood", "ppl")

Verdict = Literal["first", "second", "tie"]

TRUSTJUDGE_EPS = 1e-8
TRUSTJUDGE_TEMPERATURE = 0.2


def entropy_bits(probs: Sequence[float]) -> float:
    """Shannon entropy (bits) of the distribution renormalised over the given labels."""
    mass = sum(probs)
    if mass <= 0:
        return float("nan")
    # q, not p, is tested: a subnormal p can divide to exactly 0 (log2(0) would raise).
    return -sum(q * math.log2(q) for q in (p / mass for p in probs) if q > 0)


def discrete(values: Sequence[float], probs: Sequence[float]) -> float:
    """The most probable label's value (greedy decoding restricted to valid labels)."""
    best = max(range(len(probs)), key=lambda i: (probs[i], -i))
    return float(values[best])


def geval(values: Sequence[float], probs: Sequence[float]) -> float:
    """G-Eval: sum of value x probability, NOT renormalised (mass off the labels is lost)."""
    return float(sum(v * p for v, p in zip(values, probs)))


def expected(values: Sequence[float], probs: Sequence[float]) -> float:
    """Expectation under the distribution renormalised over valid labels."""
    mass = sum(probs)
    return float(sum(v * p for v, p in zip(values, probs)) / mass)


def trustjudge(values: Sequence[float], probs: Sequence[float], *,
               temperature: float = TRUSTJUDGE_TEMPERATURE, eps: float = TRUSTJUDGE_EPS) -> float:
    """TrustJudge's sharpened expectation: softmax of the probabilities' logits at temperature T.

    ``l_s = ln((p_s + eps) / (1 - p_s + eps))`` on the renormalised p, ``w = softmax(l / T)``,
    score ``sum_s s * w_s``. Unlike the reference code, p = 1 is kept (it is a valid probability).
    """
    mass = sum(probs)
    norm = [p / mass for p in probs]
    logits = [math.log((p + eps) / (1.0 - p + eps)) / temperature for p in norm]
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    total = sum(weights)
    return float(sum(v * w for v, w in zip(values, weights)) / total)


SCORERS = {"discrete": discrete, "geval": geval, "expected": expected, "trustjudge": trustjudge}


def score_all(values: Sequence[float], probs: Sequence[float]) -> dict[str, float]:
    """Every scoring method on one distribution."""
    return {name: fn(values, probs) for name, fn in SCORERS.items()}


@dataclass(frozen=True)
class PairDistribution:
    """One presentation order's raw probabilities, already mapped to (first, second, tie).

    ``first`` is the probability that the response shown as the pair's *first* response wins,
    whatever position it had in this order.
    """

    first: float
    second: float
    tie: float
    ppl: float | None = None
    """Perplexity of the order's generated judgment (``cot``); ``None`` in ``direct`` mode."""

    def verdict(self) -> Verdict:
        return argmax_verdict(self.first, self.second, self.tie)

    def confidence(self) -> float:
        """Probability of this order's own verdict (its likelihood in ``direct`` mode)."""
        return {"first": self.first, "second": self.second, "tie": self.tie}[self.verdict()]


def argmax_verdict(first: float, second: float, tie: float) -> Verdict:
    """The most probable verdict; an exact first/second draw is a tie."""
    if first == second and first >= tie:
        return "tie"
    best = max(first, second, tie)
    if best == first:
        return "first"
    if best == second:
        return "second"
    return "tie"


def from_order(a: float, b: float, c: float, *, swapped: bool, ppl: float | None = None) -> PairDistribution:
    """Map one order's A/B/C probabilities to (first, second, tie); missing labels count as 0."""
    return PairDistribution(b, a, c, ppl) if swapped else PairDistribution(a, b, c, ppl)


def single(o1: PairDistribution, o2: PairDistribution | None = None) -> Verdict:
    """One order only: what most tools do."""
    return o1.verdict()


def two_pass(o1: PairDistribution, o2: PairDistribution) -> Verdict:
    """MT-Bench: each order's own verdict; disagreement becomes a tie."""
    v1, v2 = o1.verdict(), o2.verdict()
    return v1 if v1 == v2 else "tie"


def likelihood_probs(o1: PairDistribution, o2: PairDistribution) -> tuple[float, float, float]:
    """Summed raw probabilities of the two orders (TrustJudge's likelihood-aware aggregation)."""
    return (o1.first + o2.first, o1.second + o2.second, o1.tie + o2.tie)


def likelihood(o1: PairDistribution, o2: PairDistribution, *, delta: float = 0.0) -> Verdict:
    """argmax of the summed probabilities; a win margin (first - second)/2 below delta is a tie."""
    f, s, t = likelihood_probs(o1, o2)
    v = argmax_verdict(f, s, t)
    if v != "tie" and abs(f - s) / 2 < delta:
        return "tie"
    return v


def ppl(o1: PairDistribution, o2: PairDistribution, *, delta: float = 0.0) -> Verdict:
    """The verdict of the order whose judgment is more likely.

    In ``cot`` mode: lower perplexity of the generated critique. In ``direct`` mode there is no
    generated text, so each order's likelihood is the probability of its own verdict.
    Equal within delta gives a tie.
    """
    if o1.ppl is not None and o2.ppl is not None:
        if abs(o1.ppl - o2.ppl) <= delta:
            return "tie" if o1.verdict() != o2.verdict() else o1.verdict()
        return o1.verdict() if o1.ppl < o2.ppl else o2.verdict()
    c1, c2 = o1.confidence(), o2.confidence()
    if abs(c1 - c2) <= delta:
        return o1.verdict() if o1.verdict() == o2.verdict() else "tie"
    return o1.verdict() if c1 > c2 else o2.verdict()


def aggregate_all(o1: PairDistribution, o2: PairDistribution, *, delta: float = 0.0) -> dict[str, Verdict]:
    """Every aggregation method on one pair."""
    return {
        "single": single(o1),
        "two_pass": two_pass(o1, o2),
        "likelihood": likelihood(o1, o2, delta=delta),
        "ppl": ppl(o1, o2, delta=delta),
    }


def score_matrix(values: Sequence[float], probs: Any) -> dict[str, Any]:
    """Every scoring method and the entropy for many distributions at once (rows of ``probs``).

    Equal to :func:`score_all` and :func:`entropy_bits` row by row; used when thousands of stored
    judgments are re-aggregated.
    """
    import numpy as np

    p = np.asarray(probs, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    mass = p.sum(axis=1)
    norm = p / mass[:, None]
    # Row sums, not matrix products: BLAS blocks a product by the matrix's size, which would make the
    # last bits of a score depend on how many judgments were aggregated together.
    out: dict[str, Any] = {"discrete": v[np.argmax(p, axis=1)], "geval": (p * v).sum(axis=1),
                           "expected": (norm * v).sum(axis=1)}
    logits = np.log((norm + TRUSTJUDGE_EPS) / (1.0 - norm + TRUSTJUDGE_EPS)) / TRUSTJUDGE_TEMPERATURE
    logits -= logits.max(axis=1, keepdims=True)
    w = np.exp(logits)
    out["trustjudge"] = (w * v).sum(axis=1) / w.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(norm > 0, norm * np.log2(np.where(norm > 0, norm, 1.0)), 0.0)
    out["entropy"] = -terms.sum(axis=1)
    out["mass"] = mass
    return out
