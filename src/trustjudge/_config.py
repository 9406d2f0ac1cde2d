"""A judge's settings, as one frozen value: :class:`JudgeConfig`.

:class:`~trustjudge.Judge` is a backend, a store and one of these. Every setting is checked when the value
is made (a bad one raises :class:`~trustjudge.ConfigError` naming it), so a judge never starts work on a
setting it would refuse later. ``Judge(name, scale=5)`` is ``Judge(name, config=JudgeConfig(scale=5))``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .engine._asking import Protocol
from .engine._engine import Closing
from .errors import ConfigError

__all__ = ["TEMPLATE_NAMES", "JudgeConfig"]

TEMPLATE_NAMES = ("pointwise", "pairwise", "criterion", "check", "criterion_pair")
"""The templates a judge's prompts are read from, by name (each a mode's: see ``Mode.templates``)."""
_LEGACY = {f"{name}_template": name for name in TEMPLATE_NAMES}
"""The keyword each template had before ``templates=`` (``pointwise_template=PATH``): still accepted."""


@dataclass(frozen=True)
class JudgeConfig:
    """How a judge asks and reads its judgments (see :class:`~trustjudge.Judge` for what each does)."""

    protocol: Protocol = "direct"
    scale: int = 10
    temperature: float = 0.0
    seed: int = 0
    max_new_tokens: int = 256
    min_label_mass: float = 1e-3
    batch_size: int = 8
    chunk_size: int = 256
    delta: float = 0.0
    keep_distribution: bool = False
    max_retries: int = 4
    retry_base_s: float = 0.5
    closing: Closing = "every"
    templates: Mapping[str, str | Path] = field(default_factory=dict)
    """User templates by name (:data:`TEMPLATE_NAMES`): a path, or the template's text; the rest are packaged."""

    def __post_init__(self) -> None:
        if self.protocol not in ("direct", "cot"):
            raise ConfigError(f"protocol must be 'direct' or 'cot', got {self.protocol!r}")
        if self.closing not in ("every", "needed"):
            raise ConfigError(f"closing must be 'every' or 'needed', got {self.closing!r}")
        for name in ("batch_size", "max_new_tokens", "chunk_size", "max_retries"):
            value = getattr(self, name)
            least = 0 if name == "max_retries" else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ConfigError(f"{name} must be an integer of {least} or more, got {value!r}")
        for name, low, high in (("temperature", 0.0, math.inf), ("min_label_mass", 0.0, 1.0),
                                ("delta", 0.0, math.inf), ("retry_base_s", 0.0, math.inf)):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
                span = f"between {low:g} and {high:g}" if math.isfinite(high) else f"of {low:g} or more"
                raise ConfigError(f"{name} must be a finite number {span}, got {value!r}")
        unknown = sorted(set(self.templates) - set(TEMPLATE_NAMES))
        if unknown:
            raise ConfigError(f"unknown template name(s) {', '.join(map(repr, unknown))}: the templates are "
                              + ", ".join(TEMPLATE_NAMES))
        object.__setattr__(self, "templates", MappingProxyType(dict(self.templates)))

    @classmethod
    def of(cls, base: JudgeConfig | None = None, **settings: Any) -> JudgeConfig:
        """``base`` (default: the defaults) with ``settings`` changed; ``NAME_template=`` keywords add to
        :attr:`templates`. An unknown setting is a :class:`ConfigError` listing the known ones."""
        base = base or cls()
        templates = dict(base.templates)
        for key in [k for k in settings if k in _LEGACY]:
            value = settings.pop(key)
            if value is not None:
                templates[_LEGACY[key]] = value
        if "templates" in settings:
            templates.update(settings.pop("templates") or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - names)
        if unknown:
            raise ConfigError(f"unknown judge setting(s) {', '.join(unknown)}: the settings are "
                              + ", ".join(sorted(names | set(_LEGACY))))
        return dataclasses.replace(base, **settings, templates=templates)
