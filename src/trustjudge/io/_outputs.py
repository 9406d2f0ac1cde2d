"""Input and output files that cannot destroy data: guarded paths and writes that replace the target only when complete.

Every file a command writes (``--out``, ``--json``, ``--html``) goes through :func:`check_outputs` before
any work starts, and through :func:`atomic_output` while it is written. An output that names an input,
the judgment store (or its ``-wal``/``-shm`` files) or another output is refused; a command that fails or
is interrupted leaves the previous file as it was. A device or a FIFO (``/dev/stdout``, a named pipe) is
streamed to, never replaced; a symlink is followed, so the file it names is replaced and the link kept.
Records go through :func:`record_output`, which writes
JSON lines, or Parquet for a ``.parquet`` path. ``-`` means standard output (and, as an input,
standard input: :func:`readable_input` copies it, or a FIFO, to a private file read once).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TextIO

from ..errors import ConfigError

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; stale temporary files are left
    fcntl = None  # type: ignore[assignment]

STDIO = "-"


def is_stdio(path: str | Path | None) -> bool:
    """True for ``-`` (standard input or output)."""
    return path is not None and str(path) == STDIO


def _same(a: Path, b: Path) -> bool:
    try:
        if a.resolve() == b.resolve():
            return True
    except (OSError, RuntimeError):  # a symlink loop: compare what exists below
        pass
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)  # hard links
    except OSError:
        return False


def _target(path: Path, option: str) -> tuple[Path, bool]:
    """Where an output to ``path`` goes: ``(file, stream)``. A device, a FIFO or a socket (through any
    symlinks: ``/dev/stdout``) is written through as a stream, never replaced; a symlink to a file (or to a
    name not yet created) is followed, so the file it points to is replaced and the link kept.

    Raises:
        ConfigError: ``path`` is a symlink loop.
    """
    try:
        mode = os.stat(path).st_mode  # follows symlinks
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"{option} {path} is a symlink loop: name a file") from None
        raise _unwritable(option, path, exc) from None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return path, True
    if not path.is_symlink():
        return path, False
    return Path(os.path.realpath(path)), False


def check_outputs(outputs: dict[str, Path | None], *, inputs: Iterable[Path | None] = (),
                  store: Path | None = None) -> None:
    """Refuse outputs that would overwrite an input, the store, its WAL/SHM files or each other.

    Args:
        outputs: Option name (``--out``) to the path it names; ``None`` and ``-`` are skipped.
        inputs: Files the command reads (the items file, templates).
        store: The judgment store file.

    Raises:
        ConfigError: naming the option and what it would overwrite.
    """
    protected: list[tuple[str, Path]] = [(f"the input {p}", p) for p in inputs if p is not None and not is_stdio(p)]
    if store is not None:
        protected.append((f"the judgment store {store}", store))
        # SQLite names the WAL, shared-memory and journal files after the store's real file (symlinks resolved).
        for name in dict.fromkeys([str(store), os.path.realpath(store)]):
            protected += [(f"the judgment store's WAL file {name}-wal", Path(f"{name}-wal")),
                          (f"the judgment store's shared-memory file {name}-shm", Path(f"{name}-shm")),
                          (f"the judgment store's journal {name}-journal", Path(f"{name}-journal"))]
    for option, path in outputs.items():
        if path is None or is_stdio(path):
            continue
        for what, other in protected:
            if _same(path, other):
                raise ConfigError(f"{option} {path} would overwrite {what}: choose another output file")
        if path.is_dir():
            raise ConfigError(f"{option} {path} is a folder: name a file")
        target, stream = _target(path, option)
        if stream:
            if not os.access(path, os.W_OK):
                raise ConfigError(f"cannot write {option} {path}: permission denied")
        else:
            _probe(option, target)
        protected.append((f"the {option} output {path}", path))


def _probe(option: str, path: Path) -> None:
    """Fail now, not after the judging, if ``path``'s folder cannot hold the output."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise _unwritable(option, path, exc) from None


