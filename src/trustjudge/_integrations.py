"""What the pytest plugin and the inspect_ai scorer share: one-question items, and how a judgment reads.

Both integrations judge one question at a time and must say how each number was obtained (method,
scale, judge, protocol, how the labels were read), with the labels the judge put its probability on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .engine._scoring import SCORE_METHODS
from .errors import ConfigError
from .io._items import Item, Pair, Response, _text_arg


def one_item(question: str, responses: Sequence[str], *, item_id: str = "check", context: str | None = None,
             reference: str | None = None, ids: Sequence[str] = ("A", "B")) -> Item:
    """An item holding ``responses`` (one, or two compared as the pair A, B).

    Raises:
        InputError: a text is not a string (``None``, a number...), holds a lone surrogate, or the question
            is empty, naming the argument (``response``, ``response A``, ``question``...).
    """
    if len(responses) > len(ids):
        raise ConfigError(f"one_item takes at most {len(ids)} responses, got {len(responses)}")
    _text_arg(question, "question")
    for name, value in (("context", context), ("reference", reference)):
        if value is not None:
            _text_arg(value, name, allow_empty=True)
    for rid, text in zip(ids, responses):
        _text_arg(text, "response" if len(responses) == 1 else f"response {rid}", allow_empty=True)
    rs = tuple(Response(rid, text) for rid, text in zip(ids, responses))
    pairs = (Pair(rs[0].id, rs[1].id),) if len(rs) == 2 else None
    return Item(item_id, question, rs, context=context, reference=reference, pairs=pairs)


def check_method(method: str) -> None:
    if method not in SCORE_METHODS:
        raise ConfigError(f"method must be one of {', '.join(SCORE_METHODS)}, got {method!r}")


def top_labels(distribution: Mapping[str, float] | None, n: int = 5) -> str:
    """The ``n`` most probable labels with their raw probabilities ("8: 0.412, 7: 0.301, ...")."""
    if not distribution:
        return "none (no distribution was read)"
    ranked = sorted(distribution.items(), key=lambda kv: -kv[1])  # stable: ties keep the scale order
    text = ", ".join(f"{label}: {p:.3f}" for label, p in ranked[:n])
    rest = ranked[n:]
    if rest:
        text += f" (+{len(rest)} more labels with {sum(p for _, p in rest):.3f})"
    return text


def fmt_number(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "none"
    return f"{x:.{digits}f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def fmt_scores(scores: Mapping[str, float | None]) -> str:
    return ", ".join(f"{m} {fmt_number(scores.get(m))}" for m in SCORE_METHODS)


def clip(text: str, limit: int = 200) -> str:
    """``text`` quoted on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split()) or text  # whitespace alone is shown as it is
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")
