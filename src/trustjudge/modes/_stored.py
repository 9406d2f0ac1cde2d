"""How ``trustjudge store show`` lists a mode's judgments (``Mode(stored=...)``): each judgment's fields in the
mode's own terms (response, pair and order, criterion, check) and the heading it is printed under.

A mode that declares none is listed by its task's questions, numbered (:func:`questions`), under
:func:`question_heading`: a plug-in is shown with no declaration at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..io._items import Item
from ._base import Task

__all__ = ["StoredJudgments", "question_heading", "questions"]

Entries = Callable[[Any, Item, Callable[..., Any], bool], Iterator[dict[str, Any]]]


def questions(task: Task, item: Item, fmt: Callable[..., Any], asked: bool) -> Iterator[dict[str, Any]]:
    """Every question of ``item`` under ``task``, numbered (``index``): the listing of a mode that declares none."""
    task.check(item)
    for n, question in enumerate(task.questions(item, fmt)):
        yield {"item_id": item.id, "index": n, "protocol": task.protocol, "question": question}


def question_heading(entry: Mapping[str, Any]) -> str:
    """The heading of a numbered question (:func:`questions`)."""
    return f"{entry['judgment']} {entry['item_id']}: question {entry['index'] + 1} ({entry['protocol']})"


@dataclass(frozen=True)
class StoredJudgments:
    """How ``store show`` lists a mode's judgments of one item."""

    entries: Entries = questions
    """``entries(task, item, fmt, asked)``: each judgment's fields, with its ``question`` (a
    :class:`~trustjudge.engine._asking.Question`, or the text of why it needs no call) and its ``protocol``;
    ``fmt`` is the judge's prompt formatter, ``asked``: the mode was named (``--kind``), so an item the task
    cannot judge is an error (with ``--kind all`` it gives no entry)."""
    heading: Callable[[Mapping[str, Any]], str] = question_heading
    """The line an entry is printed under (its ``judgment`` is the mode's name)."""
    listed: bool = False
    """Whether ``store show --kind all`` lists it (in the built-in modes' order)."""
