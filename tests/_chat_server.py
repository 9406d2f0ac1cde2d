"""A chat-only stand-in for an OpenAI-compatible server, on loopback: for control flow only.

It behaves as OpenAI's API does for a chat model: ``/v1/completions`` answers 404 "This is a chat model ...",
``/v1/chat/completions`` answers the judging prompts of trustjudge's templates in their own form (``Score: [3]``,
``Verdict: [A]``, ``Answer: [YES]``, a critique first when asked for one, claims for an extraction) with
``logprobs.content`` and ``top_logprobs``. The "model" is a script: the label it writes gets probability 0.6
and two other labels 0.25 and 0.15 at the label position; every other position is certain. Tokens are words,
single punctuation marks and a space joined to what follows. With ``continues=True`` a trailing assistant
message is continued (as vLLM's ``continue_final_message`` or llama.cpp's server do); by default it is
answered as a new turn (as OpenAI does). With ``logprobs=False`` no log-probabilities are returned. With
``varies=True`` an answer sampled at a temperature above 0 depends on its seed (:func:`sampled_answer`: one of
the three labels, or no label), and ``answers`` lists ``(the user message, the answer)`` of each.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_ONLY = ("This is a chat model and not supported in the v1/completions endpoint. Did you mean to use "
             "v1/chat/completions?")
TOKEN = re.compile(r"\s?\w+|\s?[^\w\s]|\s+")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content)
    return ""


def script(user: str) -> tuple[str, str, list[str]]:
    """``(text before the label, the label, two other labels)`` of the scripted answer to ``user``."""
    if "Write one claim per line" in user:
        return "- Green tea brews at 80 C.\nEND\n", "", []
    critique = "The response is partly right.\n" if "First " in user else ""
    if '"Score: [' in user:
        marker = "Score: ["
        span = re.search(r"integer from (-?\d+) \(very poor\) to (-?\d+)", user)
        names = re.search(r'"Score: \[X\]" where X is one of ([^.]+)\.', user)
        if span:
            low, high = int(span.group(1)), int(span.group(2))
            mid = (low + high) // 2
            options = [str(v) for v in (mid, min(high, mid + 1), max(low, mid - 1))]
        elif names:
            options = [s.strip() for s in names.group(1).split(",")]
        else:
            options = ["1", "2", "3"]
    elif '"Verdict: [' in user:
        marker = "Verdict: ["
        options = ["A>B", "A=B", "B>A"] if "A>>B" in user else ["A", "C", "B"]
    else:
        marker = "Answer: ["
        found = re.search(r'"Answer: \[X\]" where X is one of ([^.]+)\.', user)
        options = [s.strip() for s in found.group(1).split(",")] if found else ["YES", "NO"]
    seen: list[str] = []
    for o in options:
        if o not in seen:
            seen.append(o)
    return critique + marker, seen[0], seen[1:3]


def sampled_answer(messages: list[dict[str, Any]], seed: int) -> str:
    """A sampled answer that depends on the seed: seed % 4 = 3 writes no label, else the label at seed % 4 of
    the script's (the first, then the two others); a critique asked for names the seed's take on it."""
    before, label, others = script(_user_text(messages))
    if seed % 4 == 3:
        return "I would rather not say."
    options = [label, *others]
    before = before.replace("partly right.", f"partly right (take {seed % 7}).")
    return f"{before}{options[(seed % 4) % len(options)]}]"


def answer(messages: list[dict[str, Any]], continues: bool) -> tuple[str, list[dict[str, Any]]]:
    """The answer's text (a continuation of a trailing assistant message when ``continues``) and its
    log-probability entries."""
    before, label, others = script(_user_text(messages))
    full = before + label + ("]" if label else "")
    done = ""
    if continues and messages and messages[-1].get("role") == "assistant":
        done = str(messages[-1].get("content") or "")
    if done and full.startswith(done):
        rest = full[len(done):]
    elif done:
        rest = "]"  # a continuation the script does not know: close it
    else:
        rest = full
    label_at = len(before) - len(done)  # where the label starts in rest (negative: already written)
    out = []
    pos = 0
    for tok in _split(rest, label_at, label) if label else tokens(rest):
        if label and pos == label_at:
            probs = [(label, 0.6), *zip(others, (0.25, 0.15))]
            out.append({"token": tok, "logprob": math.log(0.6),
                        "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in probs]})
        else:
            out.append({"token": tok, "logprob": 0.0, "top_logprobs": [{"token": tok, "logprob": 0.0}]})
        pos += len(tok)
    return rest, out


def _split(rest: str, label_at: int, label: str) -> list[str]:
    """``rest`` cut into tokens, the label one token at ``label_at`` (where it starts in ``rest``)."""
    if label_at < 0:
        return tokens(rest)
    return [*tokens(rest[:label_at]), label, *tokens(rest[label_at + len(label):])]


class ChatOnlyServer:
    """The stand-in, serving on ``url`` (``http://127.0.0.1:PORT/v1``) in a thread; ``calls`` lists
    ``(path, body)`` of every request."""

    def __init__(self, *, continues: bool = False, logprobs: bool = True, varies: bool = False) -> None:
        self.continues = continues
        self.logprobs = logprobs
        self.varies = varies
        self.answers: list[tuple[str, str]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                stand_in.calls.append((self.path, {}))
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "Not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                stand_in.calls.append((self.path, body))
                if self.path == "/v1/completions":
                    self._send(404, {"error": {"message": CHAT_ONLY, "type": "invalid_request_error"}})
                elif self.path == "/v1/chat/completions":
                    self._send(200, stand_in.chat(body))
                else:
                    self._send(404, {"error": {"message": "Not found"}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        text, entries = answer(body.get("messages") or [], self.continues)
        if self.varies and body.get("temperature"):
            text, entries = sampled_answer(body.get("messages") or [], int(body.get("seed") or 0)), []
            self.answers.append((_user_text(body.get("messages") or []), text))
        limit = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        finish = "stop"
        if len(entries) > limit:
            entries, finish = entries[:limit], "length"
            text = "".join(e["token"] for e in entries)
        for stop in body.get("stop") or []:
            if stop in text:
                text, finish = text[: text.index(stop)], "stop"
        k = int(body.get("top_logprobs") or 0)
        for e in entries:
            e["top_logprobs"] = e["top_logprobs"][:k]
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": finish}
        choice["logprobs"] = {"content": entries} if self.logprobs and body.get("logprobs") else None
        prompt = sum(len(str(m.get("content"))) for m in body.get("messages") or []) // 4
        return {"id": "x", "object": "chat.completion", "model": body.get("model"), "choices": [choice],
                "usage": {"prompt_tokens": prompt, "completion_tokens": len(entries)}}

    def paths(self) -> list[str]:
        return [path for path, _ in self.calls]


@contextmanager
def chat_only_server(**kwargs: Any) -> Iterator[ChatOnlyServer]:
    server = ChatOnlyServer(**kwargs)
    server._thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
