"""The chat path of :class:`~trustjudge.backends._openai.OpenAICompatibleBackend`: label distributions and
generations through ``/chat/completions`` (:class:`ChatJudging`, a part of the backend class).

A label is read one of two ways: where the server continues an assistant message (probed once per server and
model, :meth:`ChatJudging._prefill`), by walking the labels token by token from the top-k log-probabilities after
the prompt's assistant text (``label_method`` ``top_k``); else from the judge's own answer, at the label's first
position after that text (``top_k_first``). A ``cot`` critique on a server that cannot continue it runs past its
stop, and the answer is kept (:class:`~trustjudge.backends._openai_chat.AnswerCache`) so that the label is read
from the same answer. The messages, content parts and answer reading are :mod:`._openai_chat`'s.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import BackendError, BackendUnavailable
from ._base import FinishReason, GenerateRequest, Generation, LabelRequest, LabelResult
from ._openai_chat import (
    AnswerCache,
    ChatPrompt,
    Entry,
    NoLogprobs,
    after_expected,
    answer_entries,
    choice_content,
    probe_prefill,
    read_answer,
)
from ._openai_http import Channel, json_object
from ._openai_labels import trie_values, walk_top_k
from ._openai_presets import LabelMode, Preset
from ._openai_server import Capabilities, server_facts

log = logging.getLogger("trustjudge.backends.openai")

CLOSE = "]"
"""The closing bracket of a label (the engine's ``CLOSE``), assumed after a chat answer's first position."""
KEEP_TOKENS = 16
"""Tokens a ``cot`` critique on a chat server that cannot continue it may run past its stop: the label."""


class ChatJudging:
    """The chat-completions methods of the OpenAI-compatible backend, over the attributes it sets."""

    base_url: str
    model: str
    preset: Preset
    preset_name: str
    labels: LabelMode
    chat_top_k: int
    answer_tokens: int
    capabilities: Capabilities
    _http: Channel
    _probe_lock: threading.Lock
    _answers: AnswerCache
    _transport: Any

    if TYPE_CHECKING:
        def count_tokens(self, text: str) -> int: ...
        def _warn_once(self, key: str, message: str) -> None: ...
        @staticmethod
        def _finish_reason(choice: Mapping[str, Any]) -> FinishReason: ...

    def _chat(self, prompt: str) -> ChatPrompt:
        chat = ChatPrompt.decode(prompt)
        if chat is None:
            raise BackendError(f"{self.base_url} judges {self.model!r} through chat completions, but was given a "
                               "prompt this backend did not format (format prompts with its format_prompt)")
        return chat

    def _no_logprobs(self, exc: NoLogprobs) -> BackendUnavailable:
        return BackendUnavailable(
            f"the judge {self.preset_name}/{self.model} returned no log-probabilities ({exc}): trustjudge reads "
            "each label's probability from them (chat logprobs/top_logprobs). Use a model and server that "
            "return them, or add labels=sampled&samples=N to the judge name to estimate the labels from N "
            "sampled answers")

    def _prefill(self, chat: ChatPrompt) -> str | None:
        """How this server continues an assistant message (probed once per server and model), or ``None``."""
        if self.capabilities.prefill is None:
            with self._probe_lock:
                if self.capabilities.prefill is None:
                    facts = server_facts(self.base_url, self.model, self._transport)
                    if "prefill" not in facts:
                        if not self.preset.prefill:
                            style, why = None, f"{self.preset_name}/ does not continue assistant messages"
                        else:
                            try:
                                style, why = probe_prefill(self._http, chat, self.preset.prefill,
                                                           self.preset.sampling, self.preset.tokens_field)
                            except NoLogprobs as exc:  # labels=sampled: a new turn is answered (or refused)
                                style, why = None, f"no log-probabilities to probe with ({exc})"
                        facts["prefill"], facts["prefill_why"] = style or "", why
                        log.info("%s: %s", self.base_url, why)
                    self.capabilities.prefill = str(facts["prefill"])
                    self.capabilities.prefill_reason = str(facts["prefill_why"])
        return self.capabilities.prefill or None

    def _params(self, max_tokens: int, temperature: float = 0.0, seed: int = 0) -> dict[str, Any]:
        return {self.preset.tokens_field: max_tokens, "temperature": temperature, "seed": seed,
                **self.preset.sampling}

    def _chat_labels(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        if self.labels == "exact":
            raise BackendError(f"{self.base_url} serves {self.model!r} through chat completions only, which "
                               "cannot score labels exactly (labels=exact): use labels=auto or top_k")
        chats = [self._chat(r.prompt) for r in requests]
        style = self._prefill(chats[0])
        if style:
            self._warn_once("top_k", f"{self.base_url}: labels are read from the top-{self.chat_top_k} "
                                     "log-probabilities of chat completions (the server continues the "
                                     "assistant's text, so labels are walked token by token); labels outside "
                                     "the top-k get probability 0 (see label_mass)")
        else:
            self._warn_once("top_k", f"{self.base_url}: labels are read from the top-{self.chat_top_k} "
                                     f"log-probabilities in the judge's chat answer, at the label's first position "
                                     f"({self.capabilities.prefill_reason}; label_method top_k_first); labels "
                                     "outside the top-k get probability 0 (see label_mass)")

        def one(pair: tuple[LabelRequest, ChatPrompt]) -> LabelResult:
            req, chat = pair
            start = time.perf_counter()
            try:
                if style:
                    values, used = self._walk(req, chat, style)
                    method = "top_k"
                else:
                    values, used = self._read_in_answer(req, chat)
                    method = "top_k_first"
            except NoLogprobs as exc:
                raise self._no_logprobs(exc) from exc
            return LabelResult(values, used, time.perf_counter() - start, method, api="chat")

        pairs = list(zip(requests, chats))
        # A walk fans out on the channel's pool itself; an answer is one request, so answers go on the pool.
        return [one(pair) for pair in pairs] if style else self._http.map(one, pairs)

    def _walk(self, req: LabelRequest, chat: ChatPrompt, style: str) -> tuple[tuple[float, ...], int]:
        url = self.base_url + "/chat/completions"

        def fetch(prefix: str) -> tuple[dict[str, float], int]:
            data = self._http.chat({**chat.body(style, chat.assistant + prefix), **self._params(1),
                                    "logprobs": True, "top_logprobs": self.chat_top_k})
            entries = answer_entries(data["choices"][0], url)
            used = int(json_object(data.get("usage")).get("prompt_tokens") or 0)
            return (entries[0][2] if entries else {}), used  # no entry: the answer ended there

        return walk_top_k(req.labels, fetch, self._http)

    def _answer(self, chat: ChatPrompt, max_tokens: int) -> tuple[str, list[Entry], int]:
        """The judge's greedy answer to ``chat``'s messages, with the top-k at every position."""
        def once() -> tuple[str, list[Entry], int]:
            data = self._http.chat({**chat.body(None), **self._params(max_tokens), "logprobs": True,
                                    "top_logprobs": self.chat_top_k})
            choice = data["choices"][0]
            entries = answer_entries(choice, self.base_url + "/chat/completions")
            return choice_content(choice), entries, int(json_object(data.get("usage")).get("prompt_tokens") or 0)

        return self._http.retrying(once)

    def _read_in_answer(self, req: LabelRequest, chat: ChatPrompt) -> tuple[tuple[float, ...], int]:
        kept = self._answers.find(chat.question, chat.assistant) if chat.assistant else None
        if kept is not None:
            content, entries, used = kept
        else:
            budget = self.answer_tokens + (self.count_tokens(chat.assistant) if len(chat.assistant) > 16 else 0)
            content, entries, used = self._answer(chat, budget)
        dists = read_answer(entries, content, chat.assistant, req.labels)
        if dists is None:
            self._warn_once("unread", f"{self.base_url}: a chat answer did not contain {chat.assistant[-40:]!r} "
                                      f"within {self.answer_tokens} tokens, so its label could not be read (unscored "
                                      "no_label_mass; a reasoning model needs a larger ?answer_tokens=)")
            return tuple(-math.inf for _ in req.labels), used
        return trie_values(req.labels, dists, assume=CLOSE), used

    def _chat_generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        url = self.base_url + "/chat/completions"

        def once(req: GenerateRequest) -> Generation:
            start = time.perf_counter()
            chat = self._chat(req.prompt)
            style = self._prefill(chat)
            # A server that cannot continue the assistant's text answers anew (a sampled label: the text after
            # the assistant's in the answer is the generation). A possible cot critique on one: the answer runs
            # past the stop, and is kept, so that the label is read from the same answer.
            fresh = "" if style else chat.assistant
            keep = bool(req.stop) and not style and not fresh
            budget = req.max_new_tokens + (KEEP_TOKENS if keep else 0) + (self.answer_tokens if fresh else 0)
            body: dict[str, Any] = {**chat.body(style), **self._params(budget, req.temperature, req.seed),
                                    "top_p": 1.0, "logprobs": True}
            if keep:
                body["top_logprobs"] = self.chat_top_k
            else:
                body["stop"] = list(req.stop)
            data = self._http.chat(body)
            choice = data["choices"][0]
            content = after_expected(choice_content(choice), fresh)
            try:
                entries = [] if fresh else answer_entries(choice, url)
            except NoLogprobs:  # a plain or sampled generation needs them only for the critique's perplexity
                keep, entries = False, []
            cut = [content.find(s) for s in req.stop if s and s in content]
            text = content[: min(cut)] if cut else content
            lps: list[float] = []
            seen = 0
            for token, lp, _ in entries:
                if seen >= len(text):
                    break
                lps.append(lp)
                seen += len(token)
            finish = self._finish_reason(choice)
            if keep:
                self._answers.put(chat.question, content, entries, int(json_object(data.get("usage"))
                                                                       .get("prompt_tokens") or 0))
                finish = "stop" if cut and len(lps) <= req.max_new_tokens else (
                    "length" if cut or finish == "length" else "eos")
            elif cut:
                finish = "stop"
            usage = json_object(data.get("usage"))
            return Generation(text, tuple(lps), finish, int(usage.get("prompt_tokens") or 0),
                              time.perf_counter() - start, int(usage.get("completion_tokens") or len(lps)))

        def guarded(req: GenerateRequest) -> Generation:
            try:
                return self._http.retrying(lambda: once(req))
            except NoLogprobs as exc:
                raise self._no_logprobs(exc) from exc

        return self._http.map(guarded, list(requests))
