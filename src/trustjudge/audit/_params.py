"""A calibration file's map, checked before use: its classes, each parameter of its method, its position bias.

A calibration file is trusted input (docs/trust.md), but a parameter that is not a usable number must never reach
a verdict: temperature 0 or NaN made every calibrated probability NaN (bare ``NaN`` in JSON lines, an HTTP 500
from the service) and a negative temperature silently made the least likely class the verdict. Each check names
the file and the field (``params.temperature``, ``params.bias[2]``), and gives the value as the file has it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ._calibration import CalibrationMap

MIN_TEMPERATURE = 1e-12
"""The smallest temperature read: log-probabilities (at least log 1e-12) divided by it stay finite."""
MAX_MAGNITUDE = 1e12
"""The largest bias, Platt slope or intercept read (in absolute value): every calibrated probability stays finite
(fitted maps are far inside: a perfectly separated set fits a slope near 9)."""

# Each method's parameter sets (a two-class temperature is Platt's slope with no intercept: {a, b = 0}).
_SHAPES: dict[str, tuple[frozenset[str], ...]] = {
    "vector": (frozenset({"temperature", "bias"}),),
    "temperature": (frozenset({"temperature"}), frozenset({"a", "b"})),
    "platt": (frozenset({"a", "b"}),),
    "isotonic": (frozenset({"x", "y"}),),
}
_TWO_CLASSES = frozenset({"a", "b", "x", "y"})


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _bad(source: str, field: str, value: Any, wanted: str) -> ConfigError:
    return ConfigError(f"{source}: field {field!r} must be {wanted}, got {value!r}")


def read_classes(raw: list[Any], source: str) -> tuple[str, ...]:
    """A file's ``classes``: at least two distinct non-empty strings."""
    if len(raw) < 2:
        raise _bad(source, "classes", raw, "at least two class names")
    for i, name in enumerate(raw):
        if not isinstance(name, str) or not name:
            raise _bad(source, f"classes[{i}]", name, "a non-empty string")
        if name in raw[:i]:
            raise ConfigError(f"{source}: field 'classes[{i}]' repeats {name!r}")
    return tuple(raw)


def _bounded(source: str, field: str, value: Any) -> float:
    if not _number(value) or abs(value) > MAX_MAGNITUDE:
        raise _bad(source, field, value, f"a finite number of at most {MAX_MAGNITUDE:g} in absolute value")
    return float(value)


def _curve(source: str, params: Mapping[str, Any]) -> None:
    """An isotonic map's points: x strictly increasing, y non-decreasing, both probabilities, as many of each."""
    x, y = params["x"], params["y"]
    for name, values in (("x", x), ("y", y)):
        if not isinstance(values, list) or not values:
            raise _bad(source, f"params.{name}", values, "a non-empty list of probabilities")
        for i, v in enumerate(values):
            if not _number(v) or not 0 <= v <= 1:
                raise _bad(source, f"params.{name}[{i}]", v, "a probability (a number from 0 to 1)")
            if i and (v <= values[i - 1] if name == "x" else v < values[i - 1]):
                order = "increasing" if name == "x" else "non-decreasing"
                raise _bad(source, f"params.{name}[{i}]", v, f"{order} (after {values[i - 1]!r})")
    if len(x) != len(y):
        raise ConfigError(f"{source}: fields 'params.x' and 'params.y' need as many points ({len(x)} and {len(y)})")


def read_map(method: str, classes: Sequence[str], params: Mapping[str, Any], source: str) -> CalibrationMap:
    """The map a file's ``method``, ``classes`` and ``params`` give, every parameter checked (a ConfigError
    naming the file and the field otherwise)."""
    keys = frozenset(params)
    shapes = _SHAPES[method]
    if keys not in shapes:
        wanted = " or ".join("{" + ", ".join(sorted(s)) + "}" for s in shapes)
        raise ConfigError(f"{source}: field 'params' of a {method} map holds {wanted}, got "
                          f"{{{', '.join(sorted(keys))}}}")
    if keys & _TWO_CLASSES and len(classes) != 2:
        raise ConfigError(f"{source}: field 'params' is a two-class {method} map, but 'classes' has "
                          f"{len(classes)}")
    if "temperature" in params:
        t = params["temperature"]
        if not _number(t) or t < MIN_TEMPERATURE:
            raise _bad(source, "params.temperature", t, f"a finite number > 0 (at least {MIN_TEMPERATURE:g})")
    if "bias" in params:
        bias = params["bias"]
        if not isinstance(bias, list) or len(bias) != len(classes):
            raise _bad(source, "params.bias", bias, f"a list of one number per class ({len(classes)})")
        for i, b in enumerate(bias):
            _bounded(source, f"params.bias[{i}]", b)
    for name in ("a", "b"):
        if name in params:
            _bounded(source, f"params.{name}", params[name])
    if "x" in params:
        _curve(source, params)
    return CalibrationMap(method, tuple(classes), dict(params))


def read_position_bias(value: Any, source: str) -> float | None:
    """A file's ``position_bias``: null, or a finite log-odds (bounded as the other parameters)."""
    return None if value is None else _bounded(source, "position_bias", value)
