"""Judges behind an OpenAI-compatible HTTP API: vLLM, llama.cpp servers, Ollama, OpenAI, anything else.

One class, :class:`OpenAICompatibleBackend`; the judge-name prefixes only pick defaults (:data:`PRESETS`):

===================  ===================================  ==================
name                 default base URL                     API key from
===================  ===================================  ==================
``openai/M``         ``https://api.openai.com/v1``        ``OPENAI_API_KEY``
``vllm/M@URL``       ``http://127.0.0.1:8000``            ``VLLM_API_KEY``
``llamacpp-server/`` ``http://127.0.0.1:8080``            ``LLAMA_API_KEY``
``ollama/M@URL``     ``http://127.0.0.1:11434``           (none)
``http/M@URL``       (required)                           ``TRUSTJUDGE_API_KEY``
===================  ===================================  ==================

``URL`` may carry options as a query string: ``vllm/Qwen/Qwen2.5-7B@http://gpu:8000?ctx=32768&concurrency=16``
(``ctx``, ``concurrency``, ``rpm``, ``timeout``, ``labels`` = ``auto|exact|top_k``, ``top_k``,
``template`` = ``plain|chatml``, ``api`` = ``chat|completions``, ``answer_tokens``).

Which API: the legacy completions endpoint where the server serves the model there, else chat completions,
detected, never assumed (:meth:`OpenAICompatibleBackend.api`): a one-token completions request on first use; a
404, or a 400 that names chat (OpenAI's "This is a chat model ..."), means chat; ``?api=`` forces one. It is kept
per server and model for the process, and a chat judge's fingerprint (so every store key) says ``api=chat``.

The backend's jobs live in seven modules: :mod:`._openai_presets` (the judge-name prefixes, :data:`PRESETS`,
:func:`split_name`, where a key goes, the prompt text and chat template), :mod:`._openai_http` (the wire: the
client, shared concurrency and rate limits, each request's deadline, HTTP statuses as the engine's errors,
retries), :mod:`._openai_labels` (label distributions from log-probabilities: exact echo scoring, detected by a
probe, and the top-k fallback), :mod:`._openai_chat` (the chat path: messages and images as content parts,
continuing an assistant message, reading the label in the judge's answer), :mod:`._openai_chat_judging` (the
backend's chat-completions methods: labels walked or read in the answer, generations), :mod:`._openai_server`
(what a server says of itself: which API, its chat template, context length, tokenizer) and this one (the
backend class: capabilities, token counts, generation; :func:`build`).

On the completions endpoint label distributions come exactly (``method="exact"``: the label's echoed
log-probabilities, used only when a probe on the first label call finds the server's echo present and aligned)
or from the top-``k`` log-probabilities at the label position (``method="top_k"``, labels outside the top-k get
probability 0: the engine reports the covered mass as ``label_mass``).

Retries follow the engine's :class:`~trustjudge._retry.RetryPolicy`, applied to each HTTP request (a judgment
on a 100-point scale can take 100 requests): HTTP 429, 5xx, timeouts, connection errors, malformed JSON and
responses without the log-probabilities asked for raise :class:`~trustjudge.errors.TransientBackendError` (with
``retry_after`` from a ``Retry-After`` header) and are retried; other 4xx raise
:class:`~trustjudge.errors.BackendError` with the server's message. The capability probe retries too, so a
fault in transit is not mistaken for a server without echo.

A server that accepts connections but does not answer must not cost minutes per judgment: each request has a
total deadline (``timeout``: its answer complete that long after it was sent, however slowly it trickles;
connecting has at most :data:`CONNECT_TIMEOUT_S` of it); a request with no answer through the retry budget stops
the run (:class:`~trustjudge.errors.BackendUnavailable`, naming server and cause) when the server has never
answered this backend (it then gets one retry, not the budget) or the request before it failed the same way.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from .._images import MARKER
from .._retry import RetryPolicy
from ..errors import (
    BackendError,
    ConfigError,
    TransientBackendError,
    pip_dependency_error,
)
from ._base import (
    Backend,
    FinishReason,
    GenerateRequest,
    Generation,
    LabelRequest,
    LabelResult,
    neutralise,
)
from ._openai_chat import (
    CHAT_HEAD,
    AnswerCache,
    ChatPrompt,
    Message,
    build_messages,
    by_prompt,
)
from ._openai_chat_judging import ChatJudging
from ._openai_http import CONNECT_TIMEOUT_S, SILENT_LIMIT, Channel, json_object
from ._openai_labels import exact_labels, probe_echo, probe_lists, top_k_labels
from ._openai_presets import (
    CHATML,
    PRESETS,
    REMOTE_SPECIALS,
    LabelMode,
    Preset,
    load_template,
    split_name,
    warn_key_destination,
)
from ._openai_server import (
    Capabilities,
    Unreachable,
    context_length_of,
    detect_api,
    server_facts,
    server_template,
    tokenize,
)

log = logging.getLogger("trustjudge.backends.openai")

Api = Literal["auto", "chat", "completions"]
ANSWER_TOKENS = 32
"""Tokens a chat judge may write by default before its label is found (``?answer_tokens=``)."""

class OpenAICompatibleBackend(ChatJudging, Backend):
    """A judge served over an OpenAI-compatible HTTP API.

    Args:
        model: the model name the server knows.
        base_url: the server, with or without the ``/v1`` suffix.
        preset: a key of :data:`PRESETS` (defaults for the key variable, top-k, sampling parameters).
        api_key: overrides the preset's environment variable.
        labels: ``auto`` (probe for exact echo scoring, fall back to top-k), ``exact`` or ``top_k``.
        top_k: log-probabilities per position on the top-k path.
        context_length: the model's context; ``None`` asks the server (``/v1/models``, ``/props``)
            and falls back to 4096.
        concurrency: requests in flight per base URL (shared by every backend of that URL).
        timeout_s: each request's total deadline: its answer must be complete this many seconds after
            it was sent (connecting takes at most :data:`CONNECT_TIMEOUT_S` of it).
        requests_per_minute: optional cap on request starts per base URL.
        chat_template: ``None``/``"plain"`` renders the system and user turns as plain text;
            ``"chatml"`` or a Jinja2 template string renders them as a chat (``messages``,
            ``add_generation_prompt``).
        max_prompts_per_request: prompts sent in one request where the server accepts a list.
        api: ``auto`` (detect), ``chat`` or ``completions``.
        answer_tokens: the most tokens a chat judge may write before its label (the label read in its
            answer); a reasoning model needs room for its reasoning (thousands).
        transport: an ``httpx`` transport (tests inject ``httpx.MockTransport``).
    """

    default_tokens_per_s = 2000.0
    accepts_images = True  # as chat content parts, even where text prompts go to completions (_openai_chat)

    def __init__(self, model: str, base_url: str, *, preset: str = "http", api_key: str | None = None,
                 labels: LabelMode = "auto", top_k: int | None = None, context_length: int | None = None,
                 concurrency: int | None = None, timeout_s: float = 120.0, requests_per_minute: float | None = None,
                 chat_template: str | None = None, max_prompts_per_request: int = 64, api: Api = "auto",
                 answer_tokens: int = ANSWER_TOKENS, transport: Any = None) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise pip_dependency_error("HTTP judges (openai/, vllm/, llamacpp-server/, ollama/, http/)",
                                       ["httpx"], "openai") from exc
        if preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r}: one of {', '.join(PRESETS)}")
        if labels not in ("auto", "exact", "top_k"):
            raise ConfigError(f"labels must be auto, exact or top_k, got {labels!r}")
        self.preset = PRESETS[preset]
        self.preset_name = preset
        self.model = model
        self.root = base_url.rstrip("/").removesuffix("/v1")
        self.base_url = self.root + "/v1"
        key = api_key if api_key is not None else (os.environ.get(self.preset.key_env) if self.preset.key_env else None)
        if self.preset.key_required and not key:
            raise ConfigError(f"{preset}/ judges need an API key: set {self.preset.key_env}")
        try:
            parsed = httpx.URL(self.root)
        except httpx.InvalidURL as exc:
            raise ConfigError(f"invalid judge server URL {base_url!r}: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host or not 0 < (parsed.port or 80) < 65536:
            raise ConfigError(f"invalid judge server URL {base_url!r}: use http(s)://host[:port]")
        if key and api_key is None:
            warn_key_destination(self.preset, preset, self.root, parsed.scheme, parsed.host)
        if api not in ("auto", "chat", "completions"):
            raise ConfigError(f"api must be chat or completions, got {api!r}")
        if api == "chat" and labels == "exact":
            raise ConfigError("labels=exact needs the completions endpoint: a chat endpoint returns top-k "
                              "log-probabilities only")
        if not isinstance(answer_tokens, int) or answer_tokens < 1:
            raise ConfigError(f"answer_tokens must be a positive integer, got {answer_tokens!r}")
        self.labels: LabelMode = labels
        self.api_option: Api = api
        self._api: str | None = None
        self.answer_tokens = answer_tokens
        self.top_k = top_k or self.preset.top_k
        self.chat_top_k = top_k or self.preset.chat_top_k
        self._context_option = context_length
        self.concurrency = max(1, self.preset.concurrency if concurrency is None else concurrency)
        self.max_prompts_per_request = max(1, max_prompts_per_request)
        self.capabilities = Capabilities(context_length=context_length)
        self._template_given = chat_template is not None
        self._template_tag, self._template = load_template(chat_template)
        if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self._http = Channel(httpx, self.root, model=model, key=key, key_env=self.preset.key_env,
                             concurrency=self.concurrency, timeout_s=self.timeout_s,
                             requests_per_minute=requests_per_minute, transport=transport)
        self._lock = threading.Lock()
        self._probe_lock = threading.Lock()
        self._api_lock = threading.Lock()
        self._answers = AnswerCache()
        self._transport = transport
        self._token_counts: OrderedDict[str, int] = OrderedDict()
        self._warned: set[str] = set()

    def use_retry_policy(self, policy: RetryPolicy) -> bool:
        """Retry each HTTP request (and its response checks) with the engine's policy."""
        self._http.retry = policy
        return True

    @property
    def requests(self) -> int:
        """Completion requests answered so far."""
        return self._http.requests

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens of the answered completion requests, as the server counted them."""
        return self._http.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        """Generated tokens of the answered completion requests, as the server counted them."""
        return self._http.completion_tokens

    # -- identity -------------------------------------------------------------------------------
    @property
    def exact_labels(self) -> bool:  # type: ignore[override]
        """False once the probe found no exact path, or on the chat API (labels then come from the top-k)."""
        return self.capabilities.exact is not False and self._api != "chat"

    @property
    def fingerprint(self) -> str:
        if self.api == "chat":  # the server applies its chat template: no template of ours is part of it
            return f"openai:{self.base_url}:{self.model}:chat:labels={self.labels}{self.chat_top_k}:api=chat"
        labels = self.labels if self.labels == "exact" else f"{self.labels}{self.top_k}"
        return f"openai:{self.base_url}:{self.model}:{self._template_tag}:labels={labels}"

    # -- which API ------------------------------------------------------------------------------
    @property
    def api(self) -> str:
        """``chat`` or ``completions``: forced by ``?api=``, else detected on first use (and kept per server
        and model): a completions endpoint that refuses the model (404, or a 400 naming chat) means chat."""
        if self._api is None:
            with self._api_lock:
                if self._api is None:
                    api = self._detect_api()
                    if api == "completions":
                        self._read_server_template()
                    else:
                        self.capabilities.exact, self.capabilities.exact_reason = False, "chat completions"
                    self._api = api
        return self._api

    def _detect_api(self) -> str:
        if self.api_option != "auto":
            return self.api_option
        if self.labels == "exact":
            return "completions"  # exact labels need the completions endpoint's echo: nothing to detect
        return detect_api(self._http, self.base_url, self.model, self._transport)

    def _read_server_template(self) -> None:
        """llama.cpp's ``llama-server`` publishes the model's chat template in ``/props``: the completions
        prompts of a ``llamacpp-server/`` judge use it unless ``?template=`` names one."""
        if self.preset_name != "llamacpp-server" or self._template_given:
            return
        found = server_template(self._http, self.root)
        if found is not None:
            self._template_tag, self._template = found

    def format_messages(self, messages: Sequence[Message], assistant_prefix: str) -> str:
        """The prompt string of a chat judgment: ``messages`` (see
        :func:`~._openai_chat.build_messages`), then the assistant's text so far."""
        return ChatPrompt(tuple(messages), assistant_prefix).encode()

    def format_prompt(self, system: str, user: str, assistant_prefix: str) -> str:
        # A server tokenizes the prompt text with its special tokens parsed: the control strings of the
        # common chat templates are broken in the quoted texts so that they reach the model as plain text
        # (a chat server renders its template over the messages as text too).
        system, user = neutralise(system, REMOTE_SPECIALS), neutralise(user, REMOTE_SPECIALS)
        if self.api == "chat" or MARKER.search(user):  # images: chat content parts, whichever API serves text
            return self.format_messages(build_messages(system, user), assistant_prefix)
        if self._template is None:
            return f"{system}\n\n{user}\n\n{assistant_prefix}"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return str(self._template.render(messages=messages, add_generation_prompt=True,
                                         bos_token="", eos_token="")) + assistant_prefix

    @property
    def context_length(self) -> int:
        if self.capabilities.context_length is None:
            found = self._discover_context_length()
            if found is None:
                return 4096
            self.capabilities.context_length = found
        return self.capabilities.context_length

    def _discover_context_length(self) -> int | None:
        return context_length_of(self._http, self.base_url, self.root, self.model)

    # -- tokens -----------------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        with self._lock:
            if text in self._token_counts:
                self._token_counts.move_to_end(text)
                return self._token_counts[text]
        chat = ChatPrompt.decode(text) if text.startswith(CHAT_HEAD) else None
        read = chat.text() if chat is not None else text
        try:
            count = self._count_tokens(read)
        except Unreachable:
            return max(1, math.ceil(len(read) / 4))  # not cached: the next call asks the server again
        with self._lock:
            self._token_counts[text] = count
            if len(self._token_counts) > 20_000:
                self._token_counts.popitem(last=False)
        return count

    @property
    def token_counts_estimated(self) -> bool:
        """True when the server has no tokenizer endpoint and counts are chars / 4 estimates."""
        return self.capabilities.tokenizer == "estimate"

    def _count_tokens(self, text: str) -> int:
        found = tokenize(self._http, self.root, self.model, text, self.capabilities.tokenizer)
        if found is not None:
            self.capabilities.tokenizer = found[1]
            return found[0]
        if self.capabilities.tokenizer != "estimate":
            self.capabilities.tokenizer = "estimate"
            self._warn_once("estimate", f"{self.base_url} has no tokenize endpoint: token counts are "
                                        "estimated as characters / 4 (context checks and --dry-run are approximate)")
        return max(1, math.ceil(len(text) / 4))

    def max_label_tokens(self, labels: Sequence[str]) -> int:
        counts = [self.count_tokens(label) for label in labels]
        if self.token_counts_estimated:
            return max(len(label) for label in labels)  # at most one token per character
        return max(counts) + 1

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)

    # -- capability probe -------------------------------------------------------------------------
    def _ensure_probed(self, prompt: str) -> None:
        with self._probe_lock:
            if self.capabilities.exact is not None:
                return
            if self.labels == "top_k":
                self.capabilities.exact, self.capabilities.exact_reason = False, "labels=top_k"
                return
            ok, why = probe_echo(self._http, prompt)
            if not ok and self.labels == "exact":
                raise BackendError(f"{self.base_url} cannot score labels exactly: {why}")
            self.capabilities.exact, self.capabilities.exact_reason = ok, why
            if ok:
                facts = server_facts(self.base_url, self.model, self._transport)
                if "lists" not in facts:  # remembered: a server that failed the probe is not asked again
                    facts["lists"] = probe_lists(self._http)
                self.capabilities.prompt_lists = bool(facts["lists"])
            log.info("%s: exact label scoring %s (%s); prompt lists %s", self.base_url,
                     "on" if ok else "off", why, self.capabilities.prompt_lists)

    # -- labels -----------------------------------------------------------------------------------
    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        if not requests:
            return []
        if self.api == "chat":
            return self._chat_labels(requests)
        if any(r.prompt.startswith(CHAT_HEAD) for r in requests):  # images: chat prompts on completions too
            return by_prompt(requests, self._chat_labels, self.label_logprobs)
        self._ensure_probed(requests[0].prompt)
        if self.capabilities.exact:
            if self.preset_name == "llamacpp-server" and self.labels == "auto":  # exact there: llama-cpp-python's
                self._warn_once("slow_exact", f"{self.base_url}: exact labels from llama-cpp-python's server are "
                                "slow (it formats every prompt token's log-probabilities over the whole vocabulary "
                                "in Python: 57x the in-process judge, bench/results/server_path_smollm2.md); add "
                                "labels=top_k to the judge's options for speed, or judge in-process with llamacpp/")
            size = self.max_prompts_per_request if self.capabilities.prompt_lists else 1
            return [replace(r, api="completions") for r in exact_labels(self._http, requests, size)]
        self._warn_once("top_k", f"{self.base_url}: labels are scored from the top-{self.top_k} "
                                 f"log-probabilities ({self.capabilities.exact_reason}); labels outside the "
                                 "top-k get probability 0 (see label_mass)")
        return [replace(top_k_labels(self._http, req, self.top_k), api="completions") for req in requests]

    # -- generation -------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        if self.api == "chat":
            return self._chat_generate(requests)
        if any(r.prompt.startswith(CHAT_HEAD) for r in requests):  # images: chat prompts on completions too
            return by_prompt(requests, self._chat_generate, self.generate)

        def once(req: GenerateRequest) -> Generation:
            start = time.perf_counter()
            payload: dict[str, Any] = {
                "prompt": req.prompt, "max_tokens": req.max_new_tokens, "temperature": req.temperature,
                "top_p": 1.0, "seed": req.seed, "stop": list(req.stop), "logprobs": 1,
                **self.preset.sampling,
            }
            data = self._http.complete(payload)
            choice = data["choices"][0]
            if not isinstance(choice, dict) or not isinstance(choice.get("text"), str):
                raise TransientBackendError(f"{self.base_url}/completions returned a choice without text")
            text = choice["text"]
            cut = [text.find(s) for s in req.stop if s and s in text]
            if cut:  # servers strip the stop string; this keeps the contract for those that do not
                text = text[: min(cut)]
            lp = json_object(choice.get("logprobs"))
            token_lps = tuple(float(v) for v in lp.get("token_logprobs") or [] if isinstance(v, (int, float)))
            usage = json_object(data.get("usage"))
            finish = self._finish_reason(choice)
            return Generation(text, token_lps, finish, int(usage.get("prompt_tokens") or 0),
                              time.perf_counter() - start, int(usage.get("completion_tokens") or len(token_lps)))

        return self._http.map(lambda r: self._http.retrying(lambda: once(r)), list(requests))

    @staticmethod
    def _finish_reason(choice: Mapping[str, Any]) -> FinishReason:
        reason = choice.get("finish_reason")
        if reason == "length":
            return "length"
        if reason == "eos":
            return "eos"
        # vLLM tells a stop string (stop_reason = the string) from an end token (stop_reason = null).
        if reason == "stop" and "stop_reason" in choice and choice["stop_reason"] is None:
            return "eos"
        return "stop"

    def close(self) -> None:
        self._http.close()


