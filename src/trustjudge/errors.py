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
            └── BackendStopped      the backend called sys.exit (or a plug-in's raised a BaseException) while judging

Messages say how to fix the problem.
"""

from __future__ import annotations

from collections.abc import Sequence


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


MAX_NAMED = 5
"""Items named in a stop's message at most (the rest counted)."""


class BackendStopped(BackendUnavailable):
    """A backend called ``sys.exit`` (or, a plug-in's, raised a ``BaseException`` of its own) while judging."""

    def __init__(self, backend: str, how: str, origin: str | None, prompts: Sequence[str],
                 items: Sequence[str] = ()) -> None:
        self.backend = backend
        """The backend's fingerprint."""
        self.how = how
        """What it did: ``called sys.exit(0)``, ``raised Stop: enough``."""
        self.origin = origin
        """The plug-in it came from (``None``: a built-in backend)."""
        self.prompts = tuple(prompts)
        """The prompts of the batch in flight."""
        self.items = tuple(items)
        """The ids of the items those prompts judge, where known."""
        came = f" (it comes from {origin})" if origin else ""
        super().__init__(f"backend {backend} {how} while judging{_items(self.items)}{came}: the run is stopped "
                         "(every judgment already made is in the store: fix the backend and run the same command "
                         "to resume, asking none of them again)")

    def naming(self, items: Sequence[str]) -> BackendStopped:
        """The same stop, naming the items judged when it happened."""
        return BackendStopped(self.backend, self.how, self.origin, self.prompts, items)


def _items(ids: Sequence[str]) -> str:
    if not ids:
        return ""
    named = ", ".join(repr(i) for i in ids[:MAX_NAMED])
    more = f" and {len(ids) - MAX_NAMED} more" if len(ids) > MAX_NAMED else ""
    return f" item {named}" if len(ids) == 1 else f" one of items {named}{more}"
