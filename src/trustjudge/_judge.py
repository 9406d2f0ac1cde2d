"""The public judging API: :class:`Judge` with ``score`` (pointwise) and ``compare`` (pairwise)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import _scoring as S
from ._audit import AuditReport
from ._audit import audit as run_audit
from ._engine import (
    EMPTY_RESPONSE,
    Closing,
    Engine,
    EngineStats,
    Job,
    Outcome,
    PlanSummary,
    ProgressFn,
)
from ._injection import INJECTION
from ._items import Item, Pair
from ._prompts import (
    SCORE_MARKER,
    SYSTEM,
    VERDICT_LABELS,
    VERDICT_MARKER,
    Prompts,
    Protocol,
)
from ._prompts import scale as make_scale
from ._store import Store
from .backends import DEFAULT_JUDGE, Backend, get_backend
from .errors import ConfigError


@dataclass
class ScoreRecord:
    """One response's scores under every method (all ``None`` when unscored)."""

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
class AuditRun:
    """An audit report with the records it was computed from."""

    report: AuditReport
    score_records: dict[int, list[dict[str, Any]]]
    compare_records: list[dict[str, Any]]


def _check_options(*, batch_size: int, max_new_tokens: int, temperature: float, min_label_mass: float,
                   delta: float) -> None:
    """Refuse out-of-range numeric options before any work (NaN included)."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be 1 or more, got {batch_size!r}")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens must be 1 or more, got {max_new_tokens!r}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ConfigError(f"temperature must be a finite number of 0 or more, got {temperature!r}")
    if not (math.isfinite(min_label_mass) and 0 <= min_label_mass <= 1):
        raise ConfigError(f"min_label_mass must be between 0 and 1, got {min_label_mass!r}")
    if not (math.isfinite(delta) and delta >= 0):
        raise ConfigError(f"delta must be a finite number of 0 or more, got {delta!r}")


class Judge:
    """An LLM judge with TrustJudge's scoring and aggregation, backed by a judgment store.

    Args:
        judge: a judge name (default ``llamacpp/qwen2.5-coder-1.5b``; ``hf/smollm2-135m``, ``hf//path``, ``mock/...``)
            or a :class:`~trustjudge.backends.Backend`.
        store: a :class:`Store`, a path, or ``None`` for the default store file.
        protocol: ``direct`` (labels read right after the question) or ``cot`` (critique first).
        scale: 5, 10 or 100 points for ``score`` (default 10: on the default judge it separated answers
            the 100-point scale tied, at half the cost; bench/results/consistency.md).
        closing: ``every`` (default) reads each label with its closing bracket, "57]": the exact
            probability that the judge writes that label and stops. ``needed`` reads the bracket only
            after labels that begin another label ("5" of "57"), so two-digit labels count the judge's
            digits whatever follows: a 100-point score reads 10 label-trie nodes instead of 100 (about
            1.5x faster on the embedded judge), no longer exact. Stored judgments of one mode are not
            reused by the other.
        max_retries, retry_base_s: transient backend failures (timeouts, HTTP 429/5xx) are retried
            this many times, waiting ``retry_base_s * 2**attempt`` (with jitter) or the server's
            ``Retry-After``.
    """

    def __init__(self, judge: str | Backend = DEFAULT_JUDGE, *, store: Store | str | Path | None = None,
                 protocol: Protocol = "direct", scale: int = 10, temperature: float = 0.0, seed: int = 0,
                 max_new_tokens: int = 256, min_label_mass: float = 1e-3, batch_size: int = 8,
                 chunk_size: int = 256, delta: float = 0.0, pointwise_template: str | Path | None = None,
                 pairwise_template: str | Path | None = None, keep_distribution: bool = False,
                 max_retries: int = 4, retry_base_s: float = 0.5, closing: Closing = "every") -> None:
        if protocol not in ("direct", "cot"):
            raise ConfigError(f"protocol must be 'direct' or 'cot', got {protocol!r}")
        if closing not in ("every", "needed"):
            raise ConfigError(f"closing must be 'every' or 'needed', got {closing!r}")
        _check_options(batch_size=batch_size, max_new_tokens=max_new_tokens, temperature=temperature,
                       min_label_mass=min_label_mass, delta=delta)
        self.name = judge if isinstance(judge, str) else getattr(judge, "name", type(judge).__name__)
        self._backend = judge if isinstance(judge, Backend) else None
        self._store = store if isinstance(store, Store) else Store(store)
        self.protocol: Protocol = protocol
        self.scale = make_scale(scale)
        self.prompts = Prompts.load(pointwise_template, pairwise_template)
        self.delta = delta
        self.chunk_size = max(1, chunk_size)
        self.keep_distribution = keep_distribution
        self._closing_mark = None if closing == "every" else closing  # named in records only when not exact
        self._engine_args = dict(protocol=protocol, temperature=temperature, seed=seed,
                                 max_new_tokens=max_new_tokens, min_label_mass=min_label_mass,
                                 batch_size=batch_size, max_retries=max_retries, retry_base_s=retry_base_s,
                                 closing=closing)
        self._engine: Engine | None = None

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = get_backend(self.name)
        return self._backend

    @property
    def store(self) -> Store:
        return self._store

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = Engine(self.backend, self._store, **self._engine_args)  # type: ignore[arg-type]
        return self._engine

    @property
    def stats(self) -> EngineStats:
        return self.engine.stats

    # -- prompts ----------------------------------------------------------------------------------
    def _score_job(self, item: Item, text: str) -> Job | str:
        if not text.strip():
            return EMPTY_RESPONSE
        user = self.prompts.render_pointwise(item.question, text, item.context, item.reference,
                                             self.scale, self.protocol)
        prefix = SCORE_MARKER if self.protocol == "direct" else ""
        return Job(self.backend.format_prompt(SYSTEM, user, prefix), self.scale.labels, SCORE_MARKER,
                   SCORE_MARKER.rstrip("[").rstrip())

    def _compare_jobs(self, item: Item, pair: Pair) -> tuple[Job | str, Job | str]:
        a, b = item.response(pair.first).text, item.response(pair.second).text
        if not a.strip() or not b.strip():
            return EMPTY_RESPONSE, EMPTY_RESPONSE
        prefix = VERDICT_MARKER if self.protocol == "direct" else ""
        jobs = []
        for x, y in ((a, b), (b, a)):
            user = self.prompts.render_pairwise(item.question, x, y, item.context, item.reference, self.protocol)
            jobs.append(Job(self.backend.format_prompt(SYSTEM, user, prefix), VERDICT_LABELS, VERDICT_MARKER,
                            VERDICT_MARKER.rstrip("[").rstrip()))
        return jobs[0], jobs[1]

    # -- chunking ---------------------------------------------------------------------------------
    def _chunks(self, items: Iterable[Item], per_item: Any) -> Iterator[list[Item]]:
        chunk: list[Item] = []
        size = 0
        for item in items:
            chunk.append(item)
            size += per_item(item)
            if size >= self.chunk_size:
                yield chunk
                chunk, size = [], 0
        if chunk:
            yield chunk

    # -- pointwise --------------------------------------------------------------------------------
    def score(self, items: Iterable[Item], *, progress: ProgressFn | None = None) -> Iterator[ScoreRecord]:
        """Score every response of every item; records come out in input order, item by item."""
        for chunk in self._chunks(items, lambda it: len(it.responses)):
            jobs = [self._score_job(item, r.text) for item in chunk for r in item.responses]
            outcomes = self.engine.run(jobs, progress)
            scored = [i for i, o in enumerate(outcomes) if o.probs is not None and o.unscored is None]
            matrix = S.score_matrix(self.scale.values, [outcomes[i].probs for i in scored]) if scored else {}
            row_of = {i: n for n, i in enumerate(scored)}
            k = 0
            for item in chunk:
                for r in item.responses:
                    yield self._score_record(item, r.id, r.system, r.human_score, outcomes[k], matrix, row_of.get(k))
                    k += 1

    def _score_record(self, item: Item, rid: str, system: str | None, human: float | None, out: Outcome,
                      matrix: dict[str, Any], row: int | None) -> ScoreRecord:
        scores: dict[str, float | None] = dict.fromkeys(S.SCORE_METHODS)
        entropy = None
        dist = None
        if row is not None:
            scores = {m: float(matrix[m][row]) for m in S.SCORE_METHODS}
            entropy = float(matrix["entropy"][row])
        if out.probs is not None and self.keep_distribution:
            dist = {lab: p for lab, p in zip(self.scale.labels, out.probs)}
        return ScoreRecord(item.id, rid, system, self.name, self.protocol, self.scale.points, scores, entropy,
                           out.mass if out.probs is not None else None, out.unscored, human, out.critique, dist,
                           self._closing_mark, out.method if out.probs is not None else None)

    # -- pairwise ---------------------------------------------------------------------------------
    def compare(self, items: Iterable[Item], *, progress: ProgressFn | None = None) -> Iterator[CompareRecord]:
        """Judge every pair (explicit or all within an item) in both orders."""
        for chunk in self._chunks(items, lambda it: 2 * len(it.all_pairs())):
            jobs: list[Job | str] = []
            for item in chunk:
                for pair in item.all_pairs():
                    jobs.extend(self._compare_jobs(item, pair))
            outcomes = iter(self.engine.run(jobs, progress))
            for item in chunk:
                for pair in item.all_pairs():
                    yield self._compare_record(item, pair, next(outcomes), next(outcomes))

    def _compare_record(self, item: Item, pair: Pair, o1: Outcome, o2: Outcome) -> CompareRecord:
        ppl_source = "critique_perplexity" if self.protocol == "cot" else "verdict_probability"
        orders = []
        for shown_first, out in ((pair.first, o1), (pair.second, o2)):
            row: dict[str, Any] = {"shown_first": shown_first, "unscored": out.unscored}
            if out.probs is not None:
                row.update(dict(zip(VERDICT_LABELS, out.probs)), mass=out.mass, method=out.method)
            if out.critique_ppl is not None:
                row["critique_ppl"] = out.critique_ppl
            if out.critique is not None:
                row["critique"] = out.critique
            orders.append(row)
        unscored = o1.unscored or o2.unscored
        verdicts: dict[str, str | None] = dict.fromkeys(S.AGGREGATIONS)
        probabilities = None
        if unscored is None and o1.probs is not None and o2.probs is not None:
            d1 = S.from_order(*o1.probs, swapped=False, ppl=o1.critique_ppl)
            d2 = S.from_order(*o2.probs, swapped=True, ppl=o2.critique_ppl)
            verdicts = dict(S.aggregate_all(d1, d2, delta=self.delta))
            f, s, t = S.likelihood_probs(d1, d2)
            total = f + s + t
            probabilities = {"first": f / total, "second": s / total, "tie": t / total}
        r1, r2 = item.response(pair.first), item.response(pair.second)
        methods = {o.method for o in (o1, o2) if o.probs is not None}
        method = None if not methods else "exact" if methods == {"exact"} else "top_k"
        return CompareRecord(item.id, pair.first, pair.second, self.name, self.protocol, verdicts, probabilities,
                             orders, unscored, ppl_source, pair.human, list(pair.annotators), r1.system, r2.system,
                             self._closing_mark, method)

    # -- audit ------------------------------------------------------------------------------------
    def audit(self, items: Sequence[Item], *, scales: Sequence[int] = (5, 100), delta: float = 0.0,
              ks: Sequence[int] = (3, 4, 5), bootstrap: int = 1000, seed: int = 0,
              progress: ProgressFn | None = None, injection: bool = False) -> AuditRun:
        """Judge what the store lacks (pointwise on each scale, pairwise in both orders), then audit.

        Items with one response are scored but not compared. Everything already stored is reused, so
        re-running with another delta, k or method makes no model call. With ``injection``, every
        response is also scored with :data:`~trustjudge._injection.INJECTION` appended (an instruction to
        give the top label), and the report says how far the judge moved.
        """
        by_scale: dict[int, list[dict[str, Any]]] = {}
        injected: dict[int, list[dict[str, Any]]] = {}
        original = self.scale
        try:
            for points in scales:
                self.scale = make_scale(points)
                by_scale[points] = [r.to_dict() for r in self.score(items, progress=progress)]
                if injection:
                    steered = [replace(it, responses=tuple(replace(r, text=r.text + INJECTION.format(label=points))
                                                           for r in it.responses)) for it in items]
                    injected[points] = [r.to_dict() for r in self.score(steered, progress=progress)]
        finally:
            self.scale = original
        pairs = [r.to_dict() for r in self.compare([it for it in items if len(it.responses) >= 2], progress=progress)]
        lengths = {(it.id, r.id): len(r.text) for it in items for r in it.responses}
        report = run_audit(by_scale, pairs, delta=delta, ks=ks, lengths=lengths, bootstrap=bootstrap, seed=seed,
                           injected_by_scale=injected)
        return AuditRun(report, by_scale, pairs)

    def audit_judgments(self, items: Sequence[Item], scales: Sequence[int] = (5, 100), injection: bool = False) -> int:
        """How many judgments :meth:`audit` needs (for progress bars)."""
        per_scale = sum(len(it.responses) for it in items) * (2 if injection else 1)
        return len(scales) * per_scale + sum(2 * len(it.all_pairs()) for it in items if len(it.responses) >= 2)

    # -- planning ---------------------------------------------------------------------------------
    def plan(self, items: Sequence[Item], kind: str) -> PlanSummary:
        """What ``score`` or ``compare`` would do on ``items``, without calling the model."""
        jobs: list[Job | str] = []
        for item in items:
            if kind == "score":
                jobs.extend(self._score_job(item, r.text) for r in item.responses)
            else:
                for pair in item.all_pairs():
                    jobs.extend(self._compare_jobs(item, pair))
        return self.engine.plan(jobs)

    def close(self) -> None:
        self._store.close()
        if self._backend is not None:
            self._backend.close()


def score(items: Iterable[Item], judge: str | Backend = DEFAULT_JUDGE, **kwargs: Any) -> list[ScoreRecord]:
    """Score every response (see :class:`Judge` for the options)."""
    j = Judge(judge, **kwargs)
    try:
        return list(j.score(items))
    finally:
        j.close()


def compare(items: Iterable[Item], judge: str | Backend = DEFAULT_JUDGE, **kwargs: Any) -> list[CompareRecord]:
    """Compare every pair in both orders (see :class:`Judge` for the options)."""
    j = Judge(judge, **kwargs)
    try:
        return list(j.compare(items))
    finally:
        j.close()
