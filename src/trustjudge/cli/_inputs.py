"""Reading an input file for a command: every line validated before any model call, every problem reported.

The input may be a folder (a Hugging Face ``datasets`` dataset saved with ``save_to_disk``): it is hashed
file by file to tell that it did not change between validation and judging.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.markup import escape

from ..errors import InputError
from ..io._adapters import iter_dataset
from ..io._items import Item
from ._common import err, fail


class InputFormat(str):
    """An input format (``--format``) carrying its column mapping (``--map``): a ``str``, so that every command
    hands it on as its format, and the mapping reaches :func:`~trustjudge.io._adapters.iter_dataset` with it."""

    mapping: dict[str, str] | None

    def __new__(cls, fmt: str, mapping: dict[str, str] | None = None) -> InputFormat:
        value = super().__new__(cls, fmt)
        value.mapping = mapping
        return value


def _mapping(fmt: str) -> dict[str, str] | None:
    return fmt.mapping if isinstance(fmt, InputFormat) else None


def _span(lines: tuple[int, ...]) -> str:
    """Line numbers as a range where they are consecutive ("2-4"), else listed ("2, 5, 9, ...")."""
    if list(lines) == list(range(lines[0], lines[0] + len(lines))):
        return f"{lines[0]}-{lines[-1]}"
    shown = ", ".join(str(n) for n in lines[:8])
    return shown + (", ..." if len(lines) > 8 else "")


class _Tally:
    """What the invalid records of a file leave out: records (items), rows, and items of several rows."""

    def __init__(self) -> None:
        self.problems: list[InputError] = []
        self.count = self.rows = self.whole = 0

    def add(self, problem: InputError) -> None:
        self.count += 1
        self.rows += max(1, len(problem.rows))
        self.whole += len(problem.rows) > 1
        if len(self.problems) < 20:
            self.problems.append(problem)


def _report_problems(path: Path, tally: _Tally, skip_invalid: bool) -> None:
    if not tally.count:
        return
    for p in tally.problems:
        note = (f" (item {p.item!r} is left out whole: all its {len(p.rows)} rows, lines {_span(p.rows)})"
                if len(p.rows) > 1 else "")
        err.print(f"[red]{'skipped' if skip_invalid else 'error'}:[/] {escape(str(p) + note)}", highlight=False)
    if tally.count > len(tally.problems):
        err.print(f"... and {tally.count - len(tally.problems)} more")
    if tally.rows == tally.count:
        what = f"{tally.count} invalid line(s)"
    else:  # one bad row leaves out its whole item: count what is left out, not the bad rows
        what = (f"{tally.rows} line(s) of {tally.count} invalid item(s) ({tally.whole} item(s) of several rows "
                "left out whole)")
    if not skip_invalid:
        raise SystemExit(fail(f"{what} in {path}; fix them or pass --skip-invalid"))
    err.print(f"[yellow]{what} skipped[/]")


MAX_PAIRS = 1225
"""The most pairs an item may have in a pairwise command unless ``--max-pairs`` says more: every pair of 50
responses (n responses make n(n-1)/2 pairs, each judged in both orders)."""


def too_many_pairs(item: Item, path: Path, max_pairs: int | None) -> InputError | None:
    """The error of an item with more pairs than ``max_pairs`` (``None``: no bound), or ``None``."""
    if max_pairs is None or len(item.responses) < 2:
        return None
    n = len(item.all_pairs())
    if n <= max_pairs:
        return None
    how = "explicit pairs" if item.pairs is not None else f"{len(item.responses)} responses"
    return InputError(f"item {item.id!r} has {n:,} pairs ({how}), {2 * n:,} pairwise judgments in both orders, over "
                      f"--max-pairs {max_pairs:,}: pairwise work grows with the square of the responses. List the "
                      "pairs to judge in `pairs`, split the item, or raise --max-pairs", file=str(path), line=item.line,
                      field="pairs" if item.pairs is not None else "responses")


def _require_items(path: Path, valid: int, invalid: int) -> None:
    if not valid:
        raise InputError("holds no valid item to judge" if invalid else "holds no items", file=str(path))


def _validated(path: Path, skip_invalid: bool, min_responses: int, fmt: str,
               max_pairs: int | None = None) -> Iterator[Item]:
    """The file's valid items; once it is read through, every problem is reported (the run stops on them
    unless ``skip_invalid``) and a file without a valid item is an error. With ``max_pairs``, an item with
    more pairs is a problem too."""
    tally = _Tally()
    valid = 0
    for value in iter_dataset(path, fmt, min_responses=min_responses, mapping=_mapping(fmt)):
        if isinstance(value, Item):
            value = too_many_pairs(value, path, max_pairs) or value
        if isinstance(value, InputError):
            tally.add(value)
        else:
            valid += 1
            yield value
    _report_problems(path, tally, skip_invalid)
    _require_items(path, valid, tally.count)


def read_items(path: Path, skip_invalid: bool, min_responses: int, fmt: str = "auto", *,
               max_pairs: int | None = None) -> list[Item]:
    """Read and validate the whole file once, before any model call; report every problem; return the
    valid items (with ``max_pairs``, those with at most that many pairs)."""
    return list(_validated(path, skip_invalid, min_responses, fmt, max_pairs))


def scan(path: Path, skip_invalid: bool, min_responses: int, fmt: str, per_item: Callable[[Item], int], *,
         max_pairs: int | None = None) -> int:
    """Validate the whole file before any model call (keeping nothing in memory); return the judgments."""
    return sum(per_item(item) for item in _validated(path, skip_invalid, min_responses, fmt, max_pairs))


def digest(path: Path) -> str:
    """SHA-256 of a file's bytes, or of a folder's files' names and bytes (to tell that it changed between
    the validation and the judging)."""
    h = hashlib.sha256()
    try:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if file is not path:
                h.update(b"\0" + str(file.relative_to(path)).encode("utf-8", "surrogateescape") + b"\0")
            with file.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    return h.hexdigest()


def changed(path: Path) -> InputError:
    """The error of a file that changed between its validation and its judging."""
    return InputError("the file changed while it was being judged; nothing was written. Run the same command "
                      "again: every finished judgment is in the store", file=str(path))


def stream_items(path: Path, min_responses: int, fmt: str, skip_invalid: bool, sha256: str, *,
                 max_pairs: int | None = None) -> Iterator[Item]:
    """The items of a file validated (and hashed) before: the file is read a second time while judging,
    so a problem that was not there at validation means the file changed, and stops the run."""
    for value in iter_dataset(path, fmt, min_responses=min_responses, mapping=_mapping(fmt)):
        if isinstance(value, Item):
            value = too_many_pairs(value, path, max_pairs) or value
        if isinstance(value, InputError):
            if not skip_invalid:
                raise changed(path)
            continue
        yield value
    if digest(path) != sha256:
        raise changed(path)


def item_dict(item: Item) -> dict[str, Any]:
    """An item as the items format writes it (the fields labelling needs)."""
    d = asdict(item)
    out: dict[str, Any] = {"id": d["id"], "question": d["question"]}
    for key in ("context", "reference", "profile", "knowledge", "evidence", "checklist", "gold_claims"):
        if d.get(key):
            out[key] = d[key]
    out["responses"] = [{k: v for k, v in r.items() if v not in (None, (), [], {})} for r in d["responses"]]
    return out
