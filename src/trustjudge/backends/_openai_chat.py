"""Judging through an OpenAI-compatible chat endpoint (``/v1/chat/completions``).

A chat model (gpt-4o, a vLLM or Ollama chat endpoint, a gateway) takes messages, not a prompt string, and its
server applies the chat template. The engine and the modes still deal in prompt strings (store keys,
``cot``'s ``prompt + critique + marker``), so a chat prompt is a :class:`ChatPrompt` encoded as one string:
a header, the messages as one JSON line, then the assistant's text so far (the marker ``Score: [`` of a
``direct`` judgment, the critique and the marker of a ``cot`` one). Appending to the string appends to the
assistant's text, so the protocols work unchanged. :func:`build_messages` is the one place messages are made
(system, earlier turns, the judging prompt; a user content may be a list of content parts, such as images).

Where the label is read:

- **continued assistant message** (vLLM's ``continue_final_message`` with ``add_generation_prompt: false``,
  the C++ ``llama-server``'s trailing assistant message): the assistant's text is sent as the last message and
  the server continues it, so the label position is the first generated token, and multi-token labels walk
  the label trie as the completions path does (``label_method: top_k``). Detected, never assumed
  (:func:`probe_prefill`): the greedy two tokens after a prefix ``P`` are compared with the greedy token
  after ``P`` + the first, as the echo probe compares log-probabilities.
- **the judge's own answer** (OpenAI, llama-cpp-python's server and any server that does not continue an
  assistant message): the judge answers the messages (greedy, with ``top_logprobs``), the assistant's
  expected text (``Score: [``, or critique + ``Score: [``) is found in the answer's final content, and the
  label is read from the top-k at the position right after it (:func:`read_answer`). Positions after the
  first are known only along the tokens the judge wrote, so a label that is a first token plus the closing
  bracket counts that token's probability (the bracket assumed), and one that needs an unseen later token
  gets 0: ``label_method: top_k_first``. A ``cot`` critique and its label come from one answer (the
  critique generation keeps the answer past the marker, :class:`AnswerCache`).

Reasoning models: the label is read in the final ``content``; ``reasoning_content`` is never read, and the
token budget of an answer (``answer_tokens``) must leave room for the reasoning.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .._images import MARKER
from .._images import lookup as lookup_image
from ..errors import BackendError, BackendUnavailable, TransientBackendError
from ._openai_http import Channel, ClientError, MalformedResponse, ServerError, json_object
from ._openai_labels import logsumexp

Message = dict[str, Any]
"""One chat message: ``{"role": ..., "content": str | [content part, ...]}``."""
ContentPart = Mapping[str, Any]
"""One content part of a user message (``{"type": "text", "text": ...}``, ``{"type": "image_url", ...}``)."""

CHAT_HEAD = "trustjudge-chat-v1:"
"""How an encoded :class:`ChatPrompt` begins."""

PREFILL_STYLES = ("vllm", "trailing")
"""How a server is asked to continue the assistant's text: ``vllm`` sends it as the last message with
``continue_final_message: true, add_generation_prompt: false``; ``trailing`` sends it as the last message
(llama.cpp's server continues a trailing assistant message)."""


IMAGE_REF = "trustjudge-image:"
"""How an encoded prompt's image part names its image (``trustjudge-image:sha256:<hex>``): the store key holds
the digest, not the bytes; :meth:`ChatPrompt.body` sends the image itself (a ``data:`` URI or its URL)."""


def content_parts(user: str) -> str | list[dict[str, Any]]:
    """A user turn holding image markers as chat content parts (texts and ``image_url`` parts in order);
    a text without images as itself."""
    if MARKER.search(user) is None:
        return user
    parts: list[dict[str, Any]] = []
    pos = 0
    for m in MARKER.finditer(user):
        if user[pos:m.start()]:
            parts.append({"type": "text", "text": user[pos:m.start()]})
        parts.append({"type": "image_url", "image_url": {"url": IMAGE_REF + m.group(1)}})
        pos = m.end()
    if user[pos:]:
        parts.append({"type": "text", "text": user[pos:]})
    return parts


def _resolved(message: Message) -> Message:
    """``message`` with each image part's reference replaced by the image (its data URI or URL)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    out = []
    for part in content:
        url = part.get("image_url", {}).get("url") if isinstance(part, dict) else None
        if isinstance(url, str) and url.startswith(IMAGE_REF):
            digest = url[len(IMAGE_REF):]
            try:
                image = lookup_image(digest)
            except KeyError:
                raise BackendError(f"the prompt shows image {digest}, which is not loaded in this process "
                                   "(judge the items that hold it)") from None
            part = {**part, "image_url": {**part["image_url"], "url": image.as_url()}}
        out.append(part)
    return {**message, "content": out}


def build_messages(system: str, user: str | Sequence[ContentPart], turns: Sequence[Mapping[str, Any]] = ()) \
        -> tuple[Message, ...]:
    """The messages of one judgment: the system prompt (if any), earlier ``turns`` as given, then the judging
    prompt as the user's message (a text, or a list of content parts)."""
    out: list[Message] = []
    if system:
        out.append({"role": "system", "content": system})
    out.extend(dict(turn) for turn in turns)
    content = content_parts(user) if isinstance(user, str) else [dict(p) for p in user]  # images: their parts
    out.append({"role": "user", "content": content})
    return tuple(out)


R = TypeVar("R")


def by_prompt(requests: Sequence[Any], chat: Callable[[list[Any]], list[R]],
              text: Callable[[list[Any]], list[R]]) -> list[R]:
    """Each request answered by ``chat`` where its prompt is a chat prompt (one with images, on a server whose
    text prompts go to completions), else by ``text``, in the requests' order."""
    at = [i for i, r in enumerate(requests) if r.prompt.startswith(CHAT_HEAD)]
    others = [i for i in range(len(requests)) if i not in set(at)]
    out: dict[int, R] = dict(zip(at, chat([requests[i] for i in at])))
    out.update(zip(others, text([requests[i] for i in others]) if others else []))
    return [out[i] for i in range(len(requests))]


@dataclass(frozen=True)
class ChatPrompt:
    """The messages of a judgment and the assistant's text so far (what the label follows)."""

    messages: tuple[Message, ...]
    assistant: str = ""

    def encode(self) -> str:
        """One string: :data:`CHAT_HEAD`, the messages as a JSON line (JSON escapes every newline), a newline,
        the assistant's text. Appending text to it appends to the assistant's text."""
        line = json.dumps(list(self.messages), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        return f"{CHAT_HEAD}{line}\n{self.assistant}"

    @classmethod
    def decode(cls, prompt: str) -> ChatPrompt | None:
        """The prompt :meth:`encode` made, or ``None`` for any other string."""
        if not prompt.startswith(CHAT_HEAD):
            return None
        line, newline, assistant = prompt[len(CHAT_HEAD):].partition("\n")
        try:
            messages = json.loads(line) if newline else None
        except ValueError:
            return None
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return None
        return cls(tuple(messages), assistant)

    @property
    def question(self) -> str:
        """The encoding without the assistant's text (the key of the judge's answers to these messages)."""
        return ChatPrompt(self.messages).encode()

    def text(self) -> str:
        """The text the model reads (for token counts): every text content, then the assistant's text."""
        parts = []
        for m in self.messages:
            content = m.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        return "\n\n".join([*parts, self.assistant])

    def body(self, style: str | None, assistant: str | None = None) -> dict[str, Any]:
        """The request fields for these messages; with a prefill ``style``, the assistant's text (or
        ``assistant``) is the last message, to be continued."""
        messages = [_resolved(dict(m)) for m in self.messages]
        text = self.assistant if assistant is None else assistant
        if style is None or not text:
            return {"messages": messages}
        messages.append({"role": "assistant", "content": text})
        if style == "vllm":
            return {"messages": messages, "continue_final_message": True, "add_generation_prompt": False}
        return {"messages": messages}


class NoLogprobs(BackendError):
    """A chat answer without the log-probabilities asked for."""


Entry = tuple[str, float, dict[str, float]]
"""One generated token: its text, its log-probability, the top-k at its position (text -> log-probability)."""


def answer_entries(choice: Mapping[str, Any], url: str) -> list[Entry]:
    """The generated tokens of a chat choice, from ``logprobs.content``; several top-k entries with one text
    (other tokenizations) add up. Raises :class:`NoLogprobs` when the choice has none."""
    content = json_object(choice.get("logprobs")).get("content")
    if not isinstance(content, list):
        raise NoLogprobs(f"{url} returned no log-probabilities")
    out: list[Entry] = []
    for e in content:
        if not isinstance(e, dict) or not isinstance(e.get("token"), str):
            raise MalformedResponse(f"{url} returned a log-probability entry without a token: {str(e)[:200]}")
        lp = e.get("logprob")
        value = float(lp) if isinstance(lp, (int, float)) and not isinstance(lp, bool) else -math.inf
        tops: dict[str, list[float]] = {}
        for t in e.get("top_logprobs") or []:
            if isinstance(t, dict) and isinstance(t.get("token"), str) and isinstance(t.get("logprob"), (int, float)):
                tops.setdefault(t["token"], []).append(float(t["logprob"]))
        dist = {tok: logsumexp(vs) for tok, vs in tops.items()}
        dist.setdefault(e["token"], value)
        out.append((e["token"], value, dist))
    return out


def choice_content(choice: Mapping[str, Any]) -> str:
    """The final answer's text (``reasoning_content`` is not part of it)."""
    message = json_object(choice.get("message"))
    content = message.get("content")
    return content if isinstance(content, str) else ""


def read_answer(entries: Sequence[Entry], content: str, expected: str, labels: Sequence[str]) \
        -> dict[str, dict[str, float]] | None:
    """The top-k after ``expected`` in the judge's answer, as a label trie's positions (label prefix -> the
    top-k after it): the first position after ``expected``, then the positions along the tokens the judge
    wrote there. ``None`` when the final answer does not contain ``expected`` followed by a token.

    The answer's text is the tokens' texts joined; where the server also lists reasoning tokens, the search
    starts where the final ``content`` does. The end of ``expected`` may fall inside a token (`` [5``): that
    position's alternatives that begin with the same characters count, minus them.
    """
    texts = [t for t, _, _ in entries]
    joined = "".join(texts)
    base = 0
    if content.strip():  # where the final content begins (after any reasoning tokens)
        at = joined.rfind(content)
        base = max(0, at if at >= 0 else joined.rfind(content.strip()))
    hit = joined.find(expected, base)
    if hit < 0:
        return None
    pos = hit + len(expected)
    start = 0
    for i, text in enumerate(texts):
        end = start + len(text)
        if start <= pos < end:
            return _along(entries, i, joined[start:pos], labels)
        start = end
    return None


def _along(entries: Sequence[Entry], i: int, rem: str, labels: Sequence[str]) -> dict[str, dict[str, float]]:
    """The trie positions of :func:`read_answer`: the first (token ``i``, minus ``rem``), then one per token
    the judge wrote after it while what it wrote still begins a label."""
    first = entries[i][2]
    dists = {"": {tok[len(rem):]: lp for tok, lp in first.items() if tok.startswith(rem) and len(tok) > len(rem)}}
    prefix = entries[i][0][len(rem):]
    for text, _, dist in entries[i + 1:]:
        if not prefix or not any(lab.startswith(prefix) and len(lab) > len(prefix) for lab in labels):
            break
        dists[prefix] = dist
        prefix += text
    return dists


def probe_prefill(http: Channel, prompt: ChatPrompt, styles: Sequence[str], extra: Mapping[str, Any],
                  tokens: str = "max_tokens") -> tuple[str | None, str]:
    """The first style in ``styles`` in which the server continues the assistant's text, checked on a real
    prompt: the greedy tokens ``t1 t2`` after prefix ``P`` must be the greedy token after ``P + t1``, with the
    same log-probability (a server that opens a new turn instead answers ``P + t1`` from a turn's start).
    ``extra``: the server's sampling fields; ``tokens``: its token budget field. Returns ``(style, why)``;
    ``(None, why)`` when none does."""
    prefix = prompt.assistant or "The"
    why = "no style tried"
    for style in styles:
        def greedy(assistant: str, n: int, st: str = style) -> list[Entry]:
            data = http.chat({**extra, **prompt.body(st, assistant), tokens: n, "temperature": 0.0,
                              "logprobs": True, "top_logprobs": 1})
            return answer_entries(data["choices"][0], http.base_url + "/chat/completions")

        try:
            first = http.retrying(lambda: greedy(prefix, 2))
            if len(first) < 2 or not first[0][0]:
                why = f"{style}: probe inconclusive (the answer ended at once)"
                continue
            longer = prefix + first[0][0]
            again = http.retrying(lambda: greedy(longer, 1))  # noqa: B023 - called at once
        except ServerError as exc:
            if exc.status not in (500, 501):
                raise
            why = f"{style}: {exc}"
            continue
        except (TransientBackendError, BackendUnavailable):
            raise
        except BackendError as exc:  # 4xx: the server refuses the form; NoLogprobs: nothing to compare
            if isinstance(exc, NoLogprobs):
                raise
            why = f"{style}: {exc}"
            continue
        if again and again[0][0] == first[1][0] and abs(again[0][1] - first[1][1]) <= 0.05:
            return style, f"{style}: the server continues an assistant message (checked)"
        why = f"{style}: the server does not continue an assistant message (a new turn answered)"
    return None, why


class AnswerCache:
    """The judge's recent answers to a prompt's messages, kept past a ``cot`` critique's stop so that its label
    is read from the same answer (the server cannot continue the critique)."""

    def __init__(self, size: int = 4096) -> None:
        self._items: OrderedDict[str, list[tuple[str, list[Entry], int]]] = OrderedDict()
        self._lock = threading.Lock()
        self.size = size

    def put(self, question: str, content: str, entries: list[Entry], prompt_tokens: int) -> None:
        with self._lock:
            self._items.setdefault(question, []).append((content, entries, prompt_tokens))
            self._items.move_to_end(question)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def find(self, question: str, expected: str) -> tuple[str, list[Entry], int] | None:
        """A kept answer to ``question`` (its content, tokens, prompt tokens) whose text holds ``expected``."""
        with self._lock:
            for content, entries, used in reversed(self._items.get(question, [])):
                if expected in "".join(t for t, _, _ in entries):
                    return content, entries, used
        return None


def after_expected(content: str, expected: str) -> str:
    """What a new answer wrote after ``expected`` (the assistant's text a server could not be asked to continue,
    such as ``Score: [``): the generation from there, or ``""`` when the answer never wrote it (no label is read
    from an answer in another form, as with log-probabilities)."""
    if not expected:
        return content
    at = content.find(expected)
    return "" if at < 0 else content[at + len(expected):]


def refused_completions(exc: ClientError) -> bool:
    """Whether a completions request's 4xx says the model is served by chat only (a 404, or a 400 that names
    chat, as OpenAI's "This is a chat model ..." does)."""
    return exc.status == 404 or (exc.status == 400 and "chat" in exc.server_message.lower())


__all__ = ["CHAT_HEAD", "IMAGE_REF", "PREFILL_STYLES", "AnswerCache", "ChatPrompt", "ContentPart", "Entry",
           "Message", "NoLogprobs", "after_expected", "answer_entries", "build_messages", "by_prompt",
           "choice_content", "content_parts", "probe_prefill", "read_answer", "refused_completions"]
