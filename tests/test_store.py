"""The SQLite judgment store: migrations, keys, idempotent writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from trustjudge.engine._store import MIGRATIONS, Store, canonical_json, content_key


def test_migrate_blank_db_gives_expected_schema(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    assert store.applied_migrations() == [name for name, _ in MIGRATIONS]
    db = sqlite3.connect(tmp_path / "s.sqlite")
    cols = [r[1] for r in db.execute("PRAGMA table_info(outputs)")]
    assert cols == ["key", "kind", "backend", "request", "result", "prompt_tokens", "completion_tokens",
                    "latency_s", "created_at"]
    assert [r[1] for r in db.execute("PRAGMA table_info(speed)")] == ["backend", "prompt_tokens", "seconds"]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()
    # Reopening applies nothing again.
    again = Store(tmp_path / "s.sqlite")
    assert again.migrate() == []
    assert again.integrity_check() == "ok"


def test_old_store_is_upgraded(tmp_path: Path) -> None:
    # A store made by the first migration only (as an older version would have left it).
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    MIGRATIONS[0][1](db)
    db.execute("INSERT INTO _migrations VALUES (?, 0)", (MIGRATIONS[0][0],))
    db.commit()
    db.close()
    store = Store(path)
    assert store.applied_migrations() == [name for name, _ in MIGRATIONS]


def test_keys_are_canonical() -> None:
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert content_key({"a": 1, "b": 2}) == content_key({"b": 2, "a": 1})
    assert content_key({"a": 1}) != content_key({"a": 2})
    assert content_key({"a": 1}).startswith("s256:")


def test_put_get_and_first_write_wins(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    store.put_many([("k1", "labels", "mock:x", {"p": 1}, {"logprobs": [-1.0]}, 10, 0, 0.5)])
    store.put_many([("k1", "labels", "mock:x", {"p": 1}, {"logprobs": [-9.0]}, 10, 0, 0.5),
                    ("k2", "labels", "mock:x", {"p": 2}, {"logprobs": [-2.0]}, 12, 0, 0.1)])
    got = store.get_many(["k1", "k2", "k3"])
    assert set(got) == {"k1", "k2"}
    assert got["k1"].result["logprobs"] == [-1.0]
    assert store.count() == 2
    store.record_speed("mock:x", 100, 2.0)
    store.record_speed("mock:x", 300, 2.0)
    assert store.tokens_per_second("mock:x") == 100.0