def _unwritable(option: str, path: Path, exc: OSError) -> ConfigError:
    return ConfigError(f"cannot write {option} {path}: {exc.strerror or exc}")


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _replacing(path: Path, option: str, binary: bool) -> Iterator[IO[Any]]:
    """A file in ``path``'s folder that replaces ``path`` when the block ends without an exception; for a
    device or a FIFO, the device itself, written as the data comes; for a symlink, the same for the file it
    names (the link is kept)."""
    path, stream = _target(path, option)
    if stream:
        try:
            fh = open(path, "wb") if binary else open(path, "w", encoding="utf-8", newline="")  # noqa: SIM115
        except OSError as exc:
            raise _unwritable(option, path, exc) from None
        with fh:
            yield fh
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path)
        fd, tmp_name = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=TEMP_SUFFIX, dir=path.parent)
    except OSError as exc:
        raise _unwritable(option, path, exc) from None
    tmp = Path(tmp_name)
    # The writer holds a lock on its temporary file until it is renamed (a duplicate descriptor keeps it past
    # the file's close): a later run removes only temporary files whose writer is gone.
    lock = os.dup(fd)
    try:
        if fcntl is not None:
            with contextlib.suppress(OSError):  # a file system without locks: the file is only never removed
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")) as fh:
            yield fh
            try:
                fh.flush()
                os.fsync(fh.fileno())
            except OSError as exc:
                raise _unwritable(option, path, exc) from None
        try:
            if path.exists():  # keep the target's permissions (mkstemp makes the file 0600)
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            else:
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
        except OSError as exc:
            raise _unwritable(option, path, exc) from None
        _fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    finally:
        os.close(lock)


TEMP_SUFFIX = ".tmp"
STALE_AFTER_S = 2.0
"""A temporary file younger than this is never removed (its writer may not have locked it yet)."""
_TEMP_NAME = "[a-z0-9_]{8}"  # what tempfile.mkstemp puts between the prefix and the suffix


def _temp_prefix(path: Path) -> str:
    return f".{path.name}.trustjudge."


def remove_stale_temps(path: Path) -> list[Path]:
    """Remove the temporary files that writes of ``path`` left in its folder when their process was killed
    (SIGKILL, a power cut) before renaming them; return those removed.

    Only this output's own temporary files (``.<name>.trustjudge.XXXXXXXX.tmp``) are looked at, and one is
    removed only when it is a regular file of this user, at least :data:`STALE_AFTER_S` old, and no process
    holds its lock (every writer holds it until the rename; the kernel drops a dead process's locks). Without
    ``fcntl`` (Windows) nothing is removed.
    """
    if fcntl is None:
        return []
    pattern = re.compile(re.escape(_temp_prefix(path)) + _TEMP_NAME + re.escape(TEMP_SUFFIX))
    try:
        names = [n for n in os.listdir(path.parent) if pattern.fullmatch(n)]
    except OSError:
        return []
    removed = []
    for name in names:
        candidate = path.parent / name
        try:
            fd = os.open(candidate, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # gone, a symlink, unreadable
        try:
            st = os.fstat(fd)
            if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid()
                    or time.time() - st.st_mtime < STALE_AFTER_S):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live writer holds it
            now = os.stat(candidate, follow_symlinks=False)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):  # still that file under that name
                os.unlink(candidate)
                removed.append(candidate)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def atomic_output(path: Path | None, option: str = "--out") -> Iterator[TextIO]:
    """A text stream that replaces ``path`` only when the block ends without an exception.

    The data goes to a temporary file in the same folder (so the final rename is atomic); on any
    exception the temporary file is removed and ``path`` is untouched. ``None`` or ``-`` is standard
    output, and a device or a FIFO is that device, written through as it comes; a symlink's target file is
    the one replaced.

    Raises:
        ConfigError: the folder cannot be created or written (naming ``option`` and the path).
    """
    if path is None or is_stdio(path):
        yield sys.stdout
        sys.stdout.flush()
        return
    with _replacing(path, option, binary=False) as fh:
        yield fh  # type: ignore[misc]  # a text-mode file


