"""What an OpenAI-compatible server says of itself: which API serves the model, its chat template, its context
length and its tokenizer endpoint (the backend's discovery, :class:`~._openai.OpenAICompatibleBackend`).

Each function asks through the backend's :class:`~._openai_http.Channel`; what is found of a server and model
(``api``, ``prefill``, ``lists``) is kept for the process (:func:`server_facts`), what is found of one backend in
its :class:`Capabilities`.
"""

from __future__ import annotations

import functools
import logging
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from ..errors import BackendError, BackendUnavailable, TransientBackendError
from ._openai_chat import refused_completions
from ._openai_http import Channel, ClientError, json_object
from ._openai_presets import load_template

__all__ = ["Capabilities", "Unreachable", "context_length_of", "detect_api", "server_facts", "server_template",
           "tokenize"]

log = logging.getLogger("trustjudge.backends.openai")

_FACTS_LOCK = threading.Lock()
_FACTS: dict[tuple[str, str], dict[str, Any]] = {}
"""What was found of each server and model (``api``, ``prefill``, ``lists``), kept for the process."""
_TRANSPORT_FACTS: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], dict[str, Any]]] = weakref.WeakKeyDictionary()
"""The same for an injected transport (a test's fake server is a server of its own), forgotten with it: keyed by
the object, not its ``id()``, which a later transport may reuse once this one is gone."""


def server_facts(base_url: str, model: str, transport: Any = None) -> dict[str, Any]:
    """What was found of the server at ``base_url`` for ``model`` so far (a dict to add to)."""
    with _FACTS_LOCK:
        table = _FACTS if transport is None else _TRANSPORT_FACTS.setdefault(transport, {})
        return table.setdefault((base_url, model), {})


class Unreachable(Exception):
    """The tokenizer endpoint failed transiently (after retries)."""


@dataclass
class Capabilities:
    """What the server was found to support (``None``: not probed yet)."""

    exact: bool | None = None
    exact_reason: str = ""
    prompt_lists: bool | None = None
    prefill: str | None = None
    """The chat path's way of continuing an assistant message (``vllm``, ``trailing``; ``""``: none)."""
    prefill_reason: str = ""
    tokenizer: str | None = None
    """``/tokenize`` (vLLM, llama-server), ``/extras/tokenize`` (llama-cpp-python) or ``estimate``."""
    context_length: int | None = None


def detect_api(http: Channel, base_url: str, model: str, transport: Any = None) -> str:
    """``chat`` or ``completions`` for ``model`` (kept per server and model): a one-token completions request;
    a completions endpoint that refuses the model (404, or a 400 naming chat) means chat."""
    facts = server_facts(base_url, model, transport)
    if "api" in facts:
        return str(facts["api"])
    body = {"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0.0}
    try:  # tried once: a server failing now fails the first real request too, which is retried
        http.request("POST", base_url + "/completions", body)
    except ClientError as exc:
        if not refused_completions(exc):
            return "completions"  # kept for this backend only: its first real request reports the error
        log.info("%s: the completions endpoint refuses %r (%s): judging through /chat/completions",
                 base_url, model, exc)
        facts["api"] = "chat"
        return "chat"
    except TransientBackendError:
        return "completions"  # the server is failing now: its first real request says so
    facts["api"] = "completions"
    return "completions"


def server_template(http: Channel, root: str) -> tuple[str, Any] | None:
    """llama.cpp's ``llama-server`` publishes the model's chat template in ``/props``: its tag and template,
    ``None`` where there is none or our sandbox cannot render it (said in the log)."""
    try:
        props = http.retrying(lambda: http.request("GET", root + "/props"))
    except BackendUnavailable:
        raise
    except BackendError:
        return None
    text = json_object(props).get("chat_template")
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        tag, template = load_template(text)
        template.render(messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
                        add_generation_prompt=True, bos_token="", eos_token="")
    except Exception as exc:  # a template our sandbox cannot render: keep plain text, and say so
        log.warning("%s: cannot use the server's chat template from /props (%s); prompts are plain text "
                    "(?template=chatml or a template of your own sets one)", root, exc)
        return None
    log.info("%s: prompts use the server's chat template (/props)", root)
    return tag, template


def context_length_of(http: Channel, base_url: str, root: str, model: str) -> int | None:
    """The model's context as the server gives it (``/v1/models``, then llama-server's ``/props``), 4096 where it
    gives none; ``None`` where the server is down now (ask again next time)."""
    try:
        models = http.retrying(lambda: http.request("GET", base_url + "/models"))
        for entry in models.get("data", []) if isinstance(models, dict) else []:
            if not isinstance(entry, dict) or entry.get("id") not in (model, None):
                continue
            meta = json_object(entry.get("meta"))
            for value in (entry.get("max_model_len"), entry.get("context_length"),
                          entry.get("context_window"), meta.get("n_ctx"), meta.get("n_ctx_train")):
                if isinstance(value, int) and value > 0:
                    return value
    except TransientBackendError:
        return None  # server down: ask again next time
    except BackendUnavailable:
        raise
    except BackendError:
        pass
    try:
        # llama-server: the serving context
        props = http.retrying(lambda: http.request("GET", root + "/props"))
        gen = json_object(json_object(props).get("default_generation_settings"))
        for value in (gen.get("n_ctx"), json_object(props).get("n_ctx")):
            if isinstance(value, int) and value > 0:
                return value
    except TransientBackendError:
        return None
    except BackendUnavailable:
        raise
    except BackendError:
        pass
    return 4096


def tokenize(http: Channel, root: str, model: str, text: str, tokenizer: str | None) -> tuple[int, str] | None:
    """How many tokens ``text`` is, and the endpoint that said so: ``tokenizer`` (the one found before), else
    each known one in turn; ``None`` where the server has none (``estimate``).

    Raises:
        Unreachable: the server is unreachable now (estimate, and ask again next time).
    """
    for kind in [tokenizer] if tokenizer else ["/tokenize", "/extras/tokenize"]:
        if kind == "estimate":
            break
        if kind == "/tokenize":  # vLLM reads model+prompt, llama-server content+add_special
            body: dict[str, Any] = {"model": model, "prompt": text, "content": text, "add_special": True}
        else:  # llama-cpp-python
            body = {"model": model, "input": text}
        try:
            data = http.retrying(functools.partial(http.request, "POST", root + kind, body))
        except TransientBackendError:
            raise Unreachable from None
        except BackendUnavailable:
            raise
        except BackendError:
            continue
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if isinstance(tokens, list):
            return len(tokens), kind
        if isinstance(data, dict) and isinstance(data.get("count"), int):
            return int(data["count"]), kind
    return None
