"""The judge worker: one thread runs every judgment of a server, merging concurrent requests of equal tasks
into one job and letting jobs take turns a chunk at a time (a small request is not held behind a long one)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._judge import Judge
from ..errors import BackendUnavailable, TrustJudgeError
from ..io._items import Item
from ..modes._base import Task

__all__ = ["JudgeWorker", "WorkerStats"]


@dataclass
class WorkerStats:
    """Counters of a :class:`JudgeWorker` (written by the worker thread only)."""

    requests: int = 0
    engine_runs: int = 0
    merged_requests: int = 0
    judgments: int = 0


@dataclass
class _Request:
    """One queued request: a task over items (``None`` for an audit, with its options)."""

    task: Task | None
    items: list[Item]
    options: dict[str, Any]
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)

    @property
    def group(self) -> Any:
        if self.task is None:  # an audit is an aggregate over its own items: never merged
            return ("audit", id(self))
        return self.task  # frozen: equal tasks (kind and options) merge


@dataclass
class _Job:
    """The work of one group of merged requests: ``steps`` runs one chunk per ``next()`` and returns
    each request's result when done."""

    group: list[_Request]
    steps: Generator[None, None, list[Any]]


class JudgeWorker:
    """Runs every judgment of a server in one thread, merging concurrent requests into one judge call.

    Requests take turns: each one's items are cut into chunks of about the judge's ``chunk_size``
    judgments (whole items, or parts of a larger item: :meth:`Task.parts`), and the worker runs one chunk
    of each request in progress in turn, taking
    in new requests between chunks. A one-item score therefore waits for at most one chunk of each
    request ahead of it, not for the whole of a long audit (head-of-line blocking).

    Args:
        judge: The server's judge; every request's task runs on it (one backend, one store).
        batch_wait_s: How long the worker waits after the first request of a batch for others to
            arrive (0: merge only what is already waiting).
    """

    def __init__(self, judge: Judge, batch_wait_s: float = 0.0) -> None:
        self.judge = judge
        self._wait = max(0.0, batch_wait_s)
        self._queue: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.stats = WorkerStats()

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the judge worker is stopped")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="trustjudge-judge", daemon=True)
                self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Finish the requests already queued, then end the thread."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)

    async def submit(self, task: Task | None, items: list[Item], *, audit: dict[str, Any] | None = None) -> Any:
        """Queue one request and wait for its result.

        Args:
            task: What to judge (requests of equal tasks merge), or ``None`` for an audit.
            items: Validated items.
            audit: :meth:`Judge.audit` keyword arguments (scales, delta, ks, bootstrap, seed, protocol).

        Returns:
            The request's records as dicts, or the audit report dict.
        """
        self._start()
        request = _Request(task, items, audit or {})
        self._queue.put(request)
        return await asyncio.wrap_future(request.future)

    def _loop(self) -> None:
        jobs: deque[_Job] = deque()
        stopping = False
        while True:
            arrived: list[_Request] = []
            if not jobs:
                if stopping:
                    return
                first = self._queue.get()  # idle: wait for work
                if first is None:
                    return
                if self._wait:
                    time.sleep(self._wait)
                arrived.append(first)
            while True:  # take in whatever arrived meanwhile (between two chunks when busy)
                try:
                    request = self._queue.get_nowait()
                except queue.Empty:
                    break
                if request is None:
                    stopping = True
                else:
                    arrived.append(request)
            groups: dict[Any, list[_Request]] = {}
            for request in arrived:
                if request.future.set_running_or_notify_cancel():  # False: the client went away
                    groups.setdefault(request.group, []).append(request)
            for group in groups.values():
                self._begin(group, jobs, first=False)
            if jobs:
                job = jobs.popleft()
                if self._advance(job, jobs):
                    jobs.append(job)  # the back of the line: every other request runs a chunk first

    def _begin(self, group: list[_Request], jobs: deque[_Job], *, first: bool) -> None:
        """Start a job for ``group`` (it does no judging before its first turn) and line it up."""
        job = _Job(group, self._steps(group))
        if self._advance(job, jobs):
            if first:
                jobs.appendleft(job)
            else:
                jobs.append(job)

    def _advance(self, job: _Job, jobs: deque[_Job]) -> bool:
        """Run the job's next step; hand out its results when it is done. Whether it has more to do."""
        try:
            next(job.steps)
            return True
        except StopIteration as done:
            for request, result in zip(job.group, done.value):
                request.future.set_result(result)
        except Exception as exc:  # handed to the waiting requests; the handlers map it to a status
            if len(job.group) > 1 and not isinstance(exc, BackendUnavailable):
                # One request's problem must not fail the requests merged with it: run each apart, first
                # (what the merged run finished is in the store, so nothing is judged twice).
                for request in reversed(job.group):
                    self._begin([request], jobs, first=True)
            else:
                for request in job.group:
                    request.future.set_exception(exc)
        except BaseException as exc:
            # A backend's own BaseException (a plug-in's is named by the engine before it gets here): the thread
            # would die with it and every request, this one and all later ones, wait for ever.
            stopped = TrustJudgeError(
                f"the judging stopped: {type(exc).__name__}: {exc} (raised while judging, and not an Exception); "
                "the service goes on, and every judgment already made is in the store")
            for request in job.group:
                request.future.set_exception(stopped)
        return False

    def _chunks(self, task: Task, items: Sequence[Item]) -> Iterator[list[Item]]:
        """About ``chunk_size`` judgments at a time, one turn of the worker: whole items, and an item
        larger than that in parts (:meth:`Task.parts`: responses, or pairs, at a time)."""
        budget = self.judge.chunk_size
        chunk: list[Item] = []
        size = 0
        for item in items:
            for part in task.parts(item, budget) if task.size(item) > budget else (item,):
                chunk.append(part)
                size += task.size(part)
                if size >= budget:
                    yield chunk
                    chunk, size = [], 0
        if chunk:
            yield chunk

    def _steps(self, group: list[_Request]) -> Generator[None, None, list[Any]]:
        """The group's work, pausing (``yield``) before each chunk: the worker's turns."""
        yield  # nothing runs before the job's first turn
        head = group[0]
        self.stats.requests += len(group)
        self.stats.engine_runs += 1
        if len(group) > 1:
            self.stats.merged_requests += len(group)
        if head.task is None:
            # An audit judges in turns what its report needs, then builds the report from the store.
            options = head.options
            protocol = options.get("protocol")
            phases: list[tuple[Task, list[Item]]] = [
                (self.judge.score_task(points, protocol), head.items) for points in options.get("scales", (5, 100))]
            phases.append((self.judge.compare_task(protocol), [it for it in head.items if len(it.responses) >= 2]))
            for n, (task, items) in enumerate(phases):
                for k, chunk in enumerate(self._chunks(task, items)):
                    if n or k:
                        yield
                    for _ in self.judge.run(task, chunk):
                        pass
            return [self.judge.audit(head.items, **options).report.to_dict()]
        task = head.task
        merged = [item for request in group for item in request.items]
        counts = [sum(task.count(it) for it in request.items) for request in group]
        expected = [it.id for it in merged for _ in range(task.count(it))]
        records: list[dict[str, Any]] = []
        for k, chunk in enumerate(self._chunks(task, merged)):
            if k:
                yield
            records.extend(r.to_dict() for r in self.judge.run(task, chunk))
        if [r["item_id"] for r in records] != expected:
            # slicing by position relies on input order: never hand out someone else's records
            raise RuntimeError("judge records are not in input order; cannot split a merged batch")
        self.stats.judgments += len(records)
        results: list[Any] = []
        start = 0
        for n in counts:
            results.append(records[start:start + n])
            start += n
        return results