RECORD_SUFFIXES = ("", ".jsonl", ".ndjson", ".json", ".csv", ".parquet", ".pq")
"""The extensions a records output may have: JSON lines (none, .jsonl, .ndjson, .json), CSV, Parquet."""


def check_record_path(path: Path | None, option: str = "--out") -> None:
    """Refuse a records output whose extension names no format trustjudge writes (``scores.xlsx``); a device
    or a FIFO, written through as JSON lines, is never refused."""
    if path is None or is_stdio(path) or path.suffix.lower() in RECORD_SUFFIXES:
        return
    with contextlib.suppress(OSError):
        if path.exists() and not path.is_file():
            return
    raise ConfigError(f"{option} {path}: cannot write records as {path.suffix!r}; name a .jsonl (JSON lines), "
                      ".csv or .parquet file")


@contextlib.contextmanager
def record_output(path: Path | None, option: str = "--out") -> Iterator[TextIO]:
    """Where a command writes its records, one JSON object per line: :func:`atomic_output`, except that a
    path ending in ``.parquet`` (or ``.pq``) gets the same records as one Parquet table, and one ending in
    ``.csv`` as CSV, one column per method, criterion and check (:func:`trustjudge.io._tables.flatten`, the
    columns of ``to_pandas``), written when the block ends without an exception (the lines are kept in
    memory until then), and replacing ``path`` atomically. Another extension is refused before the block runs.

    Raises:
        ConfigError: the folder cannot be created or written, or the extension names no records format.
        PrerequisiteError: Parquet is asked for and pyarrow is missing (raised before the block runs).
    """
    from . import _tables

    check_record_path(path, option)
    if path is None or is_stdio(path) or not (_tables.is_parquet(path) or _tables.is_csv(path)):
        with atomic_output(path, option) as fh:
            yield fh
        return
    parquet = _tables.is_parquet(path)
    if parquet:
        _tables.require_parquet()
    lines = io.StringIO()
    yield lines
    rows = (json.loads(line) for line in lines.getvalue().splitlines() if line.strip())
    with _replacing(path, option, binary=parquet) as fh:
        if parquet:
            _tables.write_parquet(rows, fh)
        else:
            _tables.write_csv(rows, fh)


def replacing(path: Path, option: str, *, binary: bool = False) -> contextlib.AbstractContextManager[IO[Any]]:
    """A file that replaces ``path`` only when the block ends without an exception (a device, a FIFO or a
    symlink's file as :func:`atomic_output` treats them); ``binary`` for bytes (a Parquet writer)."""
    return _replacing(path, option, binary)


def write_text(path: Path, text: str, option: str) -> None:
    """Write ``text`` to ``path`` (or standard output for ``-``) atomically."""
    with atomic_output(path, option) as fh:
        fh.write(text)


class _Spooled(type(Path())):  # type: ignore[misc]
    """A private copy of a stream input: opened as the copy, named (in messages) as the original."""

    _display: str | None = None

    def __str__(self) -> str:
        return self._display if self._display is not None else super().__str__()

    def __fspath__(self) -> str:
        return str(super().__str__())


def readable_input(path: Path) -> Path:
    """``path`` itself for a regular file or a folder (a saved dataset); for ``-`` (standard input), a FIFO or
    a device, a private copy of what it holds (such inputs can be read only once, and trustjudge validates
    before judging)."""
    if not is_stdio(path) and (not path.exists() or path.is_file() or path.is_dir()):
        return path
    folder = tempfile.mkdtemp(prefix="trustjudge-input-")
    atexit.register(shutil.rmtree, folder, True)
    suffix = "" if is_stdio(path) else path.suffix
    copy = _Spooled(folder, "input" + (suffix or ".jsonl"))
    copy._display = "<stdin>" if is_stdio(path) else str(path)
    with open(os.fspath(copy), "wb") as out:
        if is_stdio(path):
            shutil.copyfileobj(sys.stdin.buffer, out)
        else:
            with path.open("rb") as src:
                shutil.copyfileobj(src, out)
    return copy
