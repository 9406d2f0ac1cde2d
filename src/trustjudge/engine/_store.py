"""The SQLite judgment store: every model output, keyed by the content that produced it.

A key hashes (canonical JSON, SHA-256) everything that can change a model output: the backend's
fingerprint (model weights hash and prompt format), the rendered prompt, the labels or decoding
parameters. Operational settings (batch size, retries, timeouts) are not part of it, so a rerun with
other settings, or another scoring/aggregation method, makes no model call.

The schema is an ordered list of named migrations, applied once each and recorded in ``_migrations``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson
import platformdirs

from ..errors import StoreError

HASH_PREFIX = "s256:"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the same value always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_key(value: Any) -> str:
    """The store key of a request: an algorithm-tagged SHA-256 of its canonical JSON."""
    return HASH_PREFIX + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def default_store_path() -> Path:
    """``<user data dir>/trustjudge/judgments.sqlite``."""
    return Path(platformdirs.user_data_dir("trustjudge")) / "judgments.sqlite"


Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[tuple[str, Migration]] = []


def migration(fn: Migration) -> Migration:
    """Register a migration; its function name is its permanent identity."""
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_outputs(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE outputs (
            key TEXT PRIMARY KEY,
            kind TEXT NOT NULL,               -- 'labels' or 'generate'
            backend TEXT NOT NULL,            -- backend fingerprint
            request TEXT NOT NULL,            -- canonical JSON of the request
            result TEXT NOT NULL,             -- JSON of the model output
            prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            latency_s REAL NOT NULL,
            created_at REAL NOT NULL
        )"""
    )


