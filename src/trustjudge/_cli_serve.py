"""Where ``trustjudge serve`` lived: it is :mod:`trustjudge.cli._serve` now (kept for older imports)."""

from .cli._serve import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_ITEMS,
    DEFAULT_MAX_JUDGMENTS,
    KEYS_ENV,
    ServeError,
    api_keys,
    is_loopback,
)
from .cli._serve import serve as command

__all__ = ["DEFAULT_BODY_TIMEOUT_S", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_ITEMS", "DEFAULT_MAX_JUDGMENTS", "KEYS_ENV",
           "ServeError", "api_keys", "command", "is_loopback"]
