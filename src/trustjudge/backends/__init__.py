"""Judge backends, named by one string: ``<prefix>/<rest>``.

- ``llamacpp/qwen2.5-coder-1.5b`` (default): Qwen2.5-Coder-1.5B-Instruct, llama-cpp-python in-process.
- ``hf/qwen2.5-coder-1.5b``, ``hf/smollm2-135m``, ``hf/gemma3-270m``, ``hf//path/to/model-or.gguf``:
  transformers in-process.
- ``mock/<name>``: a scripted fake (``mock/hash`` is built in); tests register their own.
- ``llamacpp/smollm2-135m``, ``llamacpp/gemma3-270m``, ``llamacpp//path/to/model.gguf``: llama-cpp-python in-process.
  The default runs here: measured faster than the transformers backend on the same model (bench/throughput.py).
- ``openai/<model>``, ``vllm/<model>@http://host:port``, ``llamacpp-server/<model>@URL``, ``ollama/<model>@URL``,
  ``http/<model>@URL``: an OpenAI-compatible HTTP server (see ``_openai.py``).

New backends register a factory for their prefix with :func:`register_backend`; heavy imports happen
inside the factory, on first use.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ConfigError
from ._base import Backend, GenerateRequest, Generation, LabelRequest, LabelResult
from ._mock import MockBackend

__all__ = [
    "Backend", "GenerateRequest", "Generation", "LabelRequest", "LabelResult", "MockBackend",
    "DEFAULT_JUDGE", "get_backend", "register_backend", "register_mock",
]

DEFAULT_JUDGE = "llamacpp/qwen2.5-coder-1.5b"

BackendFactory = Callable[[str], Backend]
_FACTORIES: dict[str, BackendFactory] = {}
_MOCKS: dict[str, Backend] = {}


def register_backend(prefix: str, factory: BackendFactory) -> None:
    """Make ``prefix/<rest>`` judge names build backends with ``factory(rest)``."""
    _FACTORIES[prefix] = factory


def register_mock(name: str, backend: Backend | None) -> None:
    """Register (or with ``None`` remove) a backend instance reachable as ``mock/<name>``."""
    if backend is None:
        _MOCKS.pop(name, None)
    else:
        _MOCKS[name] = backend


def _hf(rest: str) -> Backend:
    from ._models import resolve
    from ._transformers import TransformersBackend

    return TransformersBackend(resolve(rest))


def _mock(rest: str) -> Backend:
    if rest in _MOCKS:
        return _MOCKS[rest]
    if rest == "hash":
        return MockBackend("hash", keep_history=False)
    raise ConfigError(f"unknown mock judge 'mock/{rest}': register it with register_mock() or use mock/hash")


def _llamacpp(rest: str) -> Backend:
    from ._llamacpp import load

    return load(rest)


def _http(prefix: str) -> BackendFactory:
    def factory(rest: str) -> Backend:
        from ._openai import build

        return build(prefix, rest)

    return factory


register_backend("hf", _hf)
register_backend("mock", _mock)
register_backend("llamacpp", _llamacpp)
for _prefix in ("openai", "vllm", "llamacpp-server", "ollama", "http"):
    register_backend(_prefix, _http(_prefix))


def get_backend(name: str) -> Backend:
    """Build the backend a judge name refers to."""
    prefix, sep, rest = name.partition("/")
    if not sep or prefix not in _FACTORIES:
        known = ", ".join(f"{p}/..." for p in sorted(_FACTORIES))
        raise ConfigError(f"unknown judge {name!r}: judge names start with one of {known}")
    return _FACTORIES[prefix](rest)
