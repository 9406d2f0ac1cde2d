"""A judge server that accepts connections and never answers (or answers a byte at a time), on loopback."""

from __future__ import annotations

import socket
import threading


class SilentServer:
    """A loopback server that accepts every connection and never answers; with ``trickle_s``, it sends an HTTP
    head promising a long body and then one byte every ``trickle_s`` seconds (no httpx timeout ever trips)."""

    def __init__(self, trickle_s: float | None = None) -> None:
        self.trickle_s = trickle_s
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.accepted = 0
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self._conns.append(conn)
            if self.trickle_s is not None:
                threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
            while not self._stop.wait(self.trickle_s or 0.1):
                conn.sendall(b" ")
        except OSError:
            pass

    def __enter__(self) -> str:
        self._thread.start()
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self._conns:
            conn.close()
        self.sock.close()
