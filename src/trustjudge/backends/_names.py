"""Options on a judge name: ``<prefix>/<model>[@<url>]?key=value&key=value``.

One parser for every prefix: :func:`split_options` splits the query off a name, :func:`join_options` puts
it back. The engine's own options (:data:`ENGINE_OPTIONS`, read by :func:`engine_options`) are taken off
before the backend is built, so every backend sees only its own: ``labels=sampled&samples=N`` (labels
estimated from N sampled answers, for judges that return no log-probabilities) works on any prefix. An
option a backend does not know is refused by it (the HTTP backends) or, for in-process prefixes that take
none, by :func:`~trustjudge.backends.get_backend`.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from ..errors import ConfigError

__all__ = ["DEFAULT_SAMPLES", "ENGINE_OPTIONS", "engine_options", "join_options", "split_options"]

ENGINE_OPTIONS = ("labels", "samples")
"""The options the engine reads: ``labels=sampled`` (and ``samples=N``); ``labels`` with another value
(``exact``, ``top_k``) is the HTTP backends' own."""
DEFAULT_SAMPLES = 10
MAX_SAMPLES = 1000


def split_options(name: str) -> tuple[str, dict[str, str]]:
    """``(name without its query, {option: value})``; an option given twice is refused."""
    base, sep, query = name.partition("?")
    if not sep:
        return name, {}
    pairs = parse_qsl(query, keep_blank_values=True)
    options: dict[str, str] = {}
    for key, value in pairs:
        if key in options:
            raise ConfigError(f"judge {name!r}: the option {key!r} is given twice")
        options[key] = value
    return base, options


def join_options(base: str, options: dict[str, str]) -> str:
    """``base`` with ``options`` as its query (none: ``base`` itself)."""
    return f"{base}?{urlencode(options)}" if options else base


def engine_options(name: str) -> tuple[str, int]:
    """``(the name the backend is built from, samples)``: ``samples`` is N for ``labels=sampled&samples=N``
    (default :data:`DEFAULT_SAMPLES`), else 0 (labels read from log-probabilities)."""
    base, options = split_options(name)
    if options.get("labels") != "sampled":
        if "samples" in options:
            raise ConfigError(f"judge {name!r}: samples= needs labels=sampled (labels estimated from N sampled "
                              "answers)")
        return name, 0
    options.pop("labels")
    text = options.pop("samples", str(DEFAULT_SAMPLES))
    try:
        samples = int(text)
    except ValueError:
        samples = 0
    if not 1 <= samples <= MAX_SAMPLES:
        raise ConfigError(f"judge {name!r}: samples must be an integer from 1 to {MAX_SAMPLES}, got {text!r}")
    return join_options(base, options), samples
