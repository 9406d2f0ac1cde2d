"""Items from wherever users keep them: a file, a pandas DataFrame, a Hugging Face ``Dataset``, a list of dicts.

:func:`read_items` is the public reader (``trustjudge.read_items``); :func:`as_items` is what ``Judge.score``
and the other judging methods call on what they are given. A table in another schema is read through the
column mapping the CLI's ``--map`` takes (:func:`~trustjudge.io._frames.parse_mapping`); rows without an id
column take the source's own index (a DataFrame's index labels, a list's or ``Dataset``'s positions from 0)
as their item id, so each record names the row it came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError
from . import _frames
from ._adapters import _checked, iter_dataset
from ._items import Item

ACCEPTED = ("Item objects, a list of dicts (item records or table rows), a pandas DataFrame or a Hugging Face "
            "datasets.Dataset")
"""What the judging methods accept, for the TypeError that refuses anything else."""

Mapped = Mapping[str, str] | str | None


def _refuse(value: Any, why: str = "") -> TypeError:
    hint = " (read a file with trustjudge.read_items(path))" if isinstance(value, (str, bytes, Path)) else ""
    return TypeError(f"cannot judge a value of type {type(value).__name__}{why}: pass {ACCEPTED}{hint}")


def _first_error(values: Iterable[Item | InputError]) -> list[Item]:
    """The items, or the first bad row raised (with how many more there are): nothing is judged from a table
    with a bad row, so no record is missing silently."""
    items: list[Item] = []
    errors: list[InputError] = []
    for value in values:
        (errors if isinstance(value, InputError) else items).append(value)  # type: ignore[arg-type]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more bad row(s))" if len(errors) > 1 else ""
        raise InputError(first.reason + more, file=first.file, line=first.line, field=first.field)
    return items


def _dict_rows(name: str, rows: Sequence[Any], mapping: Mapped) -> Iterator[Item | InputError]:
    numbered = list(enumerate(rows, start=1))
    columns = list(dict.fromkeys(str(k) for row in rows for k in row))
    return _frames.table_items(name, numbered, mapping, columns=columns, labels=[str(k) for k in range(len(rows))])


def read_items(source: Any, mapping: Mapped = None, *, format: str = "auto",
               min_responses: int = 1) -> list[Item]:
    """Every item of ``source``: a file path (any format of ``--format``), a pandas DataFrame, a Hugging Face
    ``datasets.Dataset``, a list of dicts, or a list of :class:`Item` (returned as they are).

    Args:
        source: Where the items are.
        mapping: ``{field: column}`` or ``"question=prompt,response=output"``: the CLI's ``--map``.
        format: A file's format (default: detected); in-memory sources have none.
        min_responses: Items with fewer responses are refused.

    Raises:
        InputError: The first bad row, naming the source, the row (1-based) and the field.
        TypeError: ``source`` is none of the above.
        ConfigError: A malformed mapping.
    """
    if isinstance(source, (str, Path)):
        return _first_error(iter_dataset(source, format, min_responses=min_responses, mapping=mapping))
    if format != "auto":
        raise ConfigError(f"format={format!r} applies to files; an in-memory {type(source).__name__} has none")
    if _frames.is_table(source):
        name, columns, rows, labels = _frames.memory_table(source)
        values = _frames.table_items(name, rows, mapping, columns=columns, labels=labels)
        return _first_error(_checked(values, name, min_responses))
    _frames.refuse_splits(source)
    if isinstance(source, (bytes, Mapping)) or not isinstance(source, Iterable):
        raise _refuse(source)
    given: list[Any] = list(source)
    if all(isinstance(r, Item) for r in given):
        if mapping is not None:
            raise ConfigError("a column mapping applies to tables and dicts, not to Item objects")
        return _first_error(_checked(iter(given), "<items>", min_responses))
    if all(isinstance(r, Mapping) for r in given):
        return _first_error(_checked(_dict_rows("<list>", given, mapping), "<list>", min_responses))
    bad = next((r for r in given if not isinstance(r, (Item, Mapping))), None)
    raise _refuse(source, f" holding a {type(bad).__name__}" if bad is not None else " mixing Item objects and dicts")


def as_items(items: Any, mapping: Mapped = None) -> Iterable[Item]:
    """What a judging method judges: a stream of :class:`Item` passes through lazily (each checked to be one),
    anything else goes through :func:`read_items`. A file path is refused (``read_items(path)`` reads one)."""
    _frames.refuse_splits(items)
    if isinstance(items, (str, bytes, Path, Mapping)):
        raise _refuse(items)
    if _frames.is_table(items) or mapping is not None or isinstance(items, Sequence):
        if isinstance(items, Sequence) and mapping is None and all(isinstance(i, Item) for i in items):
            return items  # the common case, untouched (a Sequence keeps its progress bar total)
        return read_items(items, mapping)
    if not isinstance(items, Iterable):
        raise _refuse(items)
    return _streamed(iter(items))


def item_list(items: Any, mapping: Mapped = None) -> list[Item]:
    """:func:`as_items` read whole, for what judges the items more than once (an audit, a ranking)."""
    checked = as_items(items, mapping)
    return checked if isinstance(checked, list) else list(checked)


def _streamed(it: Iterator[Any]) -> Iterator[Item]:
    first = next(it, None)
    if first is None:
        return
    if isinstance(first, Mapping):  # a generator of dicts: read whole, as a list of them
        yield from read_items([first, *it])
        return
    for item in chain([first], it):
        if not isinstance(item, Item):
            raise _refuse(item, " among the items")
        yield item


__all__ = ["ACCEPTED", "as_items", "item_list", "read_items"]
