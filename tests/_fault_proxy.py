"""A fault-injecting HTTP proxy for the reliability tests, on loopback in front of a real server.

Each request is forwarded to the upstream server unless a seeded draw picks a fault for it:

- ``500``: HTTP 500 with a JSON error;
- ``429``: HTTP 429 with ``Retry-After``;
- ``timeout``: no answer until the client gives up;
- ``truncated``: the upstream answer cut in half (valid HTTP, broken JSON);
- ``no_logprobs``: the upstream answer with every choice's ``logprobs`` removed;
- ``drop``: the connection closed without an answer.

A request whose body contains ``poison`` always gets HTTP 500, so that tests can check what happens
to a judgment that never succeeds. Every connection is closed after one answer.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections import Counter
from collections.abc import Sequence

import httpx

FAULTS = ("500", "429", "timeout", "truncated", "no_logprobs", "drop")


class FaultProxy:
    """Run with ``with FaultProxy(upstream, rate=0.2) as url: ...``; ``injected`` counts the faults."""

    def __init__(self, upstream: str, *, rate: float, seed: int = 0, faults: Sequence[str] = FAULTS,
                 hang_s: float = 6.0, poison: str | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.rate = rate
        self.faults = tuple(faults)
        self.hang_s = hang_s
        self.poison = poison.encode() if poison else None
        self.injected: Counter[str] = Counter()
        self.forwarded = 0
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._client: httpx.AsyncClient | None = None
        self.url = ""

    def __enter__(self) -> str:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self.url

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _start(self) -> None:
        self._client = httpx.AsyncClient(timeout=120.0)
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def _stop(self) -> None:
        assert self._server is not None and self._client is not None
        self._server.close()
        await self._server.wait_closed()
        await self._client.aclose()

    def _draw(self, body: bytes) -> str | None:
        if self.poison is not None and self.poison in body:
            return "poison"
        if self._rng.random() < self.rate:
            return self._rng.choice(self.faults)
        return None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            fault = self._draw(body)
            if fault in ("drop", "timeout"):
                self.injected[fault] += 1
                if fault == "timeout":
                    await asyncio.sleep(self.hang_s)
                return
            if fault in ("500", "poison"):
                self.injected[fault] += 1
                await self._answer(writer, 500, json.dumps({"error": {"message": "injected fault"}}).encode())
                return
            if fault == "429":
                self.injected[fault] += 1
                await self._answer(writer, 429, b'{"error": "slow down"}', {"Retry-After": "1"})
                return
            assert self._client is not None
            forward = {k: v for k, v in headers.items() if k in ("content-type", "authorization")}
            resp = await self._client.request(method, self.upstream + path, content=body, headers=forward)
            content = resp.content
            if fault == "truncated":
                self.injected[fault] += 1
                content = content[: len(content) // 2]
            elif fault == "no_logprobs":
                try:
                    data = json.loads(content)
                except ValueError:
                    data = None
                choices = data.get("choices") if isinstance(data, dict) else None
                if isinstance(choices, list) and any(isinstance(c, dict) and "logprobs" in c for c in choices):
                    self.injected[fault] += 1
                    for choice in choices:
                        if isinstance(choice, dict):
                            choice.pop("logprobs", None)
                    content = json.dumps(data).encode()
            self.forwarded += 1
            await self._answer(writer, resp.status_code, content,
                               {"Content-Type": resp.headers.get("content-type", "application/json")})
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, status: int, body: bytes,
                      headers: dict[str, str] | None = None) -> None:
        lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