def build(prefix: str, rest: str) -> OpenAICompatibleBackend:
    """Build the backend for judge name ``prefix/rest`` (``rest`` = ``model[@url[?options]]``)."""
    preset = PRESETS[prefix]
    model, url, opts = split_name(rest, preset)
    known = {"ctx", "concurrency", "rpm", "timeout", "labels", "top_k", "template", "api", "answer_tokens"}
    unknown = set(opts) - known
    if unknown:
        raise ConfigError(f"unknown judge option(s) {', '.join(sorted(unknown))}: use {', '.join(sorted(known))}")
    try:
        return OpenAICompatibleBackend(
            model, url, preset=prefix,
            labels=opts.get("labels", "auto"),  # type: ignore[arg-type]
            top_k=int(opts["top_k"]) if "top_k" in opts else None,
            context_length=int(opts["ctx"]) if "ctx" in opts else None,
            concurrency=int(opts["concurrency"]) if "concurrency" in opts else None,
            timeout_s=float(opts.get("timeout", 120)),
            requests_per_minute=float(opts["rpm"]) if "rpm" in opts else None,
            chat_template=opts.get("template"),
            api=opts.get("api", "auto"),  # type: ignore[arg-type]
            answer_tokens=int(opts.get("answer_tokens", ANSWER_TOKENS)),
        )
    except ValueError as exc:
        raise ConfigError(f"bad judge option in {prefix}/{rest}: {exc}") from exc


__all__ = ["CHATML", "CONNECT_TIMEOUT_S", "PRESETS", "REMOTE_SPECIALS", "SILENT_LIMIT", "Capabilities",
           "LabelMode", "OpenAICompatibleBackend", "Preset", "build", "split_name"]
