"""Start llama-cpp-python's OpenAI-compatible server on loopback for the tests that need one.

:func:`smollm2_server` yields the base URL of a server running the bundled SmolLM2 GGUF (test modules
wrap it in a fixture); :func:`running_server` runs any GGUF. ``time_bound`` is an autouse fixture for
modules that import it. Without llama-cpp-python the
tests are skipped with the install line as the reason (CI does not install it yet: the build takes
15-20 minutes here and needs non-native flags on AMX CPUs; set ``TRUSTJUDGE_REQUIRE_LLAMA=1`` to make a
missing package fail instead).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from .conftest import time_limit

SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings", "httpx")
TEST_BOUND_S = 300
INSTALL = ("pip install 'trustjudge[llamacpp-server]' (llama-cpp-python compiles llama.cpp, 11-20 min; on CPUs with "
           "AMX set CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON', see docs/judges.md)")


def require_llama_cpp(*modules: str) -> None:
    """Skip (or, with ``TRUSTJUDGE_REQUIRE_LLAMA`` set, fail) unless every module is importable."""
    missing = [m for m in modules or ("llama_cpp",) if importlib.util.find_spec(m) is None]
    if not missing:
        return
    reason = f"{', '.join(missing)} not installed: {INSTALL}"
    if os.environ.get("TRUSTJUDGE_REQUIRE_LLAMA"):
        pytest.fail(f"TRUSTJUDGE_REQUIRE_LLAMA is set but {reason}", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_server(model: Path, *, alias: str = "smollm2", n_ctx: int = 2048, ready_s: float = 120.0,
                   n_threads: int | None = None) -> Iterator[str]:
    """Run ``python -m llama_cpp.server`` on a free loopback port; yield its base URL, then stop it.

    ``--logits_all true`` keeps every position's logits, which echoed prompt log-probabilities need;
    ``--type_k 0 --type_v 0`` (a float32 KV cache), ``--flash_attn true`` and ``--n_ubatch 32`` are the
    in-process ``llamacpp/`` backend's numerics settings: with them the results are independent of how
    the server batches and reuses cached prefixes, and equal to the in-process judge's.
    """
    import httpx

    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", alias,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--logits_all", "true",
           "--type_k", "0", "--type_v", "0", "--flash_attn", "true", "--n_ubatch", "32", "--verbose", "false"]
    # The batch default (every core) spins OpenMP barriers: on a busy machine that is seconds per request.
    threads = str(n_threads or max(1, (os.cpu_count() or 2) // 2))
    cmd += ["--n_threads", threads, "--n_threads_batch", threads]
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile("w+", prefix="llama-server-", suffix=".log") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + ready_s
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}:\n{log.read()[-3000:]}")
                try:
                    if httpx.get(url + "/v1/models", timeout=2.0).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"llama_cpp.server not ready after {ready_s:.0f} s:\n{log.read()[-3000:]}")
                time.sleep(0.25)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


@contextmanager
def smollm2_server() -> Iterator[str]:
    """Check the prerequisites, then run a server with the bundled SmolLM2 judge; yield its base URL."""
    require_llama_cpp(*SERVER_MODULES)
    from trustjudge.backends._models import smollm2_gguf

    with running_server(smollm2_gguf()) as url:
        yield url


@pytest.fixture(autouse=True)
def time_bound() -> Iterator[None]:
    """Fail a test that runs longer than ``TEST_BOUND_S`` instead of hanging the suite (autouse where imported)."""
    with time_limit(TEST_BOUND_S):
        yield
