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
``template`` = ``plain|chatml``).

Label distributions, everything through the legacy completions endpoint (``/v1/completions``: a chat
endpoint cannot continue the ``Score: [`` prefix, so the label position would be unknown):

- **exact** (``method="exact"``): prompt + label is sent with ``echo: true, logprobs: 1, max_tokens: 1``
  and the label's log-probability is the sum over its echoed tokens. The capability is *detected*, not
  assumed: on the first label call the backend sends the real prompt once without echo (greedy token
  ``g`` and its log-probability) and once as prompt + ``g`` with echo; echo is trusted only if the echoed
  log-probability of ``g`` matches. This catches servers that echo misaligned log-probabilities
  (llama-cpp-python shifts them by one token when the model adds no BOS token) or none at all (the C++
  ``llama-server`` returns generated-token log-probabilities only).
- **top_k** fallback (``method="top_k"``): the top-``k`` log-probabilities at the label position
  (``logprobs: k``, ``max_tokens: 1``). Multi-token labels walk the label trie with one extra request per
  label prefix that appeared in the top-``k`` (``"5"`` in the top-k at the label position, then
  ``"57"`` ...). A label whose tokens are not all in the top-``k`` along its path gets probability 0
  (log-probability ``-inf``): the engine reports the covered mass as ``label_mass``. Token strings
  are matched as text, so when several tokenizations of a label appear, their probabilities add up.

Retries follow the engine's :class:`~trustjudge._retry.RetryPolicy`, applied to each HTTP request
(a judgment on a 100-point scale can take 100 requests): HTTP 429, 5xx, timeouts, connection errors,
malformed JSON and responses without the log-probabilities asked for raise
:class:`~trustjudge.errors.TransientBackendError` (with ``retry_after`` from a ``Retry-After`` header)
and are retried; other 4xx raise :class:`~trustjudge.errors.BackendError` with the server's message.
The capability probe retries too, so a fault in transit is not mistaken for a server without echo.

A server that accepts connections but does not answer must not cost minutes per judgment: each request
has a total deadline (``timeout``: its answer must be complete that long after it was sent, however slowly
it trickles; connecting has at most :data:`CONNECT_TIMEOUT_S` of it), and a request that got no answer
through the retry budget stops the run (:class:`~trustjudge.errors.BackendUnavailable`, naming the server
and the cause) when the server has never answered this backend, or when the request before it failed the
same way. A server that has never answered gets one retry of a request it left unanswered, not the whole
budget.
"""

from __future__ import annotations

import email.utils
import functools
import hashlib
import ipaddress
import json
import logging
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qsl

from .._retry import RetryPolicy
from ..errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    TransientBackendError,
    pip_dependency_error,
)
from ._base import (
    Backend,
    FinishReason,
    neutralise,
    GenerateRequest,
    Generation,
    LabelRequest,
    LabelResult,
)

# The control strings of the chat templates in common use (ChatML/Qwen, Llama 3, Gemma, Mistral, Phi,
# SentencePiece BOS/EOS). A server parses them in prompt text, so quoted texts must not carry them.
REMOTE_SPECIALS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|begin_of_text|>", "<|end_of_text|>", "<start_of_turn>", "<end_of_turn>",
                   "<bos>", "<eos>", "[INST]", "[/INST]", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>",
                   "<s>", "</s>")

CONNECT_TIMEOUT_S = 10.0
"""The most a request waits for its connection (within its ``timeout``)."""
SILENT_LIMIT = 2
"""Requests in a row left unanswered through the retry budget that stop the run (the first one does, on a
server that has never answered)."""

log = logging.getLogger("trustjudge.backends.openai")
T = TypeVar("T")

LabelMode = Literal["auto", "exact", "top_k"]

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class Preset:
    """Defaults of one judge-name prefix."""

    base_url: str | None
    key_env: str | None = None
    key_required: bool = False
    top_k: int = 20
    sampling: Mapping[str, Any] = field(default_factory=dict)
    """Extra generation parameters that make temperature sampling plain (no repeat penalty, no top-p)."""


PRESETS: dict[str, Preset] = {
    # OpenAI's completions endpoint returns at most 5 log-probabilities per position.
    "openai": Preset("https://api.openai.com/v1", "OPENAI_API_KEY", key_required=True, top_k=5),
    "vllm": Preset("http://127.0.0.1:8000", "VLLM_API_KEY",
                   sampling={"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}),
    # llama-cpp-python's server defaults to repeat_penalty 1.1, top_k 40, min_p 0.05.
    "llamacpp-server": Preset("http://127.0.0.1:8080", "LLAMA_API_KEY",
                              sampling={"top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0}),
    "ollama": Preset("http://127.0.0.1:11434", None),
    "http": Preset(None, "TRUSTJUDGE_API_KEY"),
}

_ENDPOINT_LOCK = threading.Lock()
_SEMAPHORES: dict[str, threading.BoundedSemaphore] = {}
_LIMITERS: dict[str, _RateLimiter] = {}


class _RateLimiter:
    """Spaces request starts at least ``60 / rpm`` seconds apart."""

    def __init__(self, rpm: float) -> None:
        self.interval = 60.0 / rpm
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


class _ServerError(TransientBackendError):
    """HTTP 5xx: retried by the engine, but the probe reads 500/501 as "not supported"."""

    def __init__(self, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message, retry_after=retry_after)
        self.status = status


class _Malformed(Exception):
    """A response that parsed as JSON but lacks what the request asked for."""


class _Unreachable(Exception):
    """The tokenizer endpoint failed transiently (after retries)."""


class _MalformedResponse(TransientBackendError):
    """A malformed response, retried: a server or proxy fault, unless it happens every time."""


class _NoAnswer(TransientBackendError):
    """No complete answer within the request's deadline (nor a connection within its connect timeout)."""


@dataclass
class Capabilities:
    """What the server was found to support (``None``: not probed yet)."""

    exact: bool | None = None
    exact_reason: str = ""
    prompt_lists: bool | None = None
    tokenizer: str | None = None
    """``/tokenize`` (vLLM, llama-server), ``/extras/tokenize`` (llama-cpp-python) or ``estimate``."""
    context_length: int | None = None


def split_name(rest: str, preset: Preset) -> tuple[str, str, dict[str, str]]:
    """Split ``<model>[@<base_url>[?options]]`` into model, base URL and options."""
    match = re.match(r"^(.*?)@(https?://.*)$", rest)
    model, url = (match.group(1), match.group(2)) if match else (rest, preset.base_url)
    if not model:
        raise ConfigError(f"judge name needs a model before '@': {rest!r}")
    if url is None:
        raise ConfigError(f"judge name needs a server: <model>@http://host:port, got {rest!r}")
    url, _, query = url.partition("?")
    return model, url, dict(parse_qsl(query))


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _server_message(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:500]
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return str(err)[:500]
    return body.strip()[:500]


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _warn_key_destination(preset: Preset, name: str, root: str, scheme: str, host: str) -> None:
    """Say where a key from the environment goes when that is not the preset's own server, or in clear text."""
    default = (preset.base_url or "").rstrip("/").removesuffix("/v1")
    if preset.base_url and root != default:
        log.warning("%s/ sends $%s to %s, not to %s", name, preset.key_env, root, default)
    if scheme == "http" and not _is_loopback(host):
        log.warning("$%s is sent to %s over plain HTTP: anyone on the path can read it (use https)",
                    preset.key_env, root)


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (servers omit optional fields)."""
    return value if isinstance(value, dict) else {}


def _logsumexp(values: Iterable[float]) -> float:
    vals = [v for v in values if v != -math.inf]
    if not vals:
        return -math.inf
    top = max(vals)
    return top + math.log(sum(math.exp(v - top) for v in vals))


def _echo_label_logprob(choice: Mapping[str, Any], sent: str, label: str) -> tuple[float, int]:
    """Sum the echoed log-probabilities of ``label``'s tokens at the end of the sent prompt.

    The label's tokens are found from the end of the echoed entries by their text, not by
    ``text_offset``: servers disagree on offsets (llama-cpp-python leaves special tokens out of them).
    Returns the log-probability and the number of prompt entries before the label.
    """
    lp = choice.get("logprobs")
    if not isinstance(lp, Mapping):
        raise _Malformed("no logprobs in the echoed choice")
    tokens, values = lp.get("tokens"), lp.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values):
        raise _Malformed("logprobs without matching tokens and token_logprobs")
    text = choice.get("text")
    if not isinstance(text, str) or not text.startswith(sent):
        raise _Malformed("the echoed text does not start with the prompt")
    generated = text[len(sent):]
    # Entries of generated tokens come last; drop them so that the prompt's entries end with the label.
    if generated:
        acc, n_gen = "", 0
        while n_gen < len(tokens) and len(acc) < len(generated):
            n_gen += 1
            acc = str(tokens[-n_gen]) + acc
        if acc != generated:
            raise _Malformed("cannot find the generated token among the echoed entries")
    else:  # an end-of-sequence token: some servers list it (as "" or its name), others leave it out
        n_gen = 0 if tokens and str(tokens[-1]) and label.endswith(str(tokens[-1])) else 1
    end = len(tokens) - n_gen
    acc, k = "", 0
    while end - k > 0 and len(acc) < len(label):
        k += 1
        acc = str(tokens[end - k]) + acc
    if acc != label:
        raise _Malformed(f"the label {label!r} does not end the echoed prompt at a token boundary (got {acc!r})")
    picked = values[end - k: end]
    if any(not isinstance(v, (int, float)) for v in picked):
        raise _Malformed("a label token has no log-probability")
    return float(sum(picked)), end - k


class OpenAICompatibleBackend(Backend):
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
        transport: an ``httpx`` transport (tests inject ``httpx.MockTransport``).
    """

    default_tokens_per_s = 2000.0

    def __init__(self, model: str, base_url: str, *, preset: str = "http", api_key: str | None = None,
                 labels: LabelMode = "auto", top_k: int | None = None, context_length: int | None = None,
                 concurrency: int = 4, timeout_s: float = 120.0, requests_per_minute: float | None = None,
                 chat_template: str | None = None, max_prompts_per_request: int = 64,
                 transport: Any = None) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise pip_dependency_error("HTTP judges (openai/, vllm/, llamacpp-server/, ollama/, http/)",
                                       ["httpx"], "openai") from exc
        if preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r}: one of {', '.join(PRESETS)}")
        if labels not in ("auto", "exact", "top_k"):
            raise ConfigError(f"labels must be auto, exact or top_k, got {labels!r}")
        self._httpx = httpx
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
            _warn_key_destination(self.preset, preset, self.root, parsed.scheme, parsed.host)
        self.labels: LabelMode = labels
        self.top_k = top_k or self.preset.top_k
        self._context_option = context_length
        self.concurrency = max(1, concurrency)
        self.max_prompts_per_request = max(1, max_prompts_per_request)
        self.capabilities = Capabilities(context_length=context_length)
        self._template_tag, self._template = self._load_template(chat_template)
        if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, CONNECT_TIMEOUT_S)),
            headers=headers, transport=transport,
            limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
        )
        self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="trustjudge-http")
        with _ENDPOINT_LOCK:
            self._semaphore = _SEMAPHORES.setdefault(self.base_url, threading.BoundedSemaphore(self.concurrency))
            self._limiter = None
            if requests_per_minute:
                self._limiter = _LIMITERS.setdefault(self.base_url, _RateLimiter(requests_per_minute))
        self._lock = threading.Lock()
        self._probe_lock = threading.Lock()
        self._token_counts: OrderedDict[str, int] = OrderedDict()
        self._warned: set[str] = set()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.requests = 0
        self._retry: RetryPolicy | None = None
        self._answered = False
        """Whether the server has sent this backend one complete answer (any status)."""
        self._silent = 0
        """Requests in a row that got no answer through the retry budget."""

    def use_retry_policy(self, policy: RetryPolicy) -> bool:
        """Retry each HTTP request (and its response checks) with the engine's policy."""
        self._retry = policy
        return True

    def _retrying(self, fn: Callable[[], T]) -> T:
        """``fn()`` under the engine's retry policy; a request the server leaves unanswered through the
        budget stops the run (:class:`BackendUnavailable`) when the server never answered, or when the
        request before it went the same way: each judgment would otherwise wait the whole budget again."""
        if self._retry is None:
            return fn()
        try:
            return self._retry.call(fn, give_up=self._give_up)
        except _NoAnswer as exc:
            with self._lock:
                self._silent += 1
                silent, answered = self._silent, self._answered
            if not answered or silent >= SILENT_LIMIT:
                what = ("has not answered any request" if not answered
                        else f"left {silent} requests in a row unanswered")
                raise BackendUnavailable(
                    f"the judge server {self.root} {what} ({exc}), retries included: the run is stopped. Is "
                    "it stuck or overloaded? A judge that needs longer per request takes a longer ?timeout= "
                    f"(now {self.timeout_s:g} s)") from exc
            raise

    def _give_up(self, exc: TransientBackendError, attempt: int) -> bool:
        """A server that has never answered gets one retry of a request it left unanswered."""
        return isinstance(exc, _NoAnswer) and not self._answered and attempt >= 1

    # -- identity -------------------------------------------------------------------------------
    @property
    def exact_labels(self) -> bool:  # type: ignore[override]
        """False once the probe found no exact path (labels then come from the top-k)."""
        return self.capabilities.exact is not False

    @staticmethod
    def _load_template(spec: str | None) -> tuple[str, Any]:
        if spec in (None, "", "plain"):
            return "plain", None
        text = CHATML if spec == "chatml" else spec
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        template = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(text)
        tag = "chatml" if spec == "chatml" else "tpl-" + hashlib.sha256(text.encode()).hexdigest()[:12]
        return tag, template

    @property
    def fingerprint(self) -> str:
        labels = self.labels if self.labels == "exact" else f"{self.labels}{self.top_k}"
        return f"openai:{self.base_url}:{self.model}:{self._template_tag}:labels={labels}"

    def format_prompt(self, system: str, user: str, assistant_prefix: str) -> str:
        # A server tokenizes the prompt text with its special tokens parsed: the control strings of the
        # common chat templates are broken in the quoted texts so that they reach the model as plain text.
        system, user = neutralise(system, REMOTE_SPECIALS), neutralise(user, REMOTE_SPECIALS)
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
        try:
            models = self._retrying(lambda: self._request("GET", self.base_url + "/models"))
            for entry in models.get("data", []) if isinstance(models, dict) else []:
                if not isinstance(entry, dict) or entry.get("id") not in (self.model, None):
                    continue
                meta = _obj(entry.get("meta"))
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
            props = self._retrying(lambda: self._request("GET", self.root + "/props"))
            gen = _obj(_obj(props).get("default_generation_settings"))
            for value in (gen.get("n_ctx"), _obj(props).get("n_ctx")):
                if isinstance(value, int) and value > 0:
                    return value
        except TransientBackendError:
            return None
        except BackendUnavailable:
            raise
        except BackendError:
            pass
        return 4096

    # -- tokens -----------------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        with self._lock:
            if text in self._token_counts:
                self._token_counts.move_to_end(text)
                return self._token_counts[text]
        try:
            count = self._count_tokens(text)
        except _Unreachable:
            return max(1, math.ceil(len(text) / 4))  # not cached: the next call asks the server again
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
        kinds = [self.capabilities.tokenizer] if self.capabilities.tokenizer else ["/tokenize", "/extras/tokenize"]
        for kind in kinds:
            if kind == "estimate":
                break
            if kind == "/tokenize":  # vLLM reads model+prompt, llama-server content+add_special
                body: dict[str, Any] = {"model": self.model, "prompt": text, "content": text, "add_special": True}
            else:  # llama-cpp-python
                body = {"model": self.model, "input": text}
            try:
                data = self._retrying(functools.partial(self._request, "POST", self.root + kind, body))
            except TransientBackendError:
                raise _Unreachable from None  # server unreachable now: estimate, and ask again next time
            except BackendUnavailable:
                raise
            except BackendError:
                continue
            tokens = data.get("tokens") if isinstance(data, dict) else None
            if isinstance(tokens, list):
                self.capabilities.tokenizer = kind
                return len(tokens)
            if isinstance(data, dict) and isinstance(data.get("count"), int):
                self.capabilities.tokenizer = kind
                return int(data["count"])
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

    # -- HTTP -------------------------------------------------------------------------------------
    def _request(self, method: str, url: str, body: Mapping[str, Any] | None = None, *,
                 fatal_404: bool = False) -> Any:
        """One HTTP call; errors become (Transient)BackendError, the JSON body is returned.

        Connection refused and HTTP 401/403 (and 404 with ``fatal_404``: an endpoint every judgment
        needs) raise :class:`BackendUnavailable`, which stops the run at once.
        """
        if self._limiter is not None:
            self._limiter.wait()
        with self._semaphore:
            status, headers, content = self._exchange(method, url, body)
        with self._lock:
            self._answered, self._silent = True, 0
        text = content.decode("utf-8", errors="replace")
        if status >= 500:
            raise _ServerError(f"{url} returned HTTP {status}: {_server_message(text)}", status,
                               retry_after=_retry_after(headers))
        if status == 429:
            raise TransientBackendError(f"{url} returned HTTP 429: {_server_message(text)}",
                                        retry_after=_retry_after(headers))
        if status in (401, 403):
            key = f" (check {self.preset.key_env})" if self.preset.key_env else ""
            raise BackendUnavailable(f"{url} returned HTTP {status}: {_server_message(text)}{key}")
        if status == 404 and fatal_404:
            raise BackendUnavailable(f"{url} returned HTTP 404: {_server_message(text)} (check the URL "
                                     f"and the model name {self.model!r})")
        if status >= 400:
            raise BackendError(f"{url} returned HTTP {status}: {_server_message(text)}")
        try:
            return json.loads(content)
        except (ValueError, RecursionError) as exc:  # RecursionError: nesting too deep for the decoder
            raise TransientBackendError(f"{url} returned malformed JSON: {text[:200]!r}") from exc

    def _exchange(self, method: str, url: str, body: Mapping[str, Any] | None) -> tuple[int, Mapping[str, str], bytes]:
        """Send one request and read its whole answer before its deadline: ``(status, headers, body)``.

        httpx's timeouts bound each wait on its own (a server sending a byte every few seconds never trips
        them), so the answer is read in pieces against the request's total deadline.
        """
        httpx = self._httpx
        deadline = time.monotonic() + self.timeout_s
        for attempt in range(2):
            try:
                with self._client.stream(method, url, json=body) as resp:
                    chunks = []
                    for chunk in resp.iter_bytes():
                        chunks.append(chunk)
                        if time.monotonic() > deadline:
                            raise _NoAnswer(f"{url}: the answer was not complete within the {self.timeout_s:g} s "
                                            "timeout (it came too slowly)")
                    return resp.status_code, resp.headers, b"".join(chunks)
            except httpx.ConnectTimeout as exc:
                raise _NoAnswer(f"{url}: no connection within {min(self.timeout_s, CONNECT_TIMEOUT_S):g} s") from exc
            except httpx.TimeoutException as exc:
                raise _NoAnswer(f"{url}: no answer within the {self.timeout_s:g} s timeout "
                                f"({type(exc).__name__})") from exc
            except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as exc:
                # A pooled keep-alive connection that the server closed as it was reused: try once
                # more at once on a fresh connection (every request here is safe to repeat).
                if attempt == 0:
                    continue
                raise TransientBackendError(f"{url}: {type(exc).__name__}: {exc}") from exc
            except httpx.ConnectError as exc:
                # Nothing listens there (or the name does not resolve): no retry can help.
                raise BackendUnavailable(f"{url}: cannot connect ({exc}); is the judge server running "
                                         f"at {self.root}?") from exc
            except httpx.TransportError as exc:
                raise TransientBackendError(f"{url}: {type(exc).__name__}: {exc}") from exc
        raise AssertionError("unreachable")

    def _complete(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """POST /v1/completions; check the response shape and count tokens."""
        data = self._request("POST", self.base_url + "/completions", {"model": self.model, **payload},
                             fatal_404=True)
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise TransientBackendError(f"{self.base_url}/completions returned no choices: {str(data)[:200]}")
        usage = _obj(data.get("usage"))
        with self._lock:
            self.requests += 1
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)
        return data

    def _map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        if len(items) <= 1:
            return [fn(item) for item in items]
        return list(self._pool.map(fn, items))

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
            ok, why = self._probe_echo(prompt)
            if not ok and self.labels == "exact":
                raise BackendError(f"{self.base_url} cannot score labels exactly: {why}")
            self.capabilities.exact, self.capabilities.exact_reason = ok, why
            if ok:
                self.capabilities.prompt_lists = self._probe_lists()
            log.info("%s: exact label scoring %s (%s); prompt lists %s", self.base_url,
                     "on" if ok else "off", why, self.capabilities.prompt_lists)

    def _probe_echo(self, prompt: str) -> tuple[bool, str]:
        """Check that echoed prompt log-probabilities are present and aligned, on a real prompt."""
        def greedy() -> tuple[float, Any]:
            first = self._complete({"prompt": prompt, "max_tokens": 1, "temperature": 0.0, "logprobs": 1})
            choice = first["choices"][0]
            lp = choice.get("logprobs") if isinstance(choice, dict) else None
            values = lp.get("token_logprobs") if isinstance(lp, dict) else None
            if not isinstance(values, list) or not values or not isinstance(values[0], (int, float)):
                raise _MalformedResponse(f"{self.base_url}/completions returned no logprobs: label scoring "
                                         "needs them")
            return float(values[0]), choice.get("text") if isinstance(choice, dict) else None

        want, token = self._retrying(greedy)
        if not isinstance(token, str) or not token:
            return False, "probe inconclusive (the greedy continuation is an end token)"

        def echo() -> float:
            echoed = self._complete({"prompt": prompt + token, "max_tokens": 1, "temperature": 0.0,
                                     "logprobs": 1, "echo": True})
            try:
                return _echo_label_logprob(echoed["choices"][0], prompt + token, token)[0]
            except _Malformed as exc:  # retried: a fault in transit looks the same as no support
                raise _MalformedResponse(f"echo unsupported: {exc}") from exc

        try:
            got = self._retrying(echo)
        except _ServerError as exc:
            # The plain request just worked, so a 500 here is the server failing on echo, not an outage.
            if exc.status not in (500, 501):
                raise
            return False, f"echo request failed: {exc}"
        except _MalformedResponse as exc:
            return False, str(exc)
        except (TransientBackendError, BackendUnavailable):
            raise
        except BackendError as exc:
            return False, f"echo unsupported: {exc}"
        # Same distribution computed twice; only batch-shape rounding may differ. A misaligned echo
        # reports another position's probability, off by far more than this.
        if abs(got - want) > 0.05:
            return False, f"echoed log-probabilities are misaligned ({got:.4f} vs {want:.4f})"
        return True, "echo logprobs verified"

    def _probe_lists(self) -> bool:
        try:
            data = self._retrying(lambda: self._complete({"prompt": ["1", "2"], "max_tokens": 1, "temperature": 0.0}))
        except BackendUnavailable:
            raise
        except BackendError:  # llama-cpp-python asserts a single prompt (HTTP 500)
            return False
        return len(data["choices"]) == 2

    # -- labels -----------------------------------------------------------------------------------
    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        if not requests:
            return []
        self._ensure_probed(requests[0].prompt)
        if self.capabilities.exact:
            return self._exact_labels(requests)
        self._warn_once("top_k", f"{self.base_url}: labels are scored from the top-{self.top_k} "
                                 f"log-probabilities ({self.capabilities.exact_reason}); labels outside the "
                                 "top-k get probability 0 (see label_mass)")
        return [self._top_k_labels(req) for req in requests]

    def _exact_labels(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        start = time.perf_counter()
        # Prompt-major order: requests in flight share their prompt, so the server's prefix cache serves them.
        texts = [(i, j, req.prompt + label) for i, req in enumerate(requests) for j, label in enumerate(req.labels)]
        size = self.max_prompts_per_request if self.capabilities.prompt_lists else 1
        chunks = [texts[k:k + size] for k in range(0, len(texts), size)]

        def once(chunk: list[tuple[int, int, str]]) -> list[tuple[float, int]]:
            prompt: str | list[str] = [t for _, _, t in chunk] if size > 1 else chunk[0][2]
            data = self._complete({"prompt": prompt, "max_tokens": 1, "temperature": 0.0,
                                   "logprobs": 1, "echo": True})
            choices = sorted(data["choices"], key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
            if len(choices) != len(chunk):
                raise TransientBackendError(f"{self.base_url}/completions returned {len(choices)} choices for "
                                            f"{len(chunk)} prompts")
            read = []
            for (i, j, text), choice in zip(chunk, choices):
                try:
                    read.append(_echo_label_logprob(choice, text, requests[i].labels[j]))
                except _Malformed as exc:
                    raise _MalformedResponse(f"{self.base_url}: cannot read label {requests[i].labels[j]!r}: "
                                             f"{exc}") from exc
            return read

        values: list[list[float]] = [[0.0] * len(r.labels) for r in requests]
        prompt_tokens = [0] * len(requests)
        for chunk, read in zip(chunks, self._map(lambda c: self._retrying(lambda: once(c)), chunks)):
            for (i, j, _), (value, before) in zip(chunk, read):
                values[i][j] = value
                prompt_tokens[i] = before
        latency = (time.perf_counter() - start) / len(requests)
        return [LabelResult(tuple(v), n, latency, "exact") for v, n in zip(values, prompt_tokens)]

    def _top_k_labels(self, req: LabelRequest) -> LabelResult:
        start = time.perf_counter()
        dists: dict[str, dict[str, float]] = {}
        prompt_tokens = 0
        frontier = [""]
        budget = 1 + sum(len(label) for label in req.labels)  # at most one request per label prefix
        while frontier:
            if len(dists) + len(frontier) > budget:
                raise BackendError(f"top-k label walk exceeded {budget} requests")

            def fetch_once(prefix: str) -> tuple[str, dict[str, float], int]:
                data = self._complete({"prompt": req.prompt + prefix, "max_tokens": 1, "temperature": 0.0,
                                       "logprobs": self.top_k})
                choice = data["choices"][0]
                lp = choice.get("logprobs") if isinstance(choice, dict) else None
                tops = lp.get("top_logprobs") if isinstance(lp, dict) else None
                if not isinstance(tops, list) or not tops or not isinstance(tops[0], dict):
                    raise TransientBackendError(f"{self.base_url}/completions returned no top_logprobs")
                usage = _obj(data.get("usage"))
                dist = {str(t): float(v) for t, v in tops[0].items() if isinstance(v, (int, float))}
                return prefix, dist, int(usage.get("prompt_tokens") or 0)

            found = self._map(lambda p: self._retrying(lambda: fetch_once(p)), frontier)
            nxt: set[str] = set()
            for prefix, dist, used in found:
                dists[prefix] = dist
                if prefix == "":
                    prompt_tokens = used
                for token in dist:
                    longer = prefix + token
                    if token and longer not in dists and any(
                            lab.startswith(longer) and len(lab) > len(longer) for lab in req.labels):
                        nxt.add(longer)
            frontier = sorted(nxt)

        memo: dict[tuple[str, str], float] = {}

        def value(label: str, prefix: str) -> float:
            key = (label, prefix)
            if key not in memo:
                terms = []
                for token, lp in dists.get(prefix, {}).items():
                    longer = prefix + token
                    if token and label.startswith(longer):
                        terms.append(lp if longer == label else lp + value(label, longer))
                memo[key] = _logsumexp(terms)
            return memo[key]

        values = tuple(value(label, "") for label in req.labels)
        return LabelResult(values, prompt_tokens, time.perf_counter() - start, "top_k")

    # -- generation -------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        def once(req: GenerateRequest) -> Generation:
            start = time.perf_counter()
            payload: dict[str, Any] = {
                "prompt": req.prompt, "max_tokens": req.max_new_tokens, "temperature": req.temperature,
                "top_p": 1.0, "seed": req.seed, "stop": list(req.stop), "logprobs": 1,
                **self.preset.sampling,
            }
            data = self._complete(payload)
            choice = data["choices"][0]
            if not isinstance(choice, dict) or not isinstance(choice.get("text"), str):
                raise TransientBackendError(f"{self.base_url}/completions returned a choice without text")
            text = choice["text"]
            cut = [text.find(s) for s in req.stop if s and s in text]
            if cut:  # servers strip the stop string; this keeps the contract for those that do not
                text = text[: min(cut)]
            lp = _obj(choice.get("logprobs"))
            token_lps = tuple(float(v) for v in lp.get("token_logprobs") or [] if isinstance(v, (int, float)))
            usage = _obj(data.get("usage"))
            finish = self._finish_reason(choice)
            return Generation(text, token_lps, finish, int(usage.get("prompt_tokens") or 0),
                              time.perf_counter() - start, int(usage.get("completion_tokens") or len(token_lps)))

        return self._map(lambda r: self._retrying(lambda: once(r)), list(requests))

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
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()


def build(prefix: str, rest: str) -> OpenAICompatibleBackend:
    """Build the backend for judge name ``prefix/rest`` (``rest`` = ``model[@url[?options]]``)."""
    preset = PRESETS[prefix]
    model, url, opts = split_name(rest, preset)
    known = {"ctx", "concurrency", "rpm", "timeout", "labels", "top_k", "template"}
    unknown = set(opts) - known
    if unknown:
        raise ConfigError(f"unknown judge option(s) {', '.join(sorted(unknown))}: use {', '.join(sorted(known))}")
    try:
        return OpenAICompatibleBackend(
            model, url, preset=prefix,
            labels=opts.get("labels", "auto"),  # type: ignore[arg-type]
            top_k=int(opts["top_k"]) if "top_k" in opts else None,
            context_length=int(opts["ctx"]) if "ctx" in opts else None,
            concurrency=int(opts.get("concurrency", 4)),
            timeout_s=float(opts.get("timeout", 120)),
            requests_per_minute=float(opts["rpm"]) if "rpm" in opts else None,
            chat_template=opts.get("template"),
        )
    except ValueError as exc:
        raise ConfigError(f"bad judge option in {prefix}/{rest}: {exc}") from exc


__all__ = ["PRESETS", "Capabilities", "OpenAICompatibleBackend", "Preset", "build", "split_name"]
