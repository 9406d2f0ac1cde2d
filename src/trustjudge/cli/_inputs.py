"""Reading an input file for a command: every line validated before any model call, every problem reported.

The input may be a folder (a Hugging Face ``datasets`` dataset saved with ``save_to_disk``): it is hashed
file by file to tell that it did not change between validation and judging.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.markup import escape

from .._adapters import iter_dataset
from .._items import Item
from ..errors import InputError
from ._common import err, fail


class InputFormat(str):
    """An input format (``--format``) carrying its column mapping (``--map``): a ``str``, so that every command
    hands it on as its format, and the mapping reaches :func:`~trustjudge._adapters.iter_dataset` with it."""

    mapping: dict[str, str] | None

    def __new__(cls, fmt: str, mapping: dict[str, str] | None = None) -> InputFormat:
        value = super().__new__(cls, fmt)
        value.mapping = mapping
        return value


def _mapping(fmt: str) -> dict[str, str] | None:
    return fmt.mapping if isinstance(fmt, InputFormat) else None


def _report_problems(path: Path, problems: list[InputError], count: int, skip_invalid: bool) -> None:
    if not count:
        return
    for p in problems:
        err.print(f"[red]{'skipped' if skip_invalid else 'error'}:[/] {escape(str(p))}", highlight=False)
    if count > len(problems):
        err.print(f"... and {count - len(problems)} more")
    if not skip_invalid:
        raise SystemExit(fail(f"{count} invalid line(s) in {path}; fix them or pass --skip-invalid"))
    err.print(f"[yellow]{count} invalid line(s) skipped[/]")


def _require_items(path: Path, valid: int, invalid: int) -> None:
    if not valid:
        raise InputError("holds no valid item to judge" if invalid else "holds no items", file=str(path))


def _validated(path: Path, skip_invalid: bool, min_responses: int, fmt: str) -> Iterator[Item]:
    """The file's valid items; once it is read through, every problem is reported (the run stops on them
    unless ``skip_invalid``) and a file without a valid item is an error."""
    problems: list[InputError] = []
    count = valid = 0
    for value in iter_dataset(path, fmt, min_responses=min_responses, mapping=_mapping(fmt)):
        if isinstance(value, InputError):
            count += 1
            if len(problems) < 20:
                problems.append(value)
        else:
            valid += 1
            yield value
    _report_problems(path, problems, count, skip_invalid)
    _require_items(path, valid, count)


def read_items(path: Path, skip_invalid: bool, min_responses: int, fmt: str = "auto") -> list[Item]:
    """Read and validate the whole file once, before any model call; report every problem; return the
    valid items."""
    return list(_validated(path, skip_invalid, min_responses, fmt))


def scan(path: Path, skip_invalid: bool, min_responses: int, fmt: str, per_item: Callable[[Item], int]) -> int:
    """Validate the whole file before any model call (keeping nothing in memory); return the judgments."""
    return sum(per_item(item) for item in _validated(path, skip_invalid, min_responses, fmt))


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


def stream_items(path: Path, min_responses: int, fmt: str, skip_invalid: bool, sha256: str) -> Iterator[Item]:
    """The items of a file validated (and hashed) before: the file is read a second time while judging,
    so a problem that was not there at validation means the file changed, and stops the run."""
    for value in iter_dataset(path, fmt, min_responses=min_responses, mapping=_mapping(fmt)):
        if isinstance(value, InputError):
            if not skip_invalid:
                raise changed(path)
            continue
        yield value
    if digest(path) != sha256:
        raise changed(path)
