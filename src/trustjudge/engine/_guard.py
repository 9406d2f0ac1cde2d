"""What a backend raises while judging, as trustjudge errors (the engine's :meth:`~._engine.Engine._call`).

- an ``Exception`` fails the batch (:class:`~trustjudge.errors.BackendError`: retried item by item, then unscored);
- ``sys.exit`` stops the run (:class:`BackendStopped`) instead of ending the program as if it had succeeded;
- a ``BaseException`` of a plug-in backend's own (built by a factory registered with ``register_backend`` or an
  entry point, :func:`~trustjudge.backends.plugin_origin`) stops the run the same way, naming the plug-in;
- Ctrl-C stays Ctrl-C, and a built-in backend's ``BaseException`` passes as it is (the process dying: the
  crash-resume tests kill a run that way).

Every judgment stored before the stop stays in the store (each batch is stored in its own transaction and
the batch in flight is released), so the same run resumes asking none of them again. The error carries the
prompts of the batch in flight: :func:`~trustjudge.modes._base.run_task` names the item(s) they belong to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import BackendError, BackendStopped, TrustJudgeError

__all__ = ["BackendStopped", "guarded"]

def guarded(fn: Callable[[Sequence[Any]], list[Any]], batch: Sequence[Any], backend: str,
            origin: str | None) -> list[Any]:
    """``fn(batch)``, where whatever the backend ``backend`` (from the plug-in ``origin``, ``None``: built in)
    raises becomes a trustjudge error naming it (the module's docstring says which)."""
    try:
        return fn(batch)
    except TrustJudgeError:
        raise
    except SystemExit as exc:
        raise BackendStopped(backend, f"called sys.exit({exc.code!r})", origin, _prompts(batch)) from None
    except Exception as exc:
        raise BackendError(f"backend {backend} failed: {type(exc).__name__}: {exc}") from exc
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        if origin is None:  # a built-in backend's: the process dying, as it was
            raise
        raise BackendStopped(backend, f"raised {type(exc).__name__}: {exc}", origin, _prompts(batch)) from exc


def _prompts(batch: Sequence[Any]) -> list[str]:
    return [p for p in (getattr(r, "prompt", None) for r in batch) if isinstance(p, str)]