@migration
def m002_speed(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE speed (
            backend TEXT PRIMARY KEY,
            prompt_tokens INTEGER NOT NULL,
            seconds REAL NOT NULL
        )"""
    )


@migration
def m003_claims(db: sqlite3.Connection) -> None:
    # Work a process has taken on and not finished: other processes judging the same items wait for
    # it instead of repeating it. A claim of a dead process (same host) or past its lease is void.
    db.execute(
        """CREATE TABLE claims (
            key TEXT PRIMARY KEY,
            owner TEXT NOT NULL,              -- one engine: host, pid and a random token
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            expires_at REAL NOT NULL
        )"""
    )


@migration
def m004_claim_identity(db: sqlite3.Connection) -> None:
    # Who holds a claim, robustly: the kernel's boot id and the process's start time, so that a PID
    # reused after a crash or a container restart is not taken for the dead run's process.
    db.execute("ALTER TABLE claims ADD COLUMN boot TEXT NOT NULL DEFAULT ''")
    db.execute("ALTER TABLE claims ADD COLUMN started TEXT NOT NULL DEFAULT ''")
    db.execute("ALTER TABLE claims ADD COLUMN pidns TEXT NOT NULL DEFAULT ''")


@migration
def m005_imports(db: sqlite3.Connection) -> None:
    # Where imported outputs came from (`store import`): one row per import, and per output it added the import
    # that added it (outputs the engine computed itself have no row here).
    db.execute(
        """CREATE TABLE imports (
            id INTEGER PRIMARY KEY,
            source TEXT NOT NULL,             -- the file imported, as named
            sha256 TEXT NOT NULL,             -- the SHA-256 of its bytes
            imported_at REAL NOT NULL,
            outputs INTEGER NOT NULL          -- outputs it added
        )"""
    )
    db.execute("CREATE TABLE imported (key TEXT PRIMARY KEY, import_id INTEGER NOT NULL REFERENCES imports (id))")


@migration
def m006_executions(db: sqlite3.Connection) -> None:
    # Runs of a model's code in a sandbox (trustjudge.execute), keyed by the code's and its input files'
    # hashes and the runner's settings (isolation, limits), so that a rerun executes nothing.
    db.execute(
        """CREATE TABLE executions (
            key TEXT PRIMARY KEY,
            runner TEXT NOT NULL,             -- canonical JSON of the runner's settings
            result TEXT NOT NULL,             -- JSON of the execution result (files base64)
            created_at REAL NOT NULL
        )"""
    )


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _boot_id() -> str:
    """This kernel boot's id (Linux); empty elsewhere."""
    return _read("/proc/sys/kernel/random/boot_id")


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _start_time(pid: int) -> str:
    """When process ``pid`` started, in clock ticks since boot (Linux); empty if unknown."""
    stat = _read(f"/proc/{pid}/stat")
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


def _claim_void(claim: tuple[str, int, str, str, str, float], host: str, now: float) -> bool:
    """Whether a claim of another owner is void: its lease ended, or its process is gone."""
    c_host, pid, boot, started, pidns, expires = claim
    if expires < now:
        return True
    mine_boot = _boot_id()
    if boot and mine_boot and boot == mine_boot and pidns == _pid_namespace():
        # Same running kernel and PID namespace: the PID and its start time name one process.
        return not _process_alive(pid) or (bool(started) and _start_time(pid) != started)
    if boot and mine_boot and boot != mine_boot and c_host == host:
        return True  # this machine rebooted since the claim was made
    if c_host == host and not boot:
        return not _process_alive(pid)  # a claim made without an identity: as before
    return False  # another machine or container: its lease says (it renews it while it runs)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rollback(db: sqlite3.Connection) -> None:
    """Roll back the open transaction, if any. SQLite may have rolled it back itself (a full disk); a
    failing ROLLBACK must not hide the error that caused it."""
    if db.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def _store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    text = str(exc)
    if "full" in text:
        why = ("the disk is full: free some space and run the same command again (every finished batch is "
               "kept)")
    elif "malformed" in text or "not a database" in text or "no such table" in text or "no such column" in text:
        why = (f"it is damaged or half-migrated ({text}): check it with `sqlite3 {path} 'PRAGMA integrity_check'`, "
               "restore a copy or use another --store")
    elif "readonly" in text or "read-only" in text:
        why = f"it cannot be written ({text}): make it writable, or use another --store"
    elif "locked" in text or "busy" in text:
        why = f"another process holds it too long ({text}): try again"
    else:
        why = text
    return StoreError(f"the judgment store {path} failed: {why}")


F = TypeVar("F", bound=Callable[..., Any])


def _store_op(fn: F) -> F:
    """Turn SQLite errors of a store method into :class:`StoreError` with what to do about them."""
    @functools.wraps(fn)
    def wrapper(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc) from exc

    return wrapper  # type: ignore[return-value]


def _loads(text: str | bytes) -> Any:
    """A stored result. Rows written before infinities were stored as null hold ``-Infinity``, which
    orjson refuses: those are read with the standard library."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


@dataclass(frozen=True)
class StoredOutput:
    """One row of the store."""

    key: str
    kind: str
    result: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float


class Store:
    """A judgment store in one SQLite file (WAL mode, safe for several processes)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the judgment store's folder {self.path.parent}: "
                             f"{exc.strerror or exc}; choose another --store") from None
        self.read_only = self.path.exists() and not (os.access(self.path, os.W_OK)
                                                     and os.access(self.path.parent, os.W_OK))
        try:
            if self.read_only:
                self._open_read_only()
            else:
                self._db = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None,
                                           check_same_thread=False)
                self._db.execute("PRAGMA busy_timeout = 60000")
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = NORMAL")
                self.migrate()
        except (sqlite3.Error, StoreError) as exc:
            db = getattr(self, "_db", None)
            if db is not None:
                db.close()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot open the judgment store {self.path}: {exc}") from exc
        self._lock = threading.Lock()

    def _open_read_only(self) -> None:
        """Open a store this process cannot write: every stored judgment can be read (re-aggregated);
        a run that needs a model call fails when it tries to store it."""
        uri = self.path.resolve().as_uri()
        try:
            self._db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=60.0, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # A WAL store in a folder we cannot write (no -shm file can be made): read it as it is on disk.
            self._db = sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None,
                                       check_same_thread=False)
        done = {row[0] for row in self._db.execute("SELECT name FROM _migrations")}
        unknown = sorted(done - {name for name, _ in MIGRATIONS})
        missing = [name for name, _ in MIGRATIONS if name not in done]
        if unknown or missing:
            raise StoreError(f"the judgment store {self.path} is read-only and its schema differs from this "
                             f"trustjudge's ({', '.join(unknown or missing)}): open it once writable, or use "
                             "another --store")

    def migrate(self) -> list[str]:
        """Apply the migrations not yet applied; return their names."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            done = {row[0] for row in db.execute("SELECT name FROM _migrations")}
            unknown = sorted(done - {name for name, _ in MIGRATIONS})
            if unknown:
                raise StoreError(f"the judgment store {self.path} was written by a newer trustjudge (unknown "
                                 f"migration {', '.join(unknown)}): upgrade trustjudge, or use another --store")
            applied = []
            for name, fn in MIGRATIONS:
                if name not in done:
                    fn(db)
                    db.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (name, time.time()))
                    applied.append(name)
            db.execute("COMMIT")
        except BaseException:
            _rollback(db)
            raise
        return applied

    @_store_op
    def applied_migrations(self) -> list[str]:
        return [row[0] for row in self._db.execute("SELECT name FROM _migrations ORDER BY rowid")]

    @_store_op
    def get_many(self, keys: Sequence[str]) -> dict[str, StoredOutput]:
        """The stored outputs among ``keys``."""
        found: dict[str, StoredOutput] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    "SELECT key, kind, result, prompt_tokens, completion_tokens, latency_s "
                    f"FROM outputs WHERE key IN ({marks})", chunk
                )
                for key, kind, result, pt, ct, lat in rows:
                    found[key] = StoredOutput(key, kind, _loads(result), pt, ct, lat)
        return found

    @_store_op
    def put_many(self, rows: Iterable[tuple[str, str, str, dict[str, Any], dict[str, Any], int, int, float]],
                 owner: str | None = None) -> None:
        """Insert ``(key, kind, backend, request, result, prompt_tokens, completion_tokens, latency_s)``
        rows in one transaction; a key already present is kept as it is. ``owner``'s claims on the
        keys are dropped in the same transaction."""
        now = time.time()
        data = [
            (key, kind, backend, canonical_json(request), json.dumps(result), pt, ct, lat, now)
            for key, kind, backend, request, result, pt, ct, lat in rows
        ]
        if not data:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR IGNORE INTO outputs (key, kind, backend, request, result, "
                                     "prompt_tokens, "
                                     "completion_tokens, latency_s, created_at) VALUES (?,?,?,?,?,?,?,?,?)", data)
                if owner is not None:
                    self._db.executemany("DELETE FROM claims WHERE key = ? AND owner = ?",
                                         [(row[0], owner) for row in data])
                self._db.execute("COMMIT")
            except BaseException:
                _rollback(self._db)
                raise

    @_store_op
    def get_execution(self, key: str) -> dict[str, Any] | None:
        """A stored execution result, or None."""
        with self._lock:
            row = self._db.execute("SELECT result FROM executions WHERE key = ?", (key,)).fetchone()
        return None if row is None else dict(_loads(row[0]))

    @_store_op
    def put_execution(self, key: str, runner: dict[str, Any], result: dict[str, Any]) -> None:
        """Keep an execution result; a key already present is kept as it is."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO executions (key, runner, result, created_at) VALUES (?,?,?,?)",
                             (key, canonical_json(runner), json.dumps(result), time.time()))

    def new_owner(self) -> str:
        """A claim owner name unique to this call: host, process and a random token."""
        return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"

    @_store_op
    def claim(self, keys: Sequence[str], owner: str, lease_s: float = 60.0) -> set[str]:
        """Claim the keys that are neither stored nor claimed by a live owner; return those now ``owner``'s.

        A claim is void once its lease ends (a running engine renews its leases, see :meth:`renew`) or,
        on the same machine and PID namespace, once its process is gone: the process is named by PID
        and start time, so a PID reused after a crash or restart does not keep a dead run's claims.
        """
        unique = list(dict.fromkeys(keys))
        if not unique:
            return set()
        host, now = socket.gethostname(), time.time()
        mine: set[str] = set()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for start in range(0, len(unique), 500):
                    chunk = unique[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    stale = [
                        key for key, c_owner, *claim in self._db.execute(
                            "SELECT key, owner, host, pid, boot, started, pidns, expires_at FROM claims "
                            f"WHERE key IN ({marks})", chunk)
                        if c_owner != owner and _claim_void(tuple(claim), host, now)
                    ]
                    self._db.executemany("DELETE FROM claims WHERE key = ?", [(k,) for k in stale])
                    stored = {row[0] for row in self._db.execute(f"SELECT key FROM outputs WHERE key IN ({marks})",
                                                                 chunk)}
                    me = (owner, host, os.getpid(), now + lease_s, _boot_id(), _start_time(os.getpid()),
                          _pid_namespace())
                    self._db.executemany(
                        "INSERT OR IGNORE INTO claims (key, owner, host, pid, expires_at, boot, started, pidns) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [(k, *me) for k in chunk if k not in stored])
                    mine.update(row[0] for row in self._db.execute(
                        f"SELECT key FROM claims WHERE owner = ? AND key IN ({marks})", [owner, *chunk]))
                self._db.execute("COMMIT")
            except BaseException:
                _rollback(self._db)
                raise
        return mine

    @_store_op
    def renew(self, owner: str, lease_s: float = 60.0) -> None:
        """Extend every claim of ``owner`` by ``lease_s`` from now (the engine does this while it runs)."""
        with self._lock:
            self._db.execute("UPDATE claims SET expires_at = ? WHERE owner = ?", (time.time() + lease_s, owner))

    @_store_op
    def claim_holders(self, keys: Sequence[str]) -> list[tuple[str, int, float, int]]:
        """``(host, pid, seconds left on the lease, keys)`` of each owner holding claims among ``keys``."""
        unique = list(dict.fromkeys(keys))[:500]
        if not unique:
            return []
        marks = ",".join("?" * len(unique))
        with self._lock:
            rows = self._db.execute(
                f"SELECT host, pid, MAX(expires_at), COUNT(*) FROM claims WHERE key IN ({marks}) GROUP BY owner",
                unique).fetchall()
        now = time.time()
        return [(str(h), int(p), max(0.0, float(e) - now), int(n)) for h, p, e, n in rows]

    @_store_op
    def release(self, keys: Sequence[str], owner: str) -> None:
        """Drop ``owner``'s claims on ``keys`` (work it gave up on: others may try)."""
        with self._lock:
            self._db.executemany("DELETE FROM claims WHERE key = ? AND owner = ?", [(k, owner) for k in keys])

    @_store_op
    def record_speed(self, backend: str, prompt_tokens: int, seconds: float) -> None:
        """Accumulate measured prompt throughput for time estimates."""
        if prompt_tokens <= 0 or seconds <= 0:
            return
        with self._lock:
            self._db.execute(
                "INSERT INTO speed (backend, prompt_tokens, seconds) VALUES (?, ?, ?) "
                "ON CONFLICT(backend) DO UPDATE SET "
                "prompt_tokens = prompt_tokens + excluded.prompt_tokens, seconds = seconds + excluded.seconds",
                (backend, prompt_tokens, seconds),
            )

    @_store_op
    def measured_speed(self, backend: str) -> tuple[int, float] | None:
        """The prompt tokens and seconds this store has timed for ``backend`` (None: never)."""
        row = self._db.execute("SELECT prompt_tokens, seconds FROM speed WHERE backend = ?", (backend,)).fetchone()
        return (int(row[0]), float(row[1])) if row else None

    @_store_op
    def tokens_per_second(self, backend: str) -> float | None:
        row = self._db.execute("SELECT prompt_tokens, seconds FROM speed WHERE backend = ?", (backend,)).fetchone()
        return float(row[0] / row[1]) if row and row[1] > 0 else None

    @_store_op
    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM outputs").fetchone()[0])

    @_store_op
    def integrity_check(self) -> str:
        return str(self._db.execute("PRAGMA integrity_check").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
