"""The retry policy: which failures are retried, how often, and how long to wait.

The engine owns it. It applies it to whole backend batches, and hands it to backends whose one batch
fans out into many network requests (:meth:`Backend.use_retry_policy`), so that a 20% fault rate on
single requests does not fail every batch that needs fifty of them. Only
:class:`~trustjudge.errors.TransientBackendError` is retried; the wait is exponential with jitter,
or the server's ``Retry-After`` when it sent one, capped at ``cap_s``.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from .errors import TransientBackendError

T = TypeVar("T")


@dataclass
class RetryPolicy:
    """Retry transient failures ``max_retries`` times with exponential backoff and jitter."""

    max_retries: int = 4
    base_s: float = 0.5
    cap_s: float = 60.0
    seed: int = 0
    sleep: Callable[[float], None] = time.sleep
    retries: int = 0
    """Retries made so far (all threads)."""
    _rng: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def delay(self, attempt: int, exc: TransientBackendError) -> float:
        """Seconds to wait before retry number ``attempt + 1``."""
        base = exc.retry_after if exc.retry_after is not None else self.base_s * 2**attempt
        with self._lock:
            jitter = 1.0 + 0.25 * self._rng.random()
        return min(self.cap_s, base * jitter)

    def call(self, fn: Callable[[], T], *,
             give_up: Callable[[TransientBackendError, int], bool] | None = None) -> T:
        """``fn()``, retried on :class:`TransientBackendError`; the last failure is raised.

        ``give_up(exc, attempt)`` (attempt 0 is the first call) may end the retries early: a caller that
        knows a failure will repeat (a server that has never answered) spends less of the budget on it.
        """
        for attempt in range(self.max_retries + 1):
            try:
                return fn()
            except TransientBackendError as exc:
                if attempt == self.max_retries or (give_up is not None and give_up(exc, attempt)):
                    raise
                with self._lock:
                    self.retries += 1
                self.sleep(self.delay(attempt, exc))
        raise AssertionError("unreachable")
