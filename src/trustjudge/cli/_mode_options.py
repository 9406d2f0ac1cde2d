"""A mode's options on the command line: each field of its options dataclass as a click option (how: see
:mod:`trustjudge.cli._mode_command`), the suite file's values, and the options instance a command builds."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

import click

from ..errors import ConfigError, InputError
from ..io._files import Suite
from ..modes._registry import Mode
from ._options import (
    JUDGE_FLAGS,
    Command,
    Finite,
    JudgeOptions,
)

__all__ = ["build_options", "suite_values"]


# -- mode options on the command line -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Option:
    """One field of a mode's options, as the command line has it."""

    name: str
    flag: str
    dest: str
    meta: Mapping[str, Any]
    convert: Callable[[Any], Any]
    """From the command line's value (a choice's text, ``parse``'s input) to the field's."""
    judge: str | None = None
    """The :class:`JudgeOptions` field that fills it (a field spelled like a judge option)."""
    click_option: Callable[[Command], Command] | None = None
    """The click option (``None``: not on the command line)."""


def _hints(mode: Mode) -> dict[str, Any]:
    try:
        return typing.get_type_hints(mode.options)
    except Exception:  # annotations that do not resolve here: basic names only, the rest needs ``parse``
        basic = {"int": int, "float": float, "str": str, "bool": bool}
        return {f.name: basic.get(f.type, f.type) if isinstance(f.type, str) else f.type
                for f in dataclasses.fields(mode.options)}


def _optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> ``(X, True)``; anything else -> ``(tp, False)``."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = typing.get_args(tp)
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2:
            return rest[0], True
    return tp, False


def _same(value: Any) -> Any:
    return value


def _int_or_text(tp: Any) -> tuple[bool, bool]:
    """``int | str`` (``| None``) -> ``(True, optional)``: a text option whose value the mode's build reads (a
    scale range such as ``0-5``), a whole number given as one; anything else -> ``(False, False)``."""
    if typing.get_origin(tp) not in (Union, types.UnionType):
        return False, False
    args = set(typing.get_args(tp))
    optional = type(None) in args
    return args - {type(None)} == {int, str}, optional


def _int_or_same(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _parser(parse: Callable[[str], Any], flag: str) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        try:
            return parse(value)
        except (ConfigError, InputError, ValueError, TypeError) as exc:
            raise click.BadParameter(str(exc), param_hint=flag) from None

    return convert


def _default_text(value: Any, meta: Mapping[str, Any]) -> str:
    if "shown" in meta:
        return str(meta["shown"])
    return str(value)


def _option(f: dataclasses.Field[Any], hint: Any, prefix: str = "") -> _Option:
    meta = f.metadata
    flag = str(meta.get("flag") or "--" + f.name.replace("_", "-"))
    dest = f"mode__{f.name}"
    if flag in JUDGE_FLAGS:
        return _Option(f.name, flag, dest, meta, _same, judge=JUDGE_FLAGS[flag])
    if meta.get("cli", True) is False:
        return _Option(f.name, flag, dest, meta, _same)
    help_text = prefix + str(meta.get("help", ""))
    default = f.default if f.default is not dataclasses.MISSING else None
    suite = meta.get("suite")
    tp, optional = _optional(hint)
    either, either_optional = _int_or_text(hint)
    if either:
        tp, optional = str, either_optional
    choices = meta.get("choices")
    if choices is None and typing.get_origin(tp) is Literal:
        choices = typing.get_args(tp)
    kind: Any
    convert: Callable[[Any], Any] = _same
    if "parse" in meta:
        kind, convert = click.STRING, _parser(meta["parse"], flag)
    elif choices is not None:
        by_text = {str(c): c for c in choices}
        kind, convert = click.Choice(list(by_text)), lambda v: by_text[v]
    elif tp is bool:
        if default:
            return _Option(f.name, flag, dest, meta, _same, click_option=click.option(
                f"{flag}/--no-{flag[2:]}", dest, default=True, show_default=True, help=help_text))
        return _Option(f.name, flag, dest, meta, _same,
                       click_option=click.option(flag, dest, is_flag=True, default=False, help=help_text))
    elif tp in (int, float):
        low = meta.get("ge", meta.get("gt"))
        high = meta.get("le", meta.get("lt"))
        bounds = dict(min=low, max=high, min_open="ge" not in meta and "gt" in meta,
                      max_open="le" not in meta and "lt" in meta)
        if tp is float:
            kind = Finite(**bounds)
        else:
            kind = click.IntRange(**bounds) if low is not None or high is not None else click.INT
    elif tp is str:
        kind = click.STRING
        if either:
            convert = _int_or_same
    else:  # a type the command line cannot spell: only a suite gives it
        return _Option(f.name, flag, dest, meta, _same)
    shown: dict[str, Any] = {"metavar": str(meta["metavar"])} if "metavar" in meta else {}
    if suite is not None:
        help_text += f" [default: the suite's, else {_default_text(default, meta)}]"
        option = click.option(flag, dest, type=kind, default=None, help=help_text, **shown)
    elif default is None or optional:
        option = click.option(flag, dest, type=kind, default=None, help=help_text, **shown)
    elif "parse" in meta:
        help_text += f" [default: {_default_text(default, meta)}]"
        option = click.option(flag, dest, type=kind, default=None, help=help_text, **shown)
    else:
        option = click.option(flag, dest, type=kind, default=str(default) if choices is not None else default,
                              show_default=True, help=help_text, **shown)
    return _Option(f.name, flag, dest, meta, convert, click_option=option)


def _options(mode: Mode, prefix: str = "") -> list[_Option]:
    """The fields of ``mode``'s options as command-line options (``prefix`` begins each help text)."""
    hints = _hints(mode)
    return [_option(f, hints.get(f.name, f.type), prefix) for f in dataclasses.fields(mode.options)]


def suite_values(mode: Mode, suite: Suite) -> dict[str, Any]:
    """The options of ``mode`` that ``suite`` gives (fields whose ``metadata["suite"]`` names a suite field it
    holds), by field name, read with the field's ``parse`` where the suite holds text."""
    values: dict[str, Any] = {}
    for opt in _options(mode):
        where = opt.meta.get("suite")
        value = getattr(suite, str(where), None) if where is not None else None
        if value is None or value == () or value == "":
            continue
        if isinstance(value, str) and "parse" in opt.meta:
            value = opt.meta["parse"](value)
        values[opt.name] = value
    return values


def build_options(mode: Mode, given: Mapping[str, Any], suite: Suite, judging: JudgeOptions) -> Any:
    """An options instance of ``mode``: the command line's values (``given``, by flag), else the suite's, else
    the defaults; a field spelled like a judge option takes the judge option's value."""
    values = suite_values(mode, suite)
    for opt in _options(mode):
        if opt.judge is not None:
            values[opt.name] = getattr(judging, opt.judge)
        elif opt.flag in given and opt.click_option is not None:
            values[opt.name] = given[opt.flag]
    try:
        return mode.options(**values)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"mode {mode.name!r}: {exc}") from None
