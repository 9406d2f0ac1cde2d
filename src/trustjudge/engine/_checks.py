"""Reading sampled labels, and checking an output (fresh or stored) before the engine uses it."""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Sequence
from typing import Any

from ..backends import Generation, LabelRequest, LabelResult

CLOSE = "]"
"""What closes a bracketed label (``Score: [4]``): label tokens are read with it where the tokenizer joins them."""

SAMPLED = "sampled"
"""The ``method`` of a label distribution estimated from sampled answers (``labels=sampled`` judges)."""
SAMPLE_TEMPERATURE = 1.0
SAMPLED_OPTION = "labels=sampled&samples=N"


def sample_seed(prompt: str, index: int) -> int:
    """The seed of sample ``index`` of ``prompt``: a hash of both, so that samples of different prompts draw
    independent random streams (seed ``k`` on every prompt made the k-th answers of similar prompts alike:
    measured, bench/sampled.py) while each sample keeps one key, its index, in the store."""
    digest = hashlib.sha256(f"{index}\x00{prompt}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def read_label(text: str, labels: Sequence[str], marker: str = "") -> int | None:
    """The index of the label a sampled answer wrote (the text before the closing bracket, blanks stripped),
    or ``None`` when it wrote none of them. With ``marker`` (a ``cot`` answer: its critique, the marker, the
    label), the label is what follows the marker's last occurrence, and an answer without it wrote none."""
    if marker:
        at = text.rfind(marker)
        if at < 0:
            return None
        text = text[at + len(marker):]
    written = text.strip().removesuffix(CLOSE).strip()
    try:
        return list(labels).index(written)
    except ValueError:
        return None


LOGPROB_TOLERANCE = 1e-4
"""How far above 0 a log-probability may be (rounding in a backend's sums) before it is refused."""


def _is_logprob(value: Any) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value)
            and value <= LOGPROB_TOLERANCE)


def _is_count(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0


def _invalid_labels(request: LabelRequest, out: Any) -> str | None:
    """What is wrong with a backend's answer to a label request, or ``None``: one log-probability per label,
    each a number at most 0 (-inf allowed: probability 0), and a token count."""
    if not isinstance(out, LabelResult):
        return f"{type(out).__name__} instead of a LabelResult"
    if not isinstance(out.logprobs, (tuple, list)) or len(out.logprobs) != len(request.labels):
        n = len(out.logprobs) if isinstance(out.logprobs, (tuple, list)) else type(out.logprobs).__name__
        return f"{n} log-probabilities for {len(request.labels)} labels"
    bad = [lp for lp in out.logprobs if not _is_logprob(lp)]
    if bad:
        return f"log-probability {bad[0]!r} (each must be a number <= 0, or -inf)"
    if not _is_count(out.prompt_tokens):
        return f"prompt_tokens {out.prompt_tokens!r}"
    return None


def _invalid_generation(out: Any) -> str | None:
    """What is wrong with a backend's generation, or ``None``."""
    if not isinstance(out, Generation):
        return f"{type(out).__name__} instead of a Generation"
    if not isinstance(out.text, str):
        return f"text of type {type(out.text).__name__}"
    if not isinstance(out.token_logprobs, (tuple, list)) or not all(_is_logprob(lp) for lp in out.token_logprobs):
        return "token log-probabilities that are not numbers <= 0"
    if not _is_count(out.prompt_tokens) or not _is_count(out.completion_tokens):
        return f"token counts {out.prompt_tokens!r}, {out.completion_tokens!r}"
    return None
