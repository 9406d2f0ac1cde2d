"""Execution results kept in the judgment store, so that a rerun of the same code executes nothing."""

from __future__ import annotations

import hashlib

from ..engine._store import Store, content_key
from ._local import Executor
from ._results import ExecutionResult


def execution_key(code: str, files: dict[str, bytes] | None, runner: dict[str, object]) -> str:
    """The store key of a run: the code's hash, each input file's name and hash, the runner's settings."""
    return content_key({"kind": "execution", "code": hashlib.sha256(code.encode("utf-8")).hexdigest(),
                        "files": {name: hashlib.sha256(data).hexdigest()
                                  for name, data in sorted((files or {}).items())},
                        "runner": runner})


class StoredExecutor:
    """An executor whose results are read from (and written to) a :class:`Store` first."""

    def __init__(self, executor: Executor, store: Store) -> None:
        self.executor = executor
        self.store = store
        self.executed = 0   # runs that really happened (not read from the store)

    def settings(self) -> dict[str, object]:
        return self.executor.settings()

    def run(self, code: str, files: dict[str, bytes] | None = None) -> ExecutionResult:
        runner = self.executor.settings()
        key = execution_key(code, files, runner)
        stored = self.store.get_execution(key)
        if stored is not None:
            return ExecutionResult.from_json(stored, cached=True)
        result = self.executor.run(code, files)
        self.executed += 1
        self.store.put_execution(key, runner, result.to_json())
        return result
