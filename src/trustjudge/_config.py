"""A judge's settings, as one frozen value: :class:`JudgeConfig`.

:class:`~trustjudge.Judge` is a backend, a store and one of these. Every setting is checked when the value
is made (a bad one raises :class:`~trustjudge.ConfigError` naming it), so a judge never starts work on a
setting it would refuse later. ``Judge(name, scale=5)`` is ``Judge(name, config=JudgeConfig(scale=5))``.
"""

from __future__ import annotations

import dataclasses
import math
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .engine._asking import Protocol
from .engine._engine import Closing
from .errors import ConfigError
from .modes._prompts import check_system
from .modes._prompts import scale as make_scale
from .modes._registry import template_spec

__all__ = ["JudgeConfig"]

_LEGACY = "_template"
"""``NAME_template=PATH``, the keyword each template had before ``templates=``: still accepted."""


@dataclass(frozen=True)
class JudgeConfig:
    """How a judge asks and reads its judgments (see :class:`~trustjudge.Judge` for what each does)."""

    protocol: Protocol = "direct"
    scale: int | str = 10
    """The ``score`` scale: a top value (10: 1..10) or an integer range ("0-5")."""
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
    """User templates by name (any mode's, :attr:`~trustjudge.mode_api.Mode.templates`): a path, or the
    template's text; the rest are the files of the modes that own them."""
    system: str | None = None
    """The system prompt of every judgment; ``None``: the packaged one. Part of every prompt, so of every key."""

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
        make_scale(self.scale)  # any integer range; a bad one is named here, before any work
        if self.system is not None:
            check_system(self.system)
        for name in sorted(self.templates):
            template_spec(name)  # a name no mode owns is named here, with the known ones
        object.__setattr__(self, "templates", MappingProxyType(dict(self.templates)))

    def template(self, name: str) -> string.Template:
        """The template ``name`` of any mode (:attr:`~trustjudge.mode_api.Mode.templates`): this config's own
        (:attr:`templates`), else the file the owning mode ships."""
        return template_spec(name).load(self.templates.get(name))

    @classmethod
    def of(cls, base: JudgeConfig | None = None, **settings: Any) -> JudgeConfig:
        """``base`` (default: the defaults) with ``settings`` changed; ``NAME_template=`` keywords add to
        :attr:`templates`. An unknown setting is a :class:`ConfigError` listing the known ones."""
        base = base or cls()
        templates = dict(base.templates)
        names = {f.name for f in dataclasses.fields(cls)}
        for key in [k for k in settings if k.endswith(_LEGACY) and k not in names]:
            value = settings.pop(key)
            if value is not None:
                templates[key[:-len(_LEGACY)]] = value
        if "templates" in settings:
            templates.update(settings.pop("templates") or {})
        unknown = sorted(set(settings) - names)
        if unknown:
            raise ConfigError(f"unknown judge setting(s) {', '.join(unknown)}: the settings are "
                              + ", ".join(sorted(names | {f"NAME{_LEGACY}"})))
        return dataclasses.replace(base, **settings, templates=templates)
