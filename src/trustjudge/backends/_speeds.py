"""How fast each bundled judge runs here, for time estimates (``--dry-run``, the progress bar's ETA).

A judgment's time is modelled as ``seconds_per_call + prompt_tokens / prompt_tokens_per_s`` (plus, for
generations, ``generated_tokens / generated_tokens_per_s``). ``bench/estimates.py`` fits the three numbers
for every bundled judge on this project's reference machine (2 cores, no GPU) and rewrites the table
between the ``BEGIN MEASURED`` / ``END MEASURED`` lines; the engine prefers a speed measured in the
user's own store once it has seen enough tokens (:data:`MIN_MEASURED_TOKENS`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

MIN_MEASURED_TOKENS = 1000
"""Prompt tokens a store must have timed for a backend before its own measurement is preferred."""


@dataclass(frozen=True)
class Speed:
    """A judge's cost model: fixed seconds per call plus prompt and generated tokens at a rate."""

    prompt_tokens_per_s: float
    seconds_per_call: float = 0.0
    generated_tokens_per_s: float = 0.0
    """0: unknown (generations are then estimated at the prompt rate / 10)."""
    source: str = "default estimate"
    """Where the numbers come from: ``measured in this store``, ``shipped (bench/estimates.py, ...)``,
    ``default estimate`` (the backend's guess)."""

    def seconds(self, calls: int, prompt_tokens: int, generated_tokens: int = 0) -> float:
        """Estimated wall time of ``calls`` calls over ``prompt_tokens`` prompt and ``generated_tokens``."""
        if self.prompt_tokens_per_s <= 0:
            return float("nan")
        gen_rate = self.generated_tokens_per_s or self.prompt_tokens_per_s / 10
        return (calls * self.seconds_per_call + prompt_tokens / self.prompt_tokens_per_s
                + generated_tokens / gen_rate)

    def labelled(self, source: str) -> Speed:
        return replace(self, source=source)


# The table below is written by bench/estimates.py (do not edit by hand between the markers).
# BEGIN MEASURED
MEASURED: dict[str, Speed] = {
    "llamacpp/qwen2.5-coder-1.5b": Speed(prompt_tokens_per_s=61.9, seconds_per_call=0.204),
    "hf/qwen2.5-coder-1.5b": Speed(prompt_tokens_per_s=55.1, seconds_per_call=0.242),
    "llamacpp/smollm2-135m": Speed(prompt_tokens_per_s=241.4, seconds_per_call=0.000),
    "hf/smollm2-135m": Speed(prompt_tokens_per_s=540.5, seconds_per_call=0.003),
    "llamacpp/gemma3-270m": Speed(prompt_tokens_per_s=367.4, seconds_per_call=0.020),
    "hf/gemma3-270m": Speed(prompt_tokens_per_s=572.0, seconds_per_call=0.127),
}
MEASURED_ON = "2026-12-03, 2 cores"
# END MEASURED


def shipped(judge: str) -> Speed | None:
    """The speed bench/estimates.py measured for a bundled judge name, if any."""
    speed = MEASURED.get(judge)
    if speed is None:
        return None
    return speed.labelled(f"shipped figure for {judge} (bench/estimates.py, {MEASURED_ON})")
