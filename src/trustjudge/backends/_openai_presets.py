"""What a judge-name prefix of the OpenAI-compatible backend means: its server's defaults and prompt text.

- :data:`PRESETS`: per prefix (``openai``, ``vllm``, ``llamacpp-server``, ``ollama``, ``http``) the default
  base URL, the environment variable of the API key and the sampling parameters that make temperature
  sampling plain on that server;
- :func:`split_name`: ``<model>[@<base_url>[?options]]`` into its parts;
- where a key from the environment goes (a warning when that is not the preset's own server, or in clear
  text);
- the prompt text a server is sent: the control strings of common chat templates (:data:`REMOTE_SPECIALS`,
  broken in quoted texts) and the chat template (``plain``, ``chatml`` or a Jinja2 string).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl

from .._net import is_loopback
from ..errors import ConfigError

log = logging.getLogger("trustjudge.backends.openai")

LabelMode = Literal["auto", "exact", "top_k"]

# The control strings of the chat templates in common use (ChatML/Qwen, Llama 3, Gemma, Mistral, Phi,
# SentencePiece BOS/EOS). A server parses them in prompt text, so quoted texts must not carry them.
REMOTE_SPECIALS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|begin_of_text|>", "<|end_of_text|>", "<start_of_turn>", "<end_of_turn>",
                   "<bos>", "<eos>", "[INST]", "[/INST]", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>",
                   "<s>", "</s>")

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
    concurrency: int = 4
    """Requests in flight per server by default (``?concurrency=`` overrides it)."""
    chat_top_k: int = 20
    """``top_logprobs`` of a chat request (OpenAI's chat endpoint returns at most 20)."""
    prefill: tuple[str, ...] = ("vllm", "trailing")
    """How to ask the server to continue an assistant message, tried in order by the probe
    (:data:`~._openai_chat.PREFILL_STYLES`); empty: the API is known not to."""
    tokens_field: str = "max_tokens"
    """The chat request's token budget field (OpenAI's reasoning models take only ``max_completion_tokens``)."""


PRESETS: dict[str, Preset] = {
    # OpenAI's completions endpoint returns at most 5 log-probabilities per position.
    # OpenAI's chat endpoint returns up to 20 (top_logprobs) and never continues an assistant message.
    "openai": Preset("https://api.openai.com/v1", "OPENAI_API_KEY", key_required=True, top_k=5, prefill=(),
                     tokens_field="max_completion_tokens"),
    "vllm": Preset("http://127.0.0.1:8000", "VLLM_API_KEY",
                   sampling={"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}, prefill=("vllm",)),
    # llama-cpp-python's server defaults to repeat_penalty 1.1, top_k 40, min_p 0.05, and serves one request
    # at a time (concurrent requests only queue, and time out together).
    "llamacpp-server": Preset("http://127.0.0.1:8080", "LLAMA_API_KEY",
                              sampling={"top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0}, concurrency=1,
                              prefill=("trailing",)),
    "ollama": Preset("http://127.0.0.1:11434", None, prefill=("trailing",)),
    "http": Preset(None, "TRUSTJUDGE_API_KEY"),
}


def split_name(rest: str, preset: Preset) -> tuple[str, str, dict[str, str]]:
    """Split ``<model>[@<base_url>[?options]]`` into model, base URL and options."""
    match = re.match(r"^(.*?)@(https?://.*)$", rest)
    if match:
        model, (url, _, query) = match.group(1), match.group(2).partition("?")
    else:  # the preset's own server: options follow the model (``openai/gpt-4o?api=chat``)
        model, _, query = rest.partition("?")
        url = preset.base_url or ""
    if not model:
        raise ConfigError(f"judge name needs a model before '@': {rest!r}")
    if not url:
        raise ConfigError(f"judge name needs a server: <model>@http://host:port, got {rest!r}")
    return model, url, dict(parse_qsl(query))


def warn_key_destination(preset: Preset, name: str, root: str, scheme: str, host: str) -> None:
    """Say where a key from the environment goes when that is not the preset's own server, or in clear text."""
    default = (preset.base_url or "").rstrip("/").removesuffix("/v1")
    if preset.base_url and root != default:
        log.warning("%s/ sends $%s to %s, not to %s", name, preset.key_env, root, default)
    if scheme == "http" and not is_loopback(host):
        log.warning("$%s is sent to %s over plain HTTP: anyone on the path can read it (use https)",
                    preset.key_env, root)


def _raise_exception(message: str) -> None:
    raise ConfigError(f"the chat template refused the messages: {message}")


def load_template(spec: str | None) -> tuple[str, Any]:
    """``(tag, template)`` of a chat template spec: ``plain`` (no template), ``chatml`` or a Jinja2 string."""
    if spec in (None, "", "plain"):
        return "plain", None
    text = CHATML if spec == "chatml" else spec
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise_exception  # Hugging Face chat templates call it
    template = env.from_string(text)
    tag = "chatml" if spec == "chatml" else "tpl-" + hashlib.sha256(text.encode()).hexdigest()[:12]
    return tag, template


__all__ = ["CHATML", "PRESETS", "REMOTE_SPECIALS", "LabelMode", "Preset", "load_template", "split_name",
           "warn_key_destination"]
