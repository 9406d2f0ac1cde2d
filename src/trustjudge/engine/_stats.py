"""What an engine counts (:class:`EngineStats`) and what a run would do (:class:`PlanSummary`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..backends._speeds import Speed


@dataclass
class EngineStats:
    """Counters of one engine: model calls made and outputs served from the store."""

    label_calls: int = 0
    generate_calls: int = 0
    from_store: int = 0
    recorded_lookups: int = 0
    """Label requests a recorded judge answered from its file: no model was asked (not in :attr:`model_calls`)."""
    unscored: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    seconds: float = 0.0
    last_error: str | None = None
    """The message of the last backend call that failed for good (its judgments are ``backend_error``)."""

    @property
    def model_calls(self) -> int:
        return self.label_calls + self.generate_calls

    def count_labels(self, n: int, *, model: bool) -> None:
        """Count ``n`` label requests answered: by a model (:attr:`label_calls`), or read from a recorded judge's
        file (:attr:`recorded_lookups`)."""
        if model:
            self.label_calls += n
        else:
            self.recorded_lookups += n

    def recorded_note(self, colon: str = "", sep: str = ", ") -> str:
        """``", recorded lookups N"`` where a recorded judge answered (empty otherwise), for a summary line."""
        return f"{sep}recorded lookups{colon} {self.recorded_lookups}" if self.recorded_lookups else ""


@dataclass(frozen=True)
class PlanSummary:
    """What a run would do (``--dry-run``)."""

    judgments: int
    model_calls: int
    stored: int
    unscorable: int
    prompt_tokens: int
    prompt_tokens_to_run: int
    speed: Speed
    """The cost model the estimate uses, with where it comes from (``speed.source``)."""
    protocol: str
    judgments_to_run: int = 0
    generated_tokens_to_run: int = 0
    """Tokens the critiques may generate (``cot``: ``max_new_tokens`` each, an upper bound)."""
    tokens_read_to_run: int = 0
    """Prompt tokens the calls to make will evaluate: what each prompt does not share with the one run
    before it (the backend reuses that part's KV cache); ``cot``: twice, and the critique."""

    @property
    def tokens_per_s(self) -> float:
        return self.speed.prompt_tokens_per_s

    @property
    def measured(self) -> bool:
        """True when the speed was measured in this store (not shipped, not a default)."""
        return self.speed.source.startswith("measured")

    @property
    def estimated_seconds(self) -> float:
        read = self.tokens_read_to_run or self.prompt_tokens_to_run
        return self.speed.seconds(self.model_calls, read, self.generated_tokens_to_run)
