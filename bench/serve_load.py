"""Bounded load test of ``trustjudge serve``.

Starts the service itself (``python -m trustjudge.cli serve``) on a free loopback port with a fresh
store, then runs N concurrent clients for T seconds, each posting small ``/v1/score`` requests (one
item, two responses, texts unique per request so that every request needs judging) in a loop.
Reports requests/s, judgments/s, latency percentiles, errors by status and how many requests the
server merged per judge call; fails (exit 1) on any 5xx or transport error. Prints and writes
bench/results/serve_load.{json,md}.

Run: .venv/bin/python bench/serve_load.py [--judge mock/hash] [--clients 8] [--seconds 10]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from _common import machine, write_results

MAX_CLIENTS = 64
MAX_SECONDS = 120.0
START_TIMEOUT_S = 600.0


def free_port() -> int:
    """A port free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (nan when empty)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, int(-(-q * len(sorted_values) // 100)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def request_body(client: int, n: int, scale: int) -> dict[str, Any]:
    """One small score request, unique per client and sequence number."""
    return {"scale": scale, "items": [{
        "id": "q1", "question": f"Client {client}, request {n}: why does ice float on water?",
        "responses": [{"id": "a", "text": f"Ice is less dense than liquid water ({client}/{n})."},
                      {"id": "b", "text": f"Because it is cold ({client}/{n})."}]}]}


def start_server(judge: str, store: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start ``trustjudge serve`` as a subprocess and wait until /healthz answers."""
    cmd = [sys.executable, "-m", "trustjudge.cli", "serve", "--judge", judge, "--store", str(store),
           "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
           # every client is on loopback: one address (the default allows 16 requests in progress per address)
           "--max-requests-per-address", str(MAX_CLIENTS)]
    env = {**os.environ, "TRUSTJUDGE_API_KEYS": ""}
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with status {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit(f"the server did not answer /healthz within {START_TIMEOUT_S:.0f} s")


def run_clients(url: str, clients: int, seconds: float, scale: int) -> tuple[list[float], Counter[str], float]:
    """Run the clients; return latencies of 2xx answers, outcome counts and the elapsed time."""
    latencies: list[float] = []
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)
    deadline = [0.0]

    def client(index: int) -> None:
        mine: list[float] = []
        counts: Counter[str] = Counter()
        with httpx.Client(base_url=url, timeout=60) as c:
            barrier.wait()
            n = 0
            while time.monotonic() < deadline[0]:
                body = request_body(index, n, scale)
                began = time.perf_counter()
                try:
                    r = c.post("/v1/score", json=body)
                    status = str(r.status_code)
                except httpx.TransportError as exc:
                    status = f"transport:{type(exc).__name__}"
                took = time.perf_counter() - began
                counts[status] += 1
                if status.startswith("2"):
                    mine.append(took)
                n += 1
        with lock:
            latencies.extend(mine)
            outcomes.update(counts)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    deadline[0] = time.monotonic() + seconds
    began = time.perf_counter()
    barrier.wait()
    for t in threads:
        t.join(seconds + 120)
    return sorted(latencies), outcomes, time.perf_counter() - began


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--judge", default="mock/hash", help="judge the server loads (default mock/hash)")
    ap.add_argument("--clients", type=int, default=8, help=f"concurrent clients (1..{MAX_CLIENTS})")
    ap.add_argument("--seconds", type=float, default=10.0, help=f"duration (<= {MAX_SECONDS:.0f})")
    ap.add_argument("--scale", type=int, choices=(5, 10, 100), default=100)
    ap.add_argument("--name", default="serve_load", help="results file name under bench/results/")
    args = ap.parse_args()
    clients = min(max(1, args.clients), MAX_CLIENTS)
    seconds = min(max(1.0, args.seconds), MAX_SECONDS)

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        log = Path(tmp) / "server.log"
        proc = start_server(args.judge, Path(tmp) / "store.sqlite", port, log)
        url = f"http://127.0.0.1:{port}"
        try:
            warm = httpx.post(f"{url}/v1/score", json=request_body(-1, 0, args.scale), timeout=600)
            warm.raise_for_status()
            base = httpx.get(f"{url}/v1/stats", timeout=10).json()
            latencies, outcomes, elapsed = run_clients(url, clients, seconds, args.scale)
            stats = httpx.get(f"{url}/v1/stats", timeout=10).json()
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        server_log = log.read_text(errors="replace")

    total = sum(outcomes.values())
    ok = sum(v for k, v in outcomes.items() if k.startswith("2"))
    runs = stats["engine_runs"] - base["engine_runs"]
    served = stats["requests"] - base["requests"]
    result = {
        "judge": args.judge, "clients": clients, "seconds": round(elapsed, 3), "scale": args.scale,
        "request": "POST /v1/score, 1 item x 2 responses, unique texts",
        "requests": total, "ok": ok, "requests_per_s": total / elapsed, "judgments_per_s": 2 * ok / elapsed,
        "latency_ms": {name: 1000 * percentile(latencies, q) for name, q in
                       (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
        "status_counts": dict(sorted(outcomes.items())),
        "server": {"requests": served, "engine_runs": runs, "requests_per_engine_run": served / runs if runs else 0.0,
                   "merged_requests": stats["merged_requests"] - base["merged_requests"],
                   "model_calls": stats["model_calls"] - base["model_calls"]},
        "machine": machine(),
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
    }
    lat = result["latency_ms"]
    srv = result["server"]
    lines = [
        "# `trustjudge serve` load test (bench/serve_load.py)", "",
        (f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, "
        f"commit {result['machine']['commit']}. Server and clients on the same machine; "
        f"1-minute load average {load_before:.1f} before the run (other work on the machine lowers every number)."),
        "",
        (f"Judge `{args.judge}`, {clients} concurrent clients for {elapsed:.1f} s, each posting "
        f"`/v1/score` requests of 1 item x 2 responses ({args.scale}-point scale, texts unique per request)."), "",
        "| what | value |", "|---|---|",
        f"| requests | {total:,} ({ok:,} ok) |",
        f"| requests/s | {result['requests_per_s']:.1f} |",
        f"| judgments/s | {result['judgments_per_s']:.1f} |",
        (f"| latency p50 / p90 / p99 / max | {lat['p50']:.1f} / {lat['p90']:.1f} / {lat['p99']:.1f} / "
        f"{lat['max']:.1f} ms |"),
        f"| status counts | {', '.join(f'{k}: {v:,}' for k, v in result['status_counts'].items())} |",
        (f"| judge calls (engine runs) | {runs:,} for {served:,} requests "
        f"({srv['requests_per_engine_run']:.2f} requests per call) |"),
        f"| model calls | {srv['model_calls']:,} |", "",
        (f"Command: `.venv/bin/python bench/serve_load.py --judge {args.judge} --clients {clients} "
        f"--seconds {seconds:g}`"), "",
    ]
    markdown = "\n".join(lines)
    print(markdown)
    server_errors = {k: v for k, v in outcomes.items() if k.startswith(("5", "transport"))}
    if server_errors:
        print(f"FAIL: server errors {server_errors}; server log:\n{server_log[-4000:]}", file=sys.stderr)
    write_results(args.name, result, markdown)
    if server_errors or ok == 0:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
