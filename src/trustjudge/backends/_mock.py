"""A scripted fake backend, reachable by name as ``mock/<name>``, for tests of maths and control flow.

``MockBackend(script=...)`` takes a callable that maps a request to label probabilities (or raises),
and keeps a ``history`` of every request it received. ``mock/hash`` is a built-in deterministic
judge whose probabilities come from a hash of the prompt: no model, same numbers every run.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ._base import Backend, GenerateRequest, Generation, LabelRequest, LabelResult

LabelScript = Callable[[LabelRequest], Sequence[float]]
"""Returns one probability per label (they need not sum to 1)."""
GenerateScript = Callable[[GenerateRequest], Generation]


def hashed_probs(request: LabelRequest) -> list[float]:
    """Deterministic pseudo-random probabilities (total 0.9) for a request."""
    weights = []
    for label in request.labels:
        digest = hashlib.sha256(f"{request.prompt}\x00{label}".encode()).digest()
        weights.append(1.0 + digest[0] / 16.0)
    total = sum(weights)
    return [0.9 * w / total for w in weights]


def _default_generation(request: GenerateRequest) -> Generation:
    text = "The response is adequate. "
    return Generation(text, (-0.5,) * 5, "stop", len(request.prompt.split()))


class MockBackend(Backend):
    """A backend whose outputs come from Python callables."""

    def __init__(self, name: str = "mock", script: LabelScript = hashed_probs,
                 generate_script: GenerateScript = _default_generation, context_length: int = 100_000,
                 keep_history: bool = True, accepts_images: bool = True) -> None:
        self.name = name
        self.accepts_images = accepts_images
        """A scripted fake stands in for a vision judge too (its script sees the image markers in the prompt)."""
        self.script = script
        self.generate_script = generate_script
        self._context_length = context_length
        self.keep_history = keep_history
        self.history: list[LabelRequest | GenerateRequest] = []
        self.calls = 0
        # Cross-process call counting for subprocess tests: one line per call appended to this file.
        self._count_file = os.environ.get("TRUSTJUDGE_MOCK_CALLS")
        # Seconds per request, so that subprocess tests can kill a run half way.
        self._delay = float(os.environ.get("TRUSTJUDGE_MOCK_DELAY", "0"))

    @property
    def fingerprint(self) -> str:
        return f"mock:{self.name}"

    @property
    def context_length(self) -> int:
        return self._context_length

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def max_label_tokens(self, labels: Sequence[str]) -> int:
        return 1

    def format_prompt(self, system: str, user: str, assistant_prefix: str) -> str:
        return f"[system] {system}\n[user] {user}\n[assistant] {assistant_prefix}"

    def _count(self, n: int) -> None:
        if self._delay:
            time.sleep(self._delay * n)
        self.calls += n
        if self._count_file:
            with Path(self._count_file).open("a") as fh:
                fh.write("x\n" * n)

    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        out = []
        for req in requests:
            if self.keep_history:
                self.history.append(req)
            probs = list(self.script(req))
            out.append(LabelResult(tuple(math.log(p) if p > 0 else -math.inf for p in probs),
                                   self.count_tokens(req.prompt)))
        self._count(len(requests))
        return out

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        out = []
        for req in requests:
            if self.keep_history:
                self.history.append(req)
            out.append(self.generate_script(req))
        self._count(len(requests))
        return out
