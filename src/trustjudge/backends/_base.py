"""The abstract backend interface that the engine drives.

A backend only computes: label log-probabilities for a batch of prompts, and generations with
token log-probabilities. Retries, caching in the store, batching and progress belong to the engine.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .._retry import RetryPolicy


@dataclass(frozen=True)
class LabelRequest:
    """Score every candidate continuation of ``prompt`` exactly.

    ``labels`` are full continuations (for example ``"57]"``): the backend returns, for each one,
    the sum of the log-probabilities of its tokens after the prompt.
    """

    prompt: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class LabelResult:
    """Log-probabilities of each continuation of a :class:`LabelRequest`, in order."""

    logprobs: tuple[float, ...]
    prompt_tokens: int
    latency_s: float = 0.0
    method: str = "exact"
    """How the distribution was obtained (records' ``label_method``): ``exact`` (teacher-forced), ``top_k``
    (a server's top-k log-probabilities, the label trie walked) or ``top_k_first`` (a chat answer's top-k
    at the label's first position, and along the tokens the judge wrote)."""
    api: str | None = None
    """The HTTP API that produced it (``completions`` or ``chat``); ``None`` for an in-process judge."""


@dataclass(frozen=True)
class GenerateRequest:
    """Generate a continuation of ``prompt`` until a stop string, EOS or ``max_new_tokens``."""

    prompt: str
    stop: tuple[str, ...]
    max_new_tokens: int
    temperature: float = 0.0
    seed: int = 0


FinishReason = Literal["stop", "length", "eos"]

WORD_JOINER = "\u2060"


def neutralise(text: str, specials: Sequence[str]) -> str:
    """``text`` with every special-token string in it broken by a word joiner (U+2060, invisible).

    The texts a judge prompt quotes (responses, questions, contexts) are read as plain text, never as
    the model's control tokens: a response holding ``<|im_end|>`` must not close the judge's turn and
    write a fake assistant turn. Longest strings first, repeated until none is left.
    """
    ordered = sorted((s for s in specials if len(s) >= 2), key=len, reverse=True)
    for _ in range(8):
        hit = False
        for special in ordered:
            if special in text:
                text = text.replace(special, special[0] + WORD_JOINER + special[1:])
                hit = True
        if not hit:
            break
    return text


@dataclass(frozen=True)
class Generation:
    """A generated text (cut before the stop string) with the log-probability of each token."""

    text: str
    token_logprobs: tuple[float, ...]
    finish_reason: FinishReason
    prompt_tokens: int
    latency_s: float = 0.0
    completion_tokens: int = field(default=-1)

    def __post_init__(self) -> None:
        if self.completion_tokens < 0:
            object.__setattr__(self, "completion_tokens", len(self.token_logprobs))


class Backend(abc.ABC):
    """A judge model. Subclasses implement the two abstract methods and the properties."""

    #: Whether :meth:`label_logprobs` scores any text exactly (teacher forcing).
    exact_labels: bool = True
    calls_model: bool = True
    """Whether answering asks a model; ``False`` for a judge that reads answers from a file (``recorded/``): its
    lookups are counted as ``recorded_lookups``, not as model calls."""
    #: Default prompt tokens per second used for time estimates before one is measured.
    default_tokens_per_s: float = 450.0
    #: Whether the judge sees images: a prompt then holds them as markers (``trustjudge._images.marker``), each
    #: looked up by digest (``_images.split``). A text-only judge given an item with images is refused first.
    accepts_images: bool = False

    @property
    @abc.abstractmethod
    def fingerprint(self) -> str:
        """A string that changes whenever the model's outputs could change (weights hash)."""

    @property
    @abc.abstractmethod
    def context_length(self) -> int:
        """The number of tokens the model can attend to."""

    @abc.abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` as the model would see it as a prompt."""

    @abc.abstractmethod
    def format_prompt(self, system: str, user: str, assistant_prefix: str) -> str:
        """Render one judge turn as the model expects it, ending with ``assistant_prefix``."""

    @abc.abstractmethod
    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        """Exact log-probabilities of every label continuation, for each request."""

    @abc.abstractmethod
    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """Generate a continuation for each request."""

    def use_retry_policy(self, policy: RetryPolicy) -> bool:
        """Take the engine's retry policy for the backend's own network requests.

        A backend whose one batch fans out into many requests (HTTP judges) retries each request with
        it and returns True; the engine then does not retry whole batches on top. The default: False.
        """
        return False

    def max_label_tokens(self, labels: Sequence[str]) -> int:
        """The most tokens any label takes (used to check the context length)."""
        return max(self.count_tokens(label) for label in labels) + 1

    def close(self) -> None:  # noqa: B027 - optional hook
        """Free resources."""
