"""Judge backends, named by one string: ``<prefix>/<rest>``.

- ``llamacpp/qwen2.5-coder-1.5b`` (default): Qwen2.5-Coder-1.5B-Instruct, llama-cpp-python in-process.
- ``hf/qwen2.5-coder-1.5b``, ``hf/smollm2-135m``, ``hf/gemma3-270m``, ``hf//path/to/model-or.gguf``:
  transformers in-process.
- ``mock/<name>``: a scripted fake (``mock/hash`` is built in); tests register their own.
- ``llamacpp/smollm2-135m``, ``llamacpp/gemma3-270m``, ``llamacpp//path/to/model.gguf``: llama-cpp-python in-process.
  The default runs here: measured faster than the transformers backend on the same model (bench/throughput.py).
- ``recorded/<path>``: no model; the pairwise verdicts recorded in a JSONL file (an earlier API run, a data
  set's published judge outputs), see ``_recorded.py``.
- ``openai/<model>``, ``vllm/<model>@http://host:port``, ``llamacpp-server/<model>@URL``, ``ollama/<model>@URL``,
  ``http/<model>@URL``: an OpenAI-compatible HTTP server (see ``_openai.py``).

New backends register a factory for their prefix with :func:`register_backend`; heavy imports happen
inside the factory, on first use. Installed packages add backends through the entry point group
``trustjudge.backends``: the entry point's name is the prefix, its value a callable that takes the rest of
the judge name and returns a :class:`Backend`::

    [project.entry-points."trustjudge.backends"]
    myprefix = "my_package.backend:build"     # Judge("myprefix/some-model") calls build("some-model")

A plugin is imported only when a judge name asks for its prefix, so a broken plugin breaks only the
names that use it (with an error naming the entry point); built-in and registered prefixes come first
and are never looked up among plugins. ``TRUSTJUDGE_BACKEND_PLUGINS`` pins the plugin set: unset, every
installed plugin; otherwise a comma-separated list of the entry point names allowed (empty: none).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from importlib.metadata import EntryPoint

from .._plugins import describe, installed
from ..errors import ConfigError
from ._base import Backend, GenerateRequest, Generation, LabelRequest, LabelResult
from ._mock import MockBackend
from ._names import engine_options, split_options

__all__ = [
    "Backend", "GenerateRequest", "Generation", "LabelRequest", "LabelResult", "MockBackend",
    "DEFAULT_JUDGE", "PLUGIN_GROUP", "PREFIXES", "backend_plugins", "get_backend", "plugin_origin", "prefixes",
    "register_backend", "register_mock",
]

DEFAULT_JUDGE = "llamacpp/qwen2.5-coder-1.5b"
PLUGIN_GROUP = "trustjudge.backends"
"""The entry point group of third-party backends (name: the prefix; value: ``module:factory``)."""
PLUGINS_ENV = "TRUSTJUDGE_BACKEND_PLUGINS"

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

    spec = resolve(rest)
    if spec.path.is_dir() and any((spec.path / name).exists()
                                  for name in ("processor_config.json", "preprocessor_config.json")):
        from ._vision import VisionTransformersBackend  # an image-text-to-text model folder

        return VisionTransformersBackend(spec)
    from ._transformers import TransformersBackend

    return TransformersBackend(spec)


def _mock(rest: str) -> Backend:
    if rest in _MOCKS:
        return _MOCKS[rest]
    if rest == "hash":
        return MockBackend("hash", keep_history=False)
    raise ConfigError(f"unknown mock judge 'mock/{rest}': register it with register_mock() or use mock/hash")


def _llamacpp(rest: str) -> Backend:
    from ._llamacpp import load

    return load(rest)


def _recorded(rest: str) -> Backend:
    from ._recorded import RecordedBackend

    if not rest:
        raise ConfigError("recorded judges are named recorded/<path to a JSONL file of recorded verdicts>")
    return RecordedBackend(rest)


def _http(prefix: str) -> BackendFactory:
    def factory(rest: str) -> Backend:
        from ._openai import build

        return build(prefix, rest)

    return factory


register_backend("hf", _hf)
register_backend("mock", _mock)
register_backend("llamacpp", _llamacpp)
register_backend("recorded", _recorded)
for _prefix in ("openai", "vllm", "llamacpp-server", "ollama", "http"):
    register_backend(_prefix, _http(_prefix))
_BUILT_IN = dict(_FACTORIES)

_ORIGINS: dict[int, tuple[Callable[[], object], str]] = {}
"""Where each backend built from a plug-in came from (:func:`plugin_origin`), by ``id``: a weak reference
(the entry goes with the backend), or the backend itself where it takes no weak reference."""


def _mark(backend: Backend, origin: str) -> Backend:
    key = id(backend)
    try:
        ref: Callable[[], object] = weakref.ref(backend)
        weakref.finalize(backend, _ORIGINS.pop, key, None)
    except TypeError:  # __slots__ without __weakref__: kept (a plug-in's backend lives as long as its judge)
        ref = lambda: backend  # noqa: E731
    _ORIGINS[key] = (ref, origin)
    return backend


def plugin_origin(backend: Backend) -> str | None:
    """The plug-in ``backend`` was built by (``backend plugin 'name' (module:object from dist version)``, or
    ``backend 'prefix' registered with register_backend (module.factory)``), ``None`` for a built-in
    prefix's backend or one built outside :func:`get_backend`. The engine names it when the backend calls
    ``sys.exit`` or raises a ``BaseException`` of its own; a built-in backend's passes as it is (the
    process dying)."""
    entry = _ORIGINS.get(id(backend))
    return entry[1] if entry is not None and entry[0]() is backend else None


def _registered(prefix: str) -> str:
    factory = _FACTORIES[prefix]
    name = getattr(factory, "__qualname__", None) or type(factory).__qualname__
    return f"backend {prefix!r} registered with register_backend ({getattr(factory, '__module__', '?')}.{name})"


PREFIXES: dict[str, str] = {
    "llamacpp": "exact: every label's probability teacher-forced (llama-cpp-python in-process)",
    "hf": "exact: every label's probability teacher-forced (transformers in-process)",
    "mock": "scripted probabilities (tests, examples); mock/hash is built in",
    "recorded": "no model: the pairwise verdicts recorded in a JSONL file",
    **{prefix: "top_k: the server's top log-probabilities at the label position (labels outside them count 0)"
       for prefix in ("openai", "vllm", "llamacpp-server", "ollama", "http")},
}
"""What each built-in prefix reads labels with (``trustjudge judges`` lists it)."""


def prefixes() -> dict[str, str]:
    """Every prefix a judge name may start with, built-in and registered, and how it reads labels."""
    return {p: PREFIXES.get(p, "registered with register_backend()") for p in _FACTORIES}


def backend_plugins() -> dict[str, list[EntryPoint]]:
    """The installed backend plugins by prefix (nothing is imported), as allowed by ``TRUSTJUDGE_BACKEND_PLUGINS``.

    Prefixes of built-in or registered backends are left out: those names never reach a plugin.
    """
    return installed(PLUGIN_GROUP, PLUGINS_ENV, _FACTORIES)


def _describe(ep: EntryPoint) -> str:
    return describe(ep, "backend plugin")


def _from_plugin(ep: EntryPoint, name: str, rest: str) -> Backend:
    """Load ``ep`` and build the backend for ``rest``; any failure names the plugin."""
    what = _describe(ep)
    try:
        factory = ep.load()
    except (Exception, SystemExit) as exc:  # sys.exit(0) in a plug-in must not end the run with status 0, silently
        raise ConfigError(f"judge {name!r}: {what} cannot be loaded: {type(exc).__name__}: {exc} "
                          f"(fix or uninstall the plugin's package)") from exc
    if not callable(factory):
        raise ConfigError(f"judge {name!r}: {what} is a {type(factory).__name__}, not a callable "
                          "that takes the model part of the name and returns a trustjudge Backend")
    try:
        backend = factory(rest)
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"judge {name!r}: {what} failed to build the backend for {rest!r}: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(backend, Backend):
        raise ConfigError(f"judge {name!r}: {what} returned a {type(backend).__name__}, not a "
                          "trustjudge.backends.Backend")
    return _mark(backend, what)


OPTION_PREFIXES = ("openai", "vllm", "llamacpp-server", "ollama", "http")
"""The built-in prefixes whose backends take options of their own on the name (``?top_k=5``)."""


def get_backend(name: str) -> Backend:
    """Build the backend a judge name refers to: a built-in or registered prefix, else a backend plugin.

    The engine's options (``?labels=sampled&samples=N``, :mod:`._names`) are taken off the name first; a
    built-in in-process prefix refuses any other option."""
    name, _ = engine_options(name)
    prefix, sep, rest = name.partition("/")
    if sep and prefix in _FACTORIES:
        _, options = split_options(rest)
        if options and prefix in PREFIXES and prefix not in OPTION_PREFIXES:
            raise ConfigError(f"judge {name!r}: unknown judge option(s) {', '.join(sorted(options))} "
                              f"({prefix}/ judges take labels=sampled&samples=N only)")
        backend = _FACTORIES[prefix](rest)
        return backend if _FACTORIES[prefix] is _BUILT_IN.get(prefix) else _mark(backend, _registered(prefix))
    plugins = backend_plugins()
    if sep and prefix in plugins:
        found = plugins[prefix]
        if len(found) > 1:
            raise ConfigError(f"judge {name!r}: {len(found)} backend plugins claim the prefix {prefix!r}: "
                              + "; ".join(sorted(_describe(ep) for ep in found)) + " (uninstall all but one)")
        return _from_plugin(found[0], name, rest)
    known = ", ".join(f"{p}/..." for p in sorted([*_FACTORIES, *plugins]))
    raise ConfigError(f"unknown judge {name!r}: judge names start with one of {known}")
