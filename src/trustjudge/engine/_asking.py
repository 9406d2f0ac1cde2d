"""The two judging protocols over the engine, shared by every task.

``direct`` reads the labels right after the prompt, which ends at the marker ("Score: [").
``cot`` first samples a critique (stored like every model output), then reads the labels after the
critique and the marker; the critique's perplexity is kept (pairwise ``ppl`` aggregation uses it).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..backends import GenerateRequest
from ..errors import BackendError
from ._engine import BACKEND_ERROR, TRUNCATED, Engine, Job, Outcome, PlanSummary, ProgressFn

Protocol = Literal["direct", "cot"]
"""How a judgment is asked: ``direct`` (labels read right after the question) or ``cot`` (critique first)."""


@dataclass(frozen=True)
class Question:
    """One judgment to obtain: the formatted prompt (ending at the marker for ``direct``), the labels
    that may follow the marker, and the marker itself."""

    prompt: str
    labels: tuple[str, ...]
    marker: str

    @property
    def stop(self) -> str:
        """Where a critique ends: the marker without its bracket ("Score:")."""
        return self.marker.rstrip("[").rstrip()


@dataclass(frozen=True)
class Sampling:
    """How critiques are sampled (``cot``); the fields are part of each generation's store key."""

    protocol: Protocol = "direct"
    temperature: float = 0.0
    seed: int = 0
    max_new_tokens: int = 256

    def request(self, question: Question) -> GenerateRequest:
        seed = self.seed
        if self.temperature > 0:  # a per-prompt seed: results do not depend on batch order
            seed = int.from_bytes(hashlib.sha256(f"{self.seed}:{question.prompt}".encode()).digest()[:4], "big")
        return GenerateRequest(question.prompt, (question.stop,), self.max_new_tokens, self.temperature, seed)


def _budget(engine: Engine, question: Question, sampling: Sampling) -> int:
    if sampling.protocol == "direct":
        return 0
    return sampling.max_new_tokens + engine.backend.count_tokens(question.marker)


def ask(engine: Engine, questions: Sequence[Question | str], sampling: Sampling,
        progress: ProgressFn | None = None) -> list[Outcome]:
    """Every question's outcome under ``sampling.protocol``; a ``str`` is an unscored reason decided upstream."""
    if sampling.protocol == "direct":
        return engine.labels([q if isinstance(q, str) else Job(q.prompt, q.labels) for q in questions], progress)
    if engine.samples:
        return _sampled_cot(engine, questions, sampling, progress)
    outcomes: list[Outcome | None] = [None] * len(questions)
    todo: dict[int, Question] = {}
    for i, q in enumerate(questions):
        if isinstance(q, str):
            continue
        if engine.overflows(Job(q.prompt, q.labels, _budget(engine, q, sampling))):
            outcomes[i] = engine.unscored("context_overflow")
            if progress:
                progress(1)
        else:
            todo[i] = q
    gens = dict(zip(todo, engine.generate([sampling.request(q) for q in todo.values()])))
    jobs: list[Job | str] = []
    at: list[int] = []
    critiques: dict[int, tuple[str, float]] = {}
    for i, q in enumerate(questions):
        if isinstance(q, str):
            jobs.append(q)
            at.append(i)
        elif i in gens:
            gen = gens[i]
            if isinstance(gen, BackendError):
                outcomes[i] = engine.unscored(BACKEND_ERROR)
            elif gen.finish_reason == "length":
                outcomes[i] = engine.unscored(TRUNCATED)
            else:
                n = max(1, len(gen.token_logprobs))
                critiques[i] = (gen.text, math.exp(-sum(gen.token_logprobs) / n))
                jobs.append(Job(q.prompt + gen.text + q.marker, q.labels))
                at.append(i)
                continue
            if progress:
                progress(1)
    for i, out in zip(at, engine.labels(jobs, progress)):
        if i in critiques:
            text, ppl = critiques[i]
            out = replace(out, critique=text, critique_ppl=ppl)
        outcomes[i] = out
    return [o if o is not None else Outcome(None, BACKEND_ERROR) for o in outcomes]


def _sample_job(engine: Engine, question: Question, sampling: Sampling) -> Job:
    """``labels=sampled``: the job whose N sampled answers estimate ``question``'s labels. ``cot``: each answer
    writes its own critique (up to ``max_new_tokens``), the marker and the label, as the TrustJudge paper's code
    samples them; ``direct``: the label right after the prompt's marker."""
    if sampling.protocol == "direct":
        return Job(question.prompt, question.labels)
    return Job(question.prompt, question.labels, _budget(engine, question, sampling), question.marker)


def _sampled_cot(engine: Engine, questions: Sequence[Question | str], sampling: Sampling,
                 progress: ProgressFn | None) -> list[Outcome]:
    """``cot`` with ``labels=sampled``: each question's label distribution from N answers that each critique
    first; the record's critique is the first answer's (read back from the store: no model call)."""
    jobs = [q if isinstance(q, str) else _sample_job(engine, q, sampling) for q in questions]
    outcomes = engine.labels(jobs, progress)
    read = [(i, job) for i, (job, out) in enumerate(zip(jobs, outcomes))
            if isinstance(job, Job) and out.probs is not None]
    firsts = engine.generate([engine.sample_requests(job)[0] for _, job in read]) if read else []
    for (i, job), gen in zip(read, firsts):
        if not isinstance(gen, BackendError):
            at = gen.text.rfind(job.marker)
            outcomes[i] = replace(outcomes[i], critique=gen.text[:at] if at >= 0 else gen.text)
    return outcomes


def plan(engine: Engine, questions: Sequence[Question | str], sampling: Sampling) -> PlanSummary:
    """What :func:`ask` would do, without calling the model."""
    keys: list[str | None] = []
    tokens: list[int] = []
    prompts: list[str | None] = []
    for q in questions:
        if isinstance(q, str) or engine.overflows(Job(q.prompt, q.labels, _budget(engine, q, sampling))):
            keys.append(None)
            tokens.append(0)
            prompts.append(None)
            continue
        if engine.samples:  # labels=sampled: N generations per judgment (cot: each critiques first)
            requests = engine.sample_requests(_sample_job(engine, q, sampling))
            count = engine.backend.count_tokens(q.prompt)
            keys.extend(engine.generate_key(r) for r in requests)
            tokens.extend([count] * len(requests))
            prompts.extend([q.prompt] * len(requests))
            continue
        prompts.append(q.prompt)
        if sampling.protocol == "cot":
            keys.append(engine.generate_key(sampling.request(q)))
        else:
            keys.append(engine.label_key(Job(q.prompt, q.labels)))
        tokens.append(engine.backend.count_tokens(q.prompt))
    cot = sampling.protocol == "cot" and not engine.samples
    protocol = f"{sampling.protocol}, labels sampled x{engine.samples}" if engine.samples else sampling.protocol
    return engine.plan(keys, tokens, 2 if cot else 1, protocol,
                       generated_per_key=sampling.max_new_tokens if sampling.protocol == "cot" else 0, prompts=prompts)
