"""The library's progress bar (``progress=True`` of :meth:`Judge.run` and the verbs built on it): its totals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .io._items import Item
from .modes._base import Task, ruled

__all__ = ["RunBar", "judgments"]


class RunBar:
    """The progress bar of a run (``progress=True``) and its callback: its total is the judgments the run asks.

    A chunk's judgments are known before it is judged (:meth:`Task.size`, less what a rule answers); a task that
    only bounds them (claims it extracts) has its chunk's bound replaced by what it asked once the chunk is done,
    and a streamed input adds each chunk as it is read. So the total is never unknown, the bound only stands for
    what is still to come, and the bar ends on ``done/done``."""

    def __init__(self, progress: Any, handle: Any, ahead: int | None) -> None:
        self._progress, self._handle = progress, handle
        self._ahead = ahead or 0  # the judgments of the chunks not yet judged, where the input's size is known
        self._done = self._settled = 0  # judgments made; those made before the current chunk
        self._pending = 0  # the current chunk's judgments, as its task counted them before asking

    def __call__(self, n: int) -> None:
        self._done += n
        self._progress.advance(self._handle, n)

    def chunk(self, judgments: int, counted: bool) -> None:
        """A chunk of ``judgments`` is about to be judged (``counted``: already in the total ahead)."""
        self._settled, self._pending = self._done, judgments
        self._ahead -= judgments if counted else 0
        self._show()

    def chunk_done(self) -> None:
        self._settled, self._pending = self._done, 0
        self._show()

    def _show(self) -> None:
        total = max(self._settled + self._pending, self._done) + max(self._ahead, 0)
        self._progress.update(self._handle, total=total)


def judgments(task: Task, items: Sequence[Item]) -> int:
    """The judgments ``task`` asks of ``items`` (what a rule answers asks nothing), as the task counts them."""
    return sum(task.size(item) for item in ruled(task, items)[0])
