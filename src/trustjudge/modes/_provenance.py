"""How a record's labels were read, and what sampling them costs in precision.

Every mode's record says which label method (``exact``, ``top_k``, ``top_k_first``, ``sampled``) and which
HTTP API (``completions``, ``chat``) produced it (:func:`stamp`, from the outcomes it was built from), and a
sampled judge's record (``labels=sampled&samples=N``) carries the Monte-Carlo standard error of what it
reports: :func:`score_se` for a score, :func:`order_se` and :func:`pair_se` for a pairwise verdict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from ..engine._engine import Outcome

_WEAKEST = ("exact", "top_k", "top_k_first", "sampled")
"""Label methods from the most to the least exact: a record that mixes several says the least exact one."""


class Labelled(Protocol):
    """A record that says how its labels were read."""

    label_method: str | None
    api: str | None
    samples: int | None


L = TypeVar("L", bound=Labelled)


def label_source(outcomes: Iterable[Outcome]) -> tuple[str | None, str | None, int | None]:
    """``(label_method, api, samples)`` over the outcomes that read a distribution: their one method, or the
    least exact of several (``_WEAKEST``; exact and top-k labels together are ``top_k``); the API they came
    through; the most answers a sampled one was estimated from. ``None`` each where nothing was read."""
    read = [o for o in outcomes if o.probs is not None]
    methods = {o.method for o in read if o.method is not None}
    method = max(methods, key=lambda m: (_WEAKEST.index(m) if m in _WEAKEST else len(_WEAKEST), m), default=None)
    apis = sorted({o.api for o in read if o.api is not None})
    samples = max((o.samples for o in read if o.samples is not None), default=None)
    return method, apis[0] if apis else None, samples


def stamp(record: L, outcomes: Iterable[Outcome]) -> L:
    """``record`` with its ``label_method``, ``api`` and ``samples`` set from ``outcomes`` (:func:`label_source`)."""
    record.label_method, record.api, record.samples = label_source(outcomes)
    return record


def labelled_answers(out: Outcome) -> int:
    """How many of a sampled outcome's answers wrote a label (its mass times its N)."""
    return round(out.mass * (out.samples or 0))


def score_se(values: Sequence[float], out: Outcome) -> float | None:
    """The Monte-Carlo standard error of a sampled distribution's mean score: sqrt(var / n) over the n answers
    that wrote a label (``None`` for a distribution that was not sampled, or with n < 2: one answer gives no
    estimate of its spread)."""
    if out.probs is None or out.samples is None or out.unscored is not None:
        return None
    n = labelled_answers(out)
    if n < 2:
        return None
    mean = sum(p * v for p, v in zip(out.probs, values)) / out.mass
    variance = sum(p * (v - mean) ** 2 for p, v in zip(out.probs, values)) / out.mass
    return math.sqrt(variance / n)


def share_se(q: float, out: Outcome, of: float = 1.0) -> float | None:
    """The standard error of a probability ``q`` renormalised over the answers that wrote a label (a fraction
    ``of`` of them: those not UNKNOWN, say), taken as given as :func:`score_se` takes them: sqrt(q (1 - q) / n).
    ``None`` unless sampled with n >= 2."""
    n = labelled_answers(out) * of
    if out.probs is None or out.samples is None or n < 2:
        return None
    return math.sqrt(max(0.0, q * (1 - q)) / n)


def order_se(shares: Sequence[float], out: Outcome) -> list[float] | None:
    """The standard error of each share one sampled order reports (``A``, ``B``, ``C``: the share of its N
    answers that wrote it): binomial, sqrt(p (1 - p) / N). ``None`` unless sampled with N >= 2."""
    n = out.samples
    if out.probs is None or n is None or n < 2:
        return None
    return [math.sqrt(p * (1 - p) / n) for p in shares]


def pair_se(orders: Sequence[tuple[Sequence[float], Outcome]]) -> list[float] | None:
    """The standard error of each combined likelihood-aware probability (first, second, tie) of a pair judged
    in sampled orders, given per order as ``(first, second, tie)`` shares and its outcome.

    The combined probability of x is sum_i a_ix / sum_i m_i, where a_ix is order i's share of x among its N_i
    answers and m_i the share that wrote a label. With the n_i = m_i N_i labelled answers of each order taken
    as given (as :func:`score_se` takes them), order i's count of x is binomial(n_i, q_ix) with q_ix =
    a_ix / m_i, so the standard error is sqrt(sum_i n_i q_ix (1 - q_ix) / N_i^2) / sum_i m_i. With one N for
    both orders: sqrt(sum_i n_i q_ix (1 - q_ix)) / (n_1 + n_2). ``None`` unless every order was sampled and
    at least 2 answers wrote a label."""
    outs = [out for _, out in orders]
    if any(o.probs is None or o.samples is None or o.mass <= 0 for o in outs):
        return None
    if sum(labelled_answers(o) for o in outs) < 2:
        return None
    total = sum(o.mass for o in outs)
    out_se = []
    for x in range(3):
        var = 0.0
        for shares, o in orders:
            q = shares[x] / o.mass
            var += labelled_answers(o) * max(0.0, q * (1 - q)) / (o.samples or 1) ** 2
        out_se.append(math.sqrt(var) / total)
    return out_se


__all__ = ["Labelled", "label_source", "order_se", "pair_se", "score_se", "share_se", "stamp"]
