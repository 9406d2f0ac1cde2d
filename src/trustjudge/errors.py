"""The one exception tree of trustjudge.

::

    TrustJudgeError
    ├── ConfigError            bad option, unknown judge name, bad template
    ├── PrerequisiteError      an optional dependency or a model file is missing
    ├── InputError             a bad line in an items file (names file, line, field)
    ├── StoreError             the judgment store cannot be opened or migrated
    └── BackendError           a backend call failed (that judgment is unscored: backend_error)
        ├── TransientBackendError   worth retrying (timeouts, rate limits, 5xx)
        └── BackendUnavailable      no judgment can succeed (connection refused, HTTP 401/403/404): the run stops

Messages say how to fix the problem.
"""

from __future__ import annotations


class TrustJudgeError(Exception):
    """Base class of every error trustjudge raises on purpose."""


class ConfigError(TrustJudgeError):
    """An option, judge name or template is invalid."""


class PrerequisiteError(TrustJudgeError):
    """Something that must be installed or present is missing."""


def pip_dependency_error(feature: str, packages: list[str], extra: str) -> PrerequisiteError:
    """Build the error raised when an optional dependency is missing."""
    names = ", ".join(packages)
    return PrerequisiteError(f"{feature}: {names} {'are' if len(packages) > 1 else 'is'} not installed; install with "
                             f"`pip install 'trustjudge[{extra}]'`.")


class InputError(TrustJudgeError):
    """A problem in an input file, located by file, line and field."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None, rows: tuple[int, ...] = (), item: str | None = None) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.reason = message
        self.rows = rows
        """The lines of every row left out with this problem, where an item spans several rows (CSV, tables):
        one bad row leaves its whole item out. Empty: the problem's own line alone."""
        self.item = item
        """The id of the item left out, where ``rows`` names several."""
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        elif line is not None:
            where = f"line {line}: "
        what = f"field '{field}': " if field else ""
        super().__init__(f"{where}{what}{message}")


class StoreError(TrustJudgeError):
    """The judgment store cannot be used."""


class BackendError(TrustJudgeError):
    """A backend call failed for good."""


class BackendUnavailable(BackendError):
    """The judge cannot be reached or refuses every request: stop the run instead of failing each judgment."""


class NoLogprobsError(BackendUnavailable):
    """The judge returns no log-probabilities (some APIs, reasoning models): its labels cannot be read. A
    backend raises it from ``label_logprobs``; the engine then stops the run naming the judge and the
    ``labels=sampled&samples=N`` option (labels estimated from N sampled answers) instead."""


class TransientBackendError(BackendError):
    """A backend call failed in a way worth retrying."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
