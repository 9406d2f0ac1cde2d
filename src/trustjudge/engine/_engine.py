"""The engine: plan -> store lookup -> batch -> backend -> store, with retries and progress.

Backends only compute. The engine decides what to ask, asks only for what the store lacks, orders
requests so that prompts sharing a prefix run back to back (the backend reuses their KV cache),
retries transient failures, writes each finished batch in one transaction (a killed run loses at most
the batch in flight) and records every judgment it could not score with its reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import orjson

from .._retry import RetryPolicy
from ..backends import Backend, GenerateRequest, Generation, LabelRequest, LabelResult, plugin_origin
from ..backends._speeds import MIN_MEASURED_TOKENS, Speed
from ..errors import BackendError, BackendUnavailable, NoLogprobsError, StoreError
from ._checks import CLOSE as CLOSE
from ._checks import SAMPLE_TEMPERATURE as SAMPLE_TEMPERATURE
from ._checks import SAMPLED as SAMPLED
from ._checks import SAMPLED_OPTION as SAMPLED_OPTION
from ._checks import _invalid_generation, _invalid_labels
from ._checks import read_label as read_label
from ._checks import sample_seed as sample_seed
from ._guard import guarded
from ._stats import EngineStats as EngineStats
from ._stats import PlanSummary as PlanSummary
from ._store import HASH_PREFIX, Store, StoredOutput, canonical_json, content_key

log = logging.getLogger("trustjudge.engine")

Closing = Literal["every", "needed"]
"""How labels end: each with its bracket (exact), or only where a label begins another."""

ProgressFn = Callable[[int], None]

# Reasons a judgment is unscored (stable strings: they appear in outputs and audits).
EMPTY_RESPONSE = "empty_response"
CONTEXT_OVERFLOW = "context_overflow"
TRUNCATED = "truncated"
NO_LABEL_MASS = "no_label_mass"
BACKEND_ERROR = "backend_error"


@dataclass(frozen=True)
class Job:
    """One label question: a prompt that ends where a label is written, and the labels to read there."""

    prompt: str
    labels: tuple[str, ...]
    """Label texts without the closing bracket, e.g. ``("1", ..., "100")``."""
    extra_tokens: int = 0
    """Tokens to keep free in the context besides the prompt and the labels (a critique still to write)."""
    marker: str = ""  # labels=sampled with cot: what each sampled answer writes after its critique, before its label


@dataclass(frozen=True)
class Outcome:
    """The stored model outputs of one judgment, or why there are none."""

    probs: tuple[float, ...] | None
    unscored: str | None = None
    critique: str | None = None
    critique_ppl: float | None = None
    prompt_tokens: int = 0
    method: str | None = None
    """How the label distribution was read (records' ``label_method``): ``exact``, ``top_k``, ``top_k_first``
    or ``sampled`` (``None`` without one)."""
    api: str | None = None
    """The HTTP API it came through (``completions``, ``chat``), ``None`` for an in-process judge."""
    samples: int | None = None
    """``sampled``: the answers the distribution was estimated from (each label's probability is the share of
    them that wrote it; answers that wrote no label are the mass left off)."""

    @property
    def mass(self) -> float:
        return float(sum(self.probs)) if self.probs else 0.0


def stored_problem(kind: str, request: dict[str, Any], result: Any, prompt_tokens: int) -> str | None:
    """What is wrong with a stored output (an imported row) as the engine reads it back
    (:meth:`Engine._from_row`), checked as a backend's result is (:func:`_invalid_labels`,
    :func:`_invalid_generation`); ``None`` when it is sound. ``request`` is the row's request JSON (a label
    request's ``prompt`` and ``labels`` are read)."""
    row = StoredOutput("", kind, result, prompt_tokens, 0, 0.0)
    try:
        out = Engine._from_row(kind, row)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        return f"not a stored {kind} result ({what})"
    if kind == "labels":
        return _invalid_labels(LabelRequest(str(request.get("prompt")), tuple(request.get("labels") or ())), out)
    return _invalid_generation(out)


