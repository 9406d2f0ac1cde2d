"""Run any judge on a pool of Ray actors through Ray Data: :class:`RayBackend`.

``RayBackend("hf/smollm2-135m", num_actors=4)`` is a backend like any other: the engine keeps
planning, caching and writing the store in the driver process, and only the model calls travel to
the actors. Each actor builds the inner judge once (``get_backend(inner)``) and keeps it for the
whole Ray Data job.

The fingerprint, tokenizer and prompt format come from a local instance of the inner judge built
in the driver (for ``hf/...`` judges that loads the tokenizer only: weights are loaded on first
compute), so store keys are exactly those of a local run and a Ray run fills the same store.

Requests cross the process boundary as JSON text of the request dataclasses (Python's JSON writes
every float with ``repr``, so numbers round-trip exactly). A :class:`~trustjudge.errors.BackendError`
raised by the inner judge comes back to the driver as the same exception, so the engine's retries
apply; any other exception propagates as Ray raises it. An inner judge that calls ``sys.exit`` (or, one built
by a plug-in, raises a ``BaseException`` of its own) in an actor stops the run in the driver with
:class:`~trustjudge.errors.BackendStopped` naming the plug-in, as the same judge does in-process (the engine's
guard, :mod:`trustjudge.engine._guard`); Ctrl-C and a built-in judge's own ``BaseException`` are not caught.

The actors run the inner judge's own code, so a deterministic judge (``mock/hash``) gives bit-equal
outputs. An ``hf/...`` judge on the CPU is bit-equal only under the same schedule (torch threads,
and which prompt's KV prefix each prompt reuses, i.e. how blocks fall on actors); otherwise fp32
log-probabilities differ in the last digits (~2e-5), like a local run with another thread count.

Judges registered in the driver with :func:`~trustjudge.backends.register_mock` do not exist in the
actors; on a remote cluster, trustjudge (and the model files) must be installed on every node.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import pickle
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from ..errors import BackendError, BackendStopped, TransientBackendError, pip_dependency_error
from ._base import Backend, GenerateRequest, Generation, LabelRequest, LabelResult

__all__ = ["RayBackend", "ray_backend"]

Kind = Literal["labels", "generate"]
_T = TypeVar("_T")

_REQUEST_TYPES: dict[str, type[Any]] = {"labels": LabelRequest, "generate": GenerateRequest}
_RESULT_TYPES: dict[str, type[Any]] = {"labels": LabelResult, "generate": Generation}


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # the [data] extra, not just ray core
    except ImportError as exc:
        raise pip_dependency_error("Ray judging", ["ray[data]"], "ray") from exc
    return ray


def _to_dict(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def _from_dict(cls: type[_T], data: dict[str, Any]) -> _T:
    # Every sequence field of the backend dataclasses is a tuple; JSON hands back lists.
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def _dump_error(exc: BackendError) -> dict[str, Any]:
    """Describe a backend error so that the driver can raise the same exception."""
    try:
        blob: str | None = base64.b64encode(pickle.dumps(exc)).decode("ascii")
    except Exception:  # an unpicklable attribute: fall back to the class and message
        blob = None
    return {"pickle": blob, "message": str(exc), "transient": isinstance(exc, TransientBackendError),
            "retry_after": getattr(exc, "retry_after", None)}


def _load_error(data: dict[str, Any]) -> BackendError:
    if data.get("pickle"):
        try:
            exc = pickle.loads(base64.b64decode(data["pickle"]))
        except Exception:  # the class may be missing in the driver (another trustjudge version)
            exc = None
        if isinstance(exc, BackendError):
            return exc
    if data.get("transient"):
        return TransientBackendError(data["message"], data.get("retry_after"))
    return BackendError(data["message"])


class _JudgeActor:
    """The Ray Data callable class: one inner backend per actor, one block of requests per row."""

    def __init__(self, inner: str, threads: int) -> None:
        import sys

        from . import get_backend, plugin_origin

        self.backend = get_backend(inner)
        self.origin = plugin_origin(self.backend)
        """The plug-in the inner judge comes from (``None``: built in)."""
        torch = sys.modules.get("torch")
        if torch is not None:  # only judges that run torch import it; mock judges start faster without
            # Ray gives each actor a CPU share; torch would otherwise start one thread per core of the
            # node and the actors would fight over them.
            torch.set_num_threads(threads)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        blocks: list[int] = []
        outputs: list[str] = []
        for block, payload in zip(batch["block"], batch["payload"]):
            message = json.loads(str(payload))
            kind: Kind = message["kind"]
            requests = [_from_dict(_REQUEST_TYPES[kind], r) for r in message["requests"]]
            fn = self.backend.label_logprobs if kind == "labels" else self.backend.generate
            try:
                out: dict[str, Any] = {"results": [_to_dict(r) for r in fn(requests)]}
            except BackendError as exc:
                out = {"error": _dump_error(exc)}
            except KeyboardInterrupt:
                raise
            except SystemExit as exc:  # in an actor Ray would end the worker, and the job would not say why
                out = {"stop": {"how": f"called sys.exit({exc.code!r})", "origin": self.origin}}
            except BaseException as exc:
                if self.origin is None:  # a built-in judge's: as it is, as in-process
                    raise
                out = {"stop": {"how": f"raised {type(exc).__name__}: {exc}", "origin": self.origin}}
            blocks.append(int(block))
            outputs.append(json.dumps(out))
        return {"block": blocks, "output": outputs}


class RayBackend(Backend):
    """A judge whose model calls run on a pool of Ray actors, each holding one inner backend.

    Args:
        inner: the judge name the actors build (``hf/smollm2-135m``, ``mock/hash``, ...).
        address: a Ray cluster address (``auto``, ``ray://host:10001``, ...); ``None`` starts a local
            Ray instance unless Ray is already initialised in this process.
        num_actors: the size of the actor pool.
        batch_size: requests per actor call; each block is a contiguous run of the engine's
            prompt-sorted requests, so neighbours that share a prefix stay on one actor.
        num_cpus: CPUs of the local Ray instance (default ``num_actors * cpus_per_actor``); ignored
            with ``address``.
        cpus_per_actor: CPUs reserved by each actor (and torch threads it uses).
        gpus_per_actor: GPUs reserved by each actor.
        quiet: turn off Ray Data's progress bars and INFO log lines in this process.
    """

    def __init__(self, inner: str, *, address: str | None = None, num_actors: int = 2, batch_size: int = 8,
                 num_cpus: int | None = None, cpus_per_actor: float = 1.0, gpus_per_actor: float = 0.0,
                 quiet: bool = True) -> None:
        self._ray = _import_ray()
        self.name = inner
        self.inner = inner
        self.address = address
        self.num_actors = max(1, num_actors)
        self.batch_size = max(1, batch_size)
        self.num_cpus = num_cpus
        self.cpus_per_actor = cpus_per_actor
        self.gpus_per_actor = gpus_per_actor
        self.quiet = quiet
        self._local: Backend | None = None
        self._started = False
        self._connected = False

    # -- the driver's inner instance ----------------------------------------------------------------
    @property
    def local(self) -> Backend:
        """The inner judge built in the driver, used for keys, token counts and prompt formats."""
        if self._local is None:
            from . import get_backend

            self._local = get_backend(self.inner)
            # Class-level hints of the inner backend (time estimates, exactness) follow it.
            self.exact_labels = self._local.exact_labels
            self.default_tokens_per_s = self._local.default_tokens_per_s
        return self._local

    @property
    def fingerprint(self) -> str:
        return self.local.fingerprint

    @property
    def context_length(self) -> int:
        return self.local.context_length

    def count_tokens(self, text: str) -> int:
        return self.local.count_tokens(text)

    def format_prompt(self, system: str, user: str, assistant_prefix: str) -> str:
        return self.local.format_prompt(system, user, assistant_prefix)

    def max_label_tokens(self, labels: Sequence[str]) -> int:
        return self.local.max_label_tokens(labels)

    # -- Ray ----------------------------------------------------------------------------------------
    def connect(self) -> None:
        """Connect to the cluster, or start a local Ray instance (done on the first model call)."""
        if self._connected:
            return
        ray = self._ray
        if not ray.is_initialized():
            if self.address is not None:
                ray.init(address=self.address)
            else:
                cpus = self.num_cpus if self.num_cpus is not None else max(
                    1, round(self.num_actors * self.cpus_per_actor))
                ray.init(num_cpus=cpus, include_dashboard=False, ignore_reinit_error=True)
                self._started = True
        if self.quiet:
            # Ray Data's progress bars and per-job log lines would interleave with trustjudge's own
            # progress on stderr, once per engine batch.
            ctx = ray.data.DataContext.get_current()
            ctx.enable_progress_bars = False
            ctx.enable_operator_progress_bars = False
            logging.getLogger("ray.data").setLevel(logging.WARNING)
        self._connected = True

    def _run(self, kind: Kind, requests: Sequence[Any]) -> list[Any]:
        if not requests:
            return []
        self.connect()
        rows = []
        for block, start in enumerate(range(0, len(requests), self.batch_size)):
            chunk = requests[start : start + self.batch_size]
            payload = json.dumps({"kind": kind, "requests": [_to_dict(r) for r in chunk]})
            rows.append({"block": block, "payload": payload})
        ray = self._ray
        # One dataset block per request block and one row per map_batches call: Ray Data never
        # splits or merges the prompt-sorted blocks.
        try:
            items = ray.data.from_items(rows, override_num_blocks=len(rows))
        except TypeError:  # Ray < 2.10 calls it parallelism
            items = ray.data.from_items(rows, parallelism=len(rows))
        ds = items.map_batches(
            _JudgeActor,
            fn_constructor_kwargs={"inner": self.inner, "threads": max(1, int(self.cpus_per_actor))},
            compute=ray.data.ActorPoolStrategy(size=min(self.num_actors, len(rows))),
            batch_size=1,
            batch_format="numpy",
            num_cpus=self.cpus_per_actor,
            num_gpus=self.gpus_per_actor or None,
        )
        by_block: dict[int, dict[str, Any]] = {}
        for row in ds.iter_rows():
            by_block[int(row["block"])] = json.loads(str(row["output"]))
        results: list[Any] = []
        for block in range(len(rows)):
            out = by_block[block]
            if "error" in out:
                raise _load_error(out["error"])
            if "stop" in out:
                chunk = requests[block * self.batch_size : (block + 1) * self.batch_size]
                raise BackendStopped(self.fingerprint, out["stop"]["how"], out["stop"]["origin"],
                                     [r.prompt for r in chunk])
            results.extend(_from_dict(_RESULT_TYPES[kind], r) for r in out["results"])
        return results

    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        return self._run("labels", requests)

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        return self._run("generate", requests)

    def close(self) -> None:
        """Shut Ray down if this backend started it, and close the driver's inner instance."""
        if self._local is not None:
            self._local.close()
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False
        self._connected = False


def ray_backend(inner: str, address: str | None, *, num_actors: int = 2, batch_size: int = 8) -> RayBackend:
    """The backend of the CLI's ``--ray [ADDRESS]`` option.

    ``address`` ``None``, ``""`` or ``"local"`` starts a local Ray instance (shut down on close);
    anything else is handed to ``ray.init(address=...)``.
    """
    local = address is None or address.strip() in ("", "local")
    return RayBackend(inner, address=None if local else address, num_actors=num_actors, batch_size=batch_size)
