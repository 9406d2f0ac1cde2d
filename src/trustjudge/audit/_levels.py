"""The target agreement and risk delta of a selection, checked; numbers quoted as the user gave them; the
guarantee worded as what it is (:func:`guarantee_text`), with a warning when its threshold barely passed.

A delta above :data:`MAX_DELTA` is refused unless forced (``--force-delta``, ``force_delta=True``): "agreement
>= target with probability >= 0.1" is a guarantee that fails more often than it holds. Messages quote numbers
as given (``1e-300``, ``0.99999999``), never rounded to a value the user did not ask for (``0.0``, ``1``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ..errors import ConfigError

MAX_DELTA = 0.5
"""The largest risk delta accepted without ``force_delta``: above it the guarantee holds less often than not."""


def quote(x: Any) -> str:
    """A number as the user typed it: 15 significant digits (``1e-300``, ``0.99999999``; the noise of one
    subtraction such as ``1 - 0.9`` removed), a non-number as its repr."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return repr(x)
    return f"{x:.15g}"


def complement(x: float) -> str:
    """``1 - x`` exactly as a decimal where that is short (``0.9`` for 0.1, ``1e-08`` for 0.99999999), else
    written as the subtraction (``1 - 1e-300``, which no float tells from 1)."""
    given = quote(x)
    exact = Decimal(1) - Decimal(given)
    short = quote(float(exact))
    return short if Decimal(short) == exact else f"1 - {given}"


def check_levels(target: Any, delta: Any, force_delta: bool = False) -> None:
    """Refuse a target outside (0, 1), a delta outside (0, 1), and a delta above :data:`MAX_DELTA` unless
    ``force_delta`` (a ConfigError quoting the value as given)."""
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not (math.isfinite(target)
                                                                                and 0 < target < 1):
        raise ConfigError(f"the target agreement must be between 0 and 1 (exclusive), got {quote(target)}")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (math.isfinite(delta) and 0 < delta < 1):
        raise ConfigError(f"delta must be between 0 and 1 (exclusive), got {quote(delta)}")
    if delta > MAX_DELTA and not force_delta:
        raise ConfigError(f"delta {quote(delta)} is above {MAX_DELTA:g}: the guarantee would hold with probability "
                          f">= {complement(delta)} only, less often than it fails; use a delta of at most "
                          f"{MAX_DELTA:g}, or force it (--force-delta; force_delta=True from Python and in the "
                          "service)")


def guarantee_text(g: Mapping[str, Any]) -> str:
    """What a selection (its ``to_dict``) guarantees, worded as what it is: a property of the procedure over
    calibration sets, not of this one threshold; the calibration set's own numbers are labelled in-sample (they
    were measured on the verdicts the threshold was chosen on, after choosing it), and the post-selection
    Clopper-Pearson bound is left out."""
    text = (f"guarantee (of the procedure, over calibration sets): with probability >= {complement(g['delta'])}, it "
            f"keeps only verdicts agreeing with humans >= {quote(g['target_agreement'])} (threshold "
            f"{g['threshold']:.4f}, chosen on {g['calibration_n']} calibration verdicts")
    if g.get("calibration_agreement") is not None:
        text += (f"; in-sample, after selection: {g['calibration_kept']} of them kept, agreement "
                 f"{g['calibration_agreement']:.3f}")
    if isinstance(g.get("selection"), Mapping):
        text += f"; its map fitted on {g['selection']['fit_units']} other calibration verdicts"
    return text + ")"


def marginal_warning(g: Mapping[str, Any], who: str = "the threshold") -> str | None:
    """A warning when a selection's threshold barely passed (``marginal``: its p-value near delta, or its kept count
    near the minimum), else None."""
    if not g.get("marginal"):
        return None
    p = g.get("p_value")
    return (f"warning: {who} barely passed its test (p-value {'?' if p is None else format(p, '.3g')} against delta "
            f"{quote(g['delta'])}; {g['calibration_kept']} calibration verdicts kept, {g.get('min_kept')} the fewest "
            "any threshold could pass with): the guarantee holds over calibration sets, and among those that pass "
            "this narrowly the target fails on new verdicts more often than delta; label more items, or lower "
            "the target")