def _unshared(previous: str, prompt: str, tokens: int) -> int:
    """The share of ``prompt``'s ``tokens`` after what it has in common with ``previous`` (by characters):
    what a backend holding ``previous`` in its KV cache still evaluates."""
    if not prompt:
        return tokens
    return round(tokens * (1 - len(os.path.commonprefix([previous, prompt])) / len(prompt)))  # noqa: RUF071 (characters)


class Engine:
    """Reads label distributions and generations through the store: looks up, claims, batches, calls the
    backend and stores. It knows nothing of judging protocols (``_protocol.ask`` builds on it)."""

    def __init__(self, backend: Backend, store: Store, *, seed: int = 0, min_label_mass: float = 1e-3,
                 batch_size: int = 8, max_retries: int = 4, retry_base_s: float = 0.5,
                 closing: Closing = "every", speed_hint: Speed | None = None, samples: int = 0,
                 judge: str | None = None) -> None:
        self.backend = backend
        self.samples = samples
        """``labels=sampled``: read each label distribution from this many answers sampled at temperature 1
        (each stored by its index, the seed), not from log-probabilities; 0: log-probabilities."""
        self.judge = judge or backend.fingerprint
        """The judge's name, for errors."""
        self.speed_hint = speed_hint
        """The speed to estimate with until this store has measured one (the shipped figure for a bundled judge)."""
        self.closing = closing
        self.store = store
        self.min_label_mass = min_label_mass
        self.batch_size = max(1, batch_size)
        self.stats = EngineStats()
        self.retry = RetryPolicy(max_retries=max_retries, base_s=retry_base_s, seed=seed)
        self._backend_retries = backend.use_retry_policy(self.retry)
        self._plugin = plugin_origin(backend)
        self._owner = store.new_owner()
        # Keyed by id() and holding the tuple itself, so that an id is never reused while cached.
        self._key_parts: dict[int, tuple[tuple[str, ...], bytes]] = {}
        self._closed_labels: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._label_budget: dict[tuple[str, ...], int] = {}
        self.poll_s = 0.2
        """Seconds between looks at work another process has claimed."""
        self.lease_s = 60.0
        """How long a claim holds without renewal (a running engine renews its claims every quarter)."""
        self._next_wait_note = 0.0
        self._last_prompt = ""
        """The last prompt a label batch ran (the backend's KV cache starts with it), for measured speeds."""

    # -- keys -------------------------------------------------------------------------------------
    def _label_request(self, req: LabelRequest) -> dict[str, Any]:
        """The request JSON stored with a label output (its content key is :meth:`_label_key`)."""
        return {"kind": "labels", "backend": self.backend.fingerprint, "prompt": req.prompt,
                "labels": list(req.labels)}

    def _label_key(self, prompt: str, labels: tuple[str, ...]) -> str:
        """``content_key`` of :meth:`_label_request`, assembled from cached JSON parts without building
        the request (a test checks they are equal). Re-aggregation computes one per judgment."""
        entry = self._key_parts.get(id(labels))  # by identity: hashing a 100-label tuple costs more
        if entry is None or entry[0] is not labels:
            head = canonical_json({"backend": self.backend.fingerprint, "kind": "labels", "labels": list(labels)})
            entry = self._key_parts[id(labels)] = (labels, (head[:-1] + ',"prompt":').encode("utf-8"))
        try:
            quoted = orjson.dumps(prompt)  # the same bytes as json.dumps(ensure_ascii=False), faster
        except TypeError:  # a lone surrogate: fail as content_key does (UnicodeEncodeError)
            quoted = json.dumps(prompt, ensure_ascii=False).encode("utf-8")
        return HASH_PREFIX + hashlib.sha256(entry[1] + quoted + b"}").hexdigest()

    def _closed(self, labels: tuple[str, ...]) -> tuple[str, ...]:
        """The label continuations scored for ``labels``, cached: each with the closing bracket
        (``closing="every"``), or only those that begin another label, "5" of "57" (``"needed"``)."""
        entry = self._closed_labels.get(id(labels))
        if entry is None or entry[0] is not labels:
            if self.closing == "every":
                closed = tuple(lab + CLOSE for lab in labels)
            else:
                starts = {o[:k] for o in labels for k in range(1, len(o))}
                closed = tuple(lab + CLOSE if lab in starts else lab for lab in labels)
            entry = self._closed_labels[id(labels)] = (labels, closed)
        return entry[1]

    def _gen_key(self, req: GenerateRequest) -> tuple[str, dict[str, Any]]:
        request = {"kind": "generate", "backend": self.backend.fingerprint, "prompt": req.prompt,
                   "stop": list(req.stop), "max_new_tokens": req.max_new_tokens,
                   "temperature": req.temperature, "seed": req.seed}
        return content_key(request), request

    def label_key(self, job: Job) -> str:
        """The store key of ``job``'s label output."""
        return self._label_key(job.prompt, self._closed(job.labels))

    def generate_key(self, req: GenerateRequest) -> str:
        return self._gen_key(req)[0]

    def overflows(self, job: Job) -> bool:
        """Whether ``job`` (prompt, labels and ``extra_tokens``) exceeds the backend's context."""
        budget = self._label_budget.get(job.labels)
        if budget is None:
            budget = self._label_budget[job.labels] = self.backend.max_label_tokens(list(self._closed(job.labels)))
        return self.backend.count_tokens(job.prompt) + budget + job.extra_tokens > self.backend.context_length

    # -- calls ------------------------------------------------------------------------------------
    def _call(self, fn: Callable[[Sequence[Any]], list[Any]], batch: Sequence[Any]) -> list[Any | BackendError]:
        """Call the backend with retries; a batch that keeps failing is retried item by item.

        Where the backend retries its own requests with the engine's policy, a failed batch is not
        retried whole (that would multiply the waits), only item by item.
        """
        try:
            if self._backend_retries:
                return self._guarded(fn, batch)
            return self.retry.call(lambda: self._guarded(fn, batch))
        except BackendUnavailable:
            raise
        except BackendError as exc:
            last = exc
        if len(batch) == 1:
            return [last]
        out: list[Any | BackendError] = []
        for one in batch:
            out.extend(self._call(fn, [one]))
        return out

    def _guarded(self, fn: Callable[[Sequence[Any]], list[Any]], batch: Sequence[Any]) -> list[Any]:
        """``fn(batch)``, whatever the backend raises a trustjudge error naming it (:func:`._guard.guarded`)."""
        return guarded(fn, batch, self.backend.fingerprint, self._plugin)

    def _checked(self, kind: str, batch: Sequence[Any], outputs: list[Any]) -> list[Any]:
        """The backend's outputs with every invalid one replaced by a :class:`BackendError` naming the backend
        and what is wrong (so that judgment is unscored, not stored, and the run goes on)."""
        name = self.backend.fingerprint
        if not isinstance(outputs, list) or len(outputs) != len(batch):
            n = len(outputs) if isinstance(outputs, (list, tuple)) else type(outputs).__name__
            return [BackendError(f"backend {name} returned {n} result(s) for {len(batch)} request(s)")] * len(batch)
        checked: list[Any] = []
        for request, out in zip(batch, outputs):
            if isinstance(out, BackendError):
                checked.append(out)
                continue
            problem = _invalid_labels(request, out) if kind == "labels" else _invalid_generation(out)
            checked.append(BackendError(f"backend {name} returned an invalid result: {problem}") if problem else out)
        return checked

    def _run_batches(self, kind: str, todo: list[tuple[str, dict[str, Any], Any]],
                     progress: ProgressFn | None) -> dict[str, Any]:
        """Run missing requests in prompt order, storing each batch; return results by key.

        Each batch is claimed in the store first: keys another live process is already computing are
        not computed again here, but waited for (and taken over if that process dies).
        """
        if not todo:
            return {}
        stop = threading.Event()
        beat = threading.Thread(target=self._renew_claims, args=(stop,), name="trustjudge-claims", daemon=True)
        beat.start()
        try:
            return self._run_claimed(kind, todo, progress)
        finally:
            stop.set()
            beat.join()

    def _renew_claims(self, stop: threading.Event) -> None:
        """Keep this engine's claims alive while it runs (a dead run's lapse within ``lease_s``)."""
        while not stop.wait(self.lease_s / 4):
            try:
                self.store.renew(self._owner, self.lease_s)
            except StoreError as exc:  # the next claim or store write reports it
                log.debug("could not renew claims: %s", exc)

    def _say_waiting(self, keys: list[str]) -> None:
        now = time.monotonic()
        if now < self._next_wait_note:
            return
        self._next_wait_note = now + 30.0
        for host, pid, left, n in self.store.claim_holders(keys):
            log.warning("waiting for %d judgment(s) that another run (host %s, pid %d) is computing; they are "
                        "taken over if it stops, at the latest in %.0f s", n, host, pid, left)

    def _run_claimed(self, kind: str, todo: list[tuple[str, dict[str, Any], Any]],
                     progress: ProgressFn | None) -> dict[str, Any]:
        results: dict[str, Any] = {}
        todo.sort(key=lambda t: t[2].prompt)  # neighbours share prefixes: the backend reuses KV state
        waiting: list[tuple[str, dict[str, Any], Any]] = []
        for chunk in self._chunks(todo):
            mine = self.store.claim([t[0] for t in chunk], self._owner, self.lease_s)
            waiting.extend(t for t in chunk if t[0] not in mine)
            self._run_batch(kind, [t for t in chunk if t[0] in mine], results, progress)
        while waiting:
            stored = self.store.get_many([t[0] for t in waiting])
            for key, row in stored.items():
                results[key] = self._from_row(kind, row)
            self.stats.from_store += len(stored)
            if progress is not None and kind == "labels" and stored:
                progress(len(stored))
            waiting = [t for t in waiting if t[0] not in stored]
            mine = self.store.claim([t[0] for t in waiting], self._owner, self.lease_s)
            taken = [t for t in waiting if t[0] in mine]
            for start in range(0, len(taken), self.batch_size):
                self._run_batch(kind, taken[start : start + self.batch_size], results, progress)
            waiting = [t for t in waiting if t[0] not in mine]
            if waiting:
                self._say_waiting([t[0] for t in waiting])
                time.sleep(self.poll_s)
        return results

    def _chunks(self, todo: list[tuple[str, dict[str, Any], Any]]) -> Iterator[list[tuple[str, dict[str, Any], Any]]]:
        """Batches of at most ``batch_size`` sorted requests, cut where neighbouring prompts share the
        least (between half and all of a batch): the prompts of one question, or of one first
        response, then reach the backend together and it computes their shared part once."""
        start, n, size = 0, len(todo), self.batch_size
        while start < n:
            end = min(start + size, n)
            if end < n and size > 1:
                low = start + max(1, size // 2)
                shared = [len(os.path.commonprefix([todo[i - 1][2].prompt, todo[i][2].prompt]))  # noqa: RUF071
                          for i in range(low, end + 1)]
                end = low + min(range(len(shared)), key=lambda k: (shared[k], -k))
            yield todo[start:end]
            start = end

    def _run_batch(self, kind: str, batch: list[tuple[str, dict[str, Any], Any]], results: dict[str, Any],
                   progress: ProgressFn | None) -> None:
        """Call the backend on one claimed batch, store what it returned and release the rest."""
        if not batch:
            return
        fn = self.backend.label_logprobs if kind == "labels" else self.backend.generate
        began = time.perf_counter()
        try:
            outputs = self._checked(kind, [t[2] for t in batch], self._call(fn, [t[2] for t in batch]))
        except BaseException:
            self.store.release([t[0] for t in batch], self._owner)
            raise
        elapsed = time.perf_counter() - began
        rows = []
        failed = []
        tokens = 0
        for (key, request, _), out in zip(batch, outputs):
            results[key] = out
            if isinstance(out, BackendError):
                failed.append(key)
                self.stats.last_error = str(out)
                continue
            tokens += out.prompt_tokens
            if kind == "labels":
                # -inf (a label outside a server's top-k, or of probability 0) is stored as null: JSON has
                # no infinity, and a stored row must read back.
                payload = {"logprobs": [None if lp == -math.inf else lp for lp in out.logprobs],
                           "label_method": out.method}
                if out.api is not None:
                    payload["api"] = out.api
                rows.append((key, kind, self.backend.fingerprint, request, payload, out.prompt_tokens, 0,
                             out.latency_s))
            else:
                payload = {"text": out.text, "token_logprobs": list(out.token_logprobs),
                           "finish_reason": out.finish_reason}
                rows.append((key, kind, self.backend.fingerprint, request, payload, out.prompt_tokens,
                             out.completion_tokens, out.latency_s))
        self.store.put_many(rows, owner=self._owner)
        if failed:
            self.store.release(failed, self._owner)
        if kind == "labels":
            self.stats.count_labels(len(batch), model=getattr(self.backend, "calls_model", True))
            self.store.record_speed(self.backend.fingerprint, self._evaluated(batch, outputs), elapsed)
        else:
            self.stats.generate_calls += len(batch)
        self.stats.prompt_tokens += tokens
        self.stats.seconds += elapsed
        if progress is not None and kind == "labels":
            progress(len(batch))

    def _evaluated(self, batch: Sequence[tuple[str, Any, LabelRequest | GenerateRequest]],
                   outputs: Sequence[Any]) -> int:
        """The batch's prompt tokens not shared with the prompt run before each (what the backend had to
        evaluate, its KV cache holding the rest), counted as :meth:`plan` counts them: the store's measured
        speed is then in the unit the estimates use."""
        evaluated = 0
        for (_, _, req), out in zip(batch, outputs):
            if isinstance(out, BackendError):
                continue
            evaluated += _unshared(self._last_prompt, req.prompt, out.prompt_tokens)
            self._last_prompt = req.prompt
        return evaluated

    @staticmethod
    def _from_row(kind: str, row: StoredOutput) -> LabelResult | Generation:
        if kind == "labels":
            return LabelResult(tuple(-math.inf if lp is None else lp for lp in row.result["logprobs"]),
                               row.prompt_tokens, row.latency_s,
                               # rows stored before the rename say "method"
                               row.result.get("label_method", row.result.get("method", "exact")),
                               row.result.get("api"))
        return Generation(row.result["text"], tuple(row.result["token_logprobs"]), row.result["finish_reason"],
                          row.prompt_tokens, row.latency_s)

    def _fetch(self, kind: str, requests: dict[str, tuple[dict[str, Any] | None, Any]],
               progress: ProgressFn | None, stored: dict[str, StoredOutput] | None = None) -> dict[str, Any]:
        """Results of ``{key: (request JSON or None, request)}``: from the store, else from the backend.

        ``stored`` holds rows already read for these keys; the rest are looked up here.
        """
        stored = dict(stored or {})
        missing = [k for k in requests if k not in stored]
        if missing:
            stored.update(self.store.get_many(missing))
        results: dict[str, Any] = {key: self._from_row(kind, row) for key, row in stored.items() if key in requests}
        self.stats.from_store += len(results)
        if progress is not None and kind == "labels" and results:
            progress(len(results))
        todo = [(k, req if req is not None else self._label_request(obj), obj)
                for k, (req, obj) in requests.items() if k not in results]
        results.update(self._run_batches(kind, todo, progress))
        return results

    def _unscored(self, reason: str) -> Outcome:
        self.stats.unscored[reason] = self.stats.unscored.get(reason, 0) + 1
        return Outcome(None, reason)

    def generate(self, requests: Sequence[GenerateRequest],
                 progress: ProgressFn | None = None) -> list[Generation | BackendError]:
        """Each request's generation: from the store, else from the backend (and then stored)."""
        wanted: dict[str, tuple[dict[str, Any] | None, Any]] = {}
        keys = []
        for req in requests:
            key, request = self._gen_key(req)
            keys.append(key)
            wanted[key] = (request, req)
        gens = self._fetch("generate", wanted, progress) if wanted else {}
        return [gens[key] for key in keys]

    def labels(self, jobs: Sequence[Job | str], progress: ProgressFn | None = None) -> list[Outcome]:
        """Every job's label distribution. A ``str`` in place of a job is an unscored reason decided upstream.

        With :attr:`samples`, estimated from that many sampled answers (:meth:`sampled_labels`); else read
        from log-probabilities, and a judge that returns none stops the run naming the option that samples."""
        if self.samples:
            return self.sampled_labels(jobs, progress)
        try:
            return self._exact_labels(jobs, progress)
        except NoLogprobsError as exc:
            raise NoLogprobsError(
                f"the judge {self.judge} returns no log-probabilities ({exc}), so its labels cannot be read: add "
                f"?{SAMPLED_OPTION} to the judge name to estimate each label distribution from N answers "
                f"sampled at temperature 1 (N generations per judgment; records say method 'sampled' and the "
                "score's Monte-Carlo standard error)") from exc

    def sample_requests(self, job: Job) -> list[GenerateRequest]:
        """The :attr:`samples` generations that estimate ``job``'s labels: sample ``k`` has the seed
        :func:`sample_seed` of ``k`` and the prompt, stops at the closing bracket and may write the longest
        label and a blank."""
        budget = self._label_budget.get(job.labels)
        if budget is None:
            budget = self._label_budget[job.labels] = self.backend.max_label_tokens(list(self._closed(job.labels)))
        return [GenerateRequest(job.prompt, (CLOSE,), budget + 1 + job.extra_tokens, SAMPLE_TEMPERATURE,
                                sample_seed(job.prompt, k))
                for k in range(self.samples)]

    def sampled_labels(self, jobs: Sequence[Job | str], progress: ProgressFn | None = None) -> list[Outcome]:
        """Each job's label distribution estimated from :attr:`samples` answers sampled at temperature 1: the
        share of answers that wrote each label. Sample ``k`` is the generation with :func:`sample_seed`, stored
        like any generation: a rerun asks nothing, and a larger N asks only the samples it lacks."""
        outcomes: list[Outcome | None] = [None] * len(jobs)
        requests: list[GenerateRequest] = []
        spans: dict[int, int] = {}
        for i, job in enumerate(jobs):
            if isinstance(job, str):
                outcomes[i] = self._unscored(job)
            elif self.overflows(job):
                outcomes[i] = self._unscored(CONTEXT_OVERFLOW)
            else:
                spans[i] = len(requests)
                requests.extend(self.sample_requests(job))
        gens = self.generate(requests) if requests else []
        for i, start in spans.items():
            job = jobs[i]
            assert not isinstance(job, str)
            answers = gens[start : start + self.samples]
            if any(isinstance(g, BackendError) for g in answers):
                outcomes[i] = self._unscored(BACKEND_ERROR)
                continue
            counts = [0] * len(job.labels)
            for g in answers:
                k = read_label(g.text, job.labels, job.marker)  # type: ignore[union-attr]
                if k is not None:
                    counts[k] += 1
            probs = tuple(c / self.samples for c in counts)
            mass = sum(probs)
            reason = NO_LABEL_MASS if not mass > 0 or mass < self.min_label_mass else None
            if reason:
                self.stats.unscored[reason] = self.stats.unscored.get(reason, 0) + 1
            outcomes[i] = Outcome(probs, reason, prompt_tokens=answers[0].prompt_tokens,  # type: ignore[union-attr]
                                  method=SAMPLED, samples=self.samples, api=getattr(self.backend, "api", None))
        if progress is not None:
            progress(len(jobs))
        return [o if o is not None else Outcome(None, BACKEND_ERROR) for o in outcomes]

    def _exact_labels(self, jobs: Sequence[Job | str], progress: ProgressFn | None) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(jobs)
        # Judgments already stored skip the context check (they fitted when they were made, and counting
        # tokens is the costliest step of re-aggregation with a real tokenizer).
        keys = {i: self._label_key(job.prompt, self._closed(job.labels))
                for i, job in enumerate(jobs) if not isinstance(job, str)}
        stored = self.store.get_many(list(keys.values()))
        requests: dict[str, tuple[dict[str, Any] | None, Any]] = {}
        label_keys: dict[int, str] = {}
        for i, job in enumerate(jobs):
            if isinstance(job, str):
                outcomes[i] = self._unscored(job)
            elif keys[i] not in stored and self.overflows(job):
                outcomes[i] = self._unscored(CONTEXT_OVERFLOW)
            else:
                label_keys[i] = key = keys[i]
                if key not in requests:  # the request JSON is built only if it is run
                    requests[key] = (None, LabelRequest(job.prompt, self._closed(job.labels)))
                continue
            if progress:
                progress(1)
        results = self._fetch("labels", requests, progress, stored)
        good = [(i, results[key]) for i, key in label_keys.items() if not isinstance(results[key], BackendError)]
        for i, key in label_keys.items():
            if isinstance(results[key], BackendError):
                outcomes[i] = self._unscored(BACKEND_ERROR)
        # One exp over every result of a label count at once (re-aggregation handles thousands).
        by_width: dict[int, list[tuple[int, LabelResult]]] = {}
        for i, res in good:
            by_width.setdefault(len(res.logprobs), []).append((i, res))
        for group in by_width.values():
            probs = np.exp(np.array([res.logprobs for _, res in group], dtype=np.float64))
            masses = probs.sum(axis=1).tolist()
            for (i, res), row, mass in zip(group, probs.tolist(), masses):
                # No mass at all is unscored even with min_label_mass 0: there is no distribution to score.
                reason = NO_LABEL_MASS if not mass > 0 or mass < self.min_label_mass else None
                if reason:
                    self.stats.unscored[reason] = self.stats.unscored.get(reason, 0) + 1
                outcomes[i] = Outcome(tuple(row), reason, prompt_tokens=res.prompt_tokens, method=res.method,
                                      api=res.api)
        return [o if o is not None else Outcome(None, BACKEND_ERROR) for o in outcomes]

    def unscored(self, reason: str) -> Outcome:
        """An outcome without labels, counted in the stats."""
        return self._unscored(reason)

    def speed(self) -> Speed:
        """The speed estimates use: the shipped figure of a bundled judge (``speed_hint``), else this store's
        measurement for the backend once it has timed at least :data:`MIN_MEASURED_TOKENS` prompt tokens,
        else the backend's default.

        The shipped figure comes first because it models seconds per call as well as per token: measured
        here (bench/results/estimates.md), a store's single tokens-per-second rate taken from one command
        missed the next one's time by more than 1.5x, the shipped figures never did."""
        if self.speed_hint is not None:
            return self.speed_hint
        measured = self.store.measured_speed(self.backend.fingerprint)
        if measured is not None and measured[0] >= MIN_MEASURED_TOKENS and measured[1] > 0:
            tokens, seconds = measured
            return Speed(tokens / seconds, source=f"measured in this store ({tokens:,} prompt tokens)")
        return Speed(self.backend.default_tokens_per_s,
                     source=f"default estimate for {type(self.backend).__name__} (not measured)")

    def plan(self, keys: Sequence[str | None], tokens: Sequence[int], calls_per_key: int, protocol: str,
             generated_per_key: int = 0, prompts: Sequence[str | None] | None = None) -> PlanSummary:
        """What running ``keys`` (``None``: unscorable) would cost, from the store, without calling the model.

        ``generated_per_key``: tokens each missing key may generate (a critique's ``max_new_tokens``); its
        second call (the labels after the critique) reads the prompt and the critique again. ``prompts``
        (beside ``keys``): the estimate then counts only the tokens a prompt does not share with the one
        run before it."""
        wanted = [k for k in keys if k is not None]
        stored = self.store.get_many(wanted)
        per_key = {k: t for k, t in zip(keys, tokens) if k is not None}
        missing = [k for k in dict.fromkeys(wanted) if k not in stored]
        to_run = sum(per_key[k] for k in missing)
        new = to_run
        if prompts is not None:
            # The engine runs prompts sorted, and the backend evaluates only what a prompt does not share
            # with the one before it (its KV cache): count that share of each prompt's tokens.
            by_key = {k: p for k, p in zip(keys, prompts) if k is not None and p is not None}
            todo = sorted((by_key[k], per_key[k]) for k in missing if k in by_key)
            new = sum(per_key[k] for k in missing if k not in by_key)
            previous = ""
            for prompt, count in todo:
                new += _unshared(previous, prompt, count)
                previous = prompt
        generated = generated_per_key * len(missing)
        return PlanSummary(
            judgments=len(keys), model_calls=calls_per_key * len(missing), stored=len(wanted) - len(missing),
            unscorable=len(keys) - len(wanted), prompt_tokens=sum(per_key.values()),
            prompt_tokens_to_run=to_run, speed=self.speed(), protocol=protocol, judgments_to_run=len(missing),
            generated_tokens_to_run=generated,
            tokens_read_to_run=new * calls_per_key + (generated if calls_per_key > 1 else 0),
        )
