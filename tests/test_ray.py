"""RayBackend: judging on a Ray actor pool gives exactly the records and store rows of a local run.

One local Ray instance (2 CPUs, no dashboard) serves the whole module. Every Ray Data job starts
fresh actor processes (several seconds on a busy machine), so each test runs as few jobs as it can.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from trustjudge import Judge, items_from_dicts
from trustjudge.backends import LabelRequest, MockBackend, register_mock
from trustjudge.errors import BackendError, BackendStopped, TransientBackendError

try:
    import ray
    import ray.data
except ImportError:
    if os.environ.get("CI"):
        pytest.fail("ray[data] is not installed but CI is set: install trustjudge[test]", pytrace=False)
    pytest.skip("ray[data] is not installed (pip install 'trustjudge[ray]')", allow_module_level=True)

from trustjudge.backends._ray import RayBackend, _JudgeActor, _load_error, ray_backend

from .conftest import time_limit

pytestmark = pytest.mark.slow  # subprocesses, servers or Ray: opt-in locally (scripts/test --quick skips)
TEST_LIMIT_S = 100
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    if ray.is_initialized():  # pragma: no cover - another module left Ray running
        ray.shutdown()

    def _register_worker_mocks() -> None:
        """Runs in every Ray worker of this process's job: registers ``mock/ray-fail`` there.

        A nested function, so cloudpickle ships it by value: workers need not import the tests package.
        """
        from trustjudge.backends import MockBackend, register_backend, register_mock
        from trustjudge.backends._mock import hashed_probs
        from trustjudge.errors import BackendError, TransientBackendError

        def script(request: Any) -> Any:
            if request.prompt.startswith("fail"):
                raise BackendError(f"cannot judge {request.prompt!r}")
            if request.prompt.startswith("transient"):
                raise TransientBackendError("overloaded", retry_after=0.25)
            if request.prompt.startswith("bug"):
                raise ValueError("a bug in the judge")
            return hashed_probs(request)

        register_mock("ray-fail", MockBackend("ray-fail", script=script, keep_history=False))

        class Stop(BaseException):
            """A plug-in judge's own BaseException."""

        def stopping(rest: str) -> Any:
            """``raystop/stop`` raises Stop, ``raystop/exit`` calls sys.exit(3), on a prompt holding BOOM."""
            import sys

            def judged(request: Any) -> Any:
                if "BOOM" in request.prompt:
                    if rest == "exit":
                        sys.exit(3)
                    raise Stop("enough")
                return hashed_probs(request)

            return MockBackend(f"raystop-{rest}", script=judged, keep_history=False)

        register_backend("raystop", stopping)

    _register_worker_mocks()  # the driver builds each judge too (fingerprints, prompt formats)
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                       runtime_env={"worker_process_setup_hook": _register_worker_mocks})
    try:
        yield str(cast(Any, context).address_info["gcs_address"])
    finally:
        ray.shutdown()
        from trustjudge.backends import _FACTORIES

        _FACTORIES.pop("raystop", None)
        register_mock("ray-fail", None)


@pytest.fixture(autouse=True)
def _time_limit() -> Iterator[None]:
    with time_limit(TEST_LIMIT_S):
        yield


def _items(n: int, responses: int = 3) -> list[Any]:
    return items_from_dicts(
        {"id": f"q{i}", "question": f"Question {i}: what is {i} + {i}?",
         "responses": [{"id": f"r{k}", "text": f"answer {i}.{k}" if k else ""} for k in range(responses)]}
        for i in range(n))


def _outputs(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT key, result FROM outputs ORDER BY key").fetchall()


def _count(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM outputs").fetchone()[0])


def test_mock_score_and_compare_equal_a_local_run(ray_address: str, tmp_path: Path) -> None:
    items = _items(4)  # 4 x 3 responses (one empty: unscored without a call), 3 pairs each
    backend = RayBackend("mock/hash", num_actors=2, batch_size=3)
    remote = Judge(backend, store=tmp_path / "ray.sqlite", batch_size=256)
    local = Judge("mock/hash", store=tmp_path / "local.sqlite")
    try:
        got = [r.to_dict() for r in remote.score(items)]
        want = [r.to_dict() for r in local.score(items)]
        assert got == want
        assert remote.stats.label_calls == 8 and [r["unscored"] for r in got].count("empty_response") == 4
        got_c = [r.to_dict() for r in remote.compare(items)]  # pairs with the empty response: no call
        assert got_c == [r.to_dict() for r in local.compare(items)]
        assert remote.stats.label_calls == 16 and len(got_c) == 12
        assert backend.fingerprint == local.backend.fingerprint
    finally:
        remote.close()
        local.close()
    assert ray.is_initialized()  # the backend did not start Ray, so it leaves it running
    assert _outputs(tmp_path / "ray.sqlite") == _outputs(tmp_path / "local.sqlite")
    assert _count(tmp_path / "ray.sqlite") == 16


def test_cot_generations_round_trip(ray_address: str, tmp_path: Path) -> None:
    items = _items(2)
    remote = Judge(RayBackend("mock/hash", batch_size=2), store=tmp_path / "ray.sqlite", protocol="cot",
                   batch_size=256)
    local = Judge("mock/hash", store=tmp_path / "local.sqlite", protocol="cot")
    try:
        assert [r.to_dict() for r in remote.score(items)] == [r.to_dict() for r in local.score(items)]
        assert remote.stats.generate_calls == 4
    finally:
        remote.close()
        local.close()
    assert _outputs(tmp_path / "ray.sqlite") == _outputs(tmp_path / "local.sqlite")


def test_backend_errors_come_back_as_the_same_exception(ray_address: str) -> None:
    backend = ray_backend("mock/ray-fail", None)
    labels = ("A]", "B]", "C]")
    ok = [LabelRequest(f"ok {i}", labels) for i in range(3)]
    with pytest.raises(BackendError) as failed:
        backend.label_logprobs([*ok, LabelRequest("fail me", labels)])
    assert type(failed.value) is BackendError and str(failed.value) == "cannot judge 'fail me'"
    with pytest.raises(Exception, match="a bug in the judge") as bug:
        backend.label_logprobs([LabelRequest("bug", labels)])
    assert not isinstance(bug.value, BackendError)
    backend.close()


@pytest.mark.parametrize(("how", "said"), [("stop", "raised Stop: enough"), ("exit", "called sys.exit(3)")])
def test_a_plugin_judge_that_stops_in_an_actor_stops_the_run_naming_it(ray_address: str, tmp_path: Path,
                                                                       how: str, said: str) -> None:
    rows = [{"id": f"q{i}", "question": f"What is {i} + {i}?",
             "responses": [{"id": "a", "text": "BOOM" if i == 2 else str(2 * i)}]} for i in range(4)]
    store = tmp_path / "s.sqlite"
    judge = Judge(RayBackend(f"raystop/{how}", num_actors=1, batch_size=1), store=store, batch_size=1)
    try:
        with pytest.raises(BackendStopped) as stopped:
            list(judge.score(items_from_dicts(rows)))  # records come as they are judged
    finally:
        judge.close()
    # before: Ray ended the actor's worker (sys.exit) or raised the plug-in's own exception in the driver
    message = str(stopped.value)
    assert f"backend mock:raystop-{how} {said} while judging item 'q2' (it comes from backend 'raystop' " \
           "registered with register_backend" in message, message
    assert 1 <= _count(store) <= 3  # what was judged before the stop is kept


def test_transient_errors_keep_their_type_and_retry_after() -> None:
    # The actor's side of the boundary, run in-process: what it returns for a transient error is
    # turned back into the same exception, retry_after included.
    def script(request: LabelRequest) -> list[float]:
        raise TransientBackendError("overloaded", retry_after=0.25)

    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else 0
    register_mock("ray-transient", MockBackend("ray-transient", script=script))
    try:
        actor = _JudgeActor("mock/ray-transient", threads=1)
        payload = json.dumps({"kind": "labels", "requests": [{"prompt": "x", "labels": ["A]"]}]})
        out = json.loads(actor({"block": [0], "payload": [payload]})["output"][0])
    finally:
        register_mock("ray-transient", None)
        if torch is not None:  # the actor set this process's torch threads
            torch.set_num_threads(threads)
    error = _load_error(out["error"])
    assert type(error) is TransientBackendError and error.retry_after == 0.25 and str(error) == "overloaded"
    # Without the pickled exception (e.g. unpicklable attributes) the class and fields still survive.
    fallback = _load_error({**out["error"], "pickle": None})
    assert type(fallback) is TransientBackendError and fallback.retry_after == 0.25


_KILLED_RUN = """
import sys
from trustjudge import Judge, items_from_dicts
from trustjudge.backends._ray import RayBackend
items = items_from_dicts(__ITEMS__)
judge = Judge(RayBackend("mock/hash", address=sys.argv[1], num_actors=2, batch_size=3),
              store=sys.argv[2], batch_size=6)
for record in judge.score(items):
    pass
"""


def test_sigkilled_ray_run_resumes_from_the_store(ray_address: str, tmp_path: Path) -> None:
    # A real kill: a driver judging on the shared Ray instance is SIGKILLed once its first batches
    # are stored; the rerun computes only what the store lacks and ends with a local run's records.
    rows = [{"id": f"q{i}", "question": f"Question {i}?",
             "responses": [{"id": str(k), "text": f"answer {i}.{k}"} for k in range(3)]} for i in range(8)]
    store = tmp_path / "ray.sqlite"
    code = _KILLED_RUN.replace("__ITEMS__", json.dumps(rows))
    proc = subprocess.Popen([sys.executable, "-c", code, ray_address, str(store)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        stored = 0
        while time.time() < deadline and proc.poll() is None:
            if store.exists():
                try:
                    stored = _count(store)
                except sqlite3.OperationalError:  # created but not migrated yet
                    stored = 0
                if stored >= 6:
                    break
            time.sleep(0.05)
        assert proc.poll() is None, "the Ray run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    stored = _count(store)
    assert 6 <= stored < 24 and stored % 6 == 0  # whole engine batches only
    items = items_from_dicts(rows)
    rerun = Judge(RayBackend("mock/hash"), store=store, batch_size=256)
    local = Judge("mock/hash", store=tmp_path / "local.sqlite")
    try:
        got = [r.to_dict() for r in rerun.score(items)]
        assert rerun.stats.from_store == stored and rerun.stats.label_calls == 24 - stored
        assert got == [r.to_dict() for r in local.score(items)]
    finally:
        rerun.close()
        local.close()
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert _outputs(store) == _outputs(tmp_path / "local.sqlite")


@pytest.mark.model
def test_bundled_judge_on_ray_equals_local(ray_address: str, tmp_path: Path) -> None:
    import torch

    items = items_from_dicts([
        {"id": "q1", "question": "What is 2 + 2?",
         "responses": [{"id": "a", "text": "4"}, {"id": "b", "text": "5"}, {"id": "c", "text": "It is four."}]},
        {"id": "q2", "question": "Name a primary colour.",
         "responses": [{"id": "a", "text": "Red."}, {"id": "b", "text": "Grass."},
                       {"id": "c", "text": "Blue is one."}]},
    ])
    # fp32 sums on the CPU depend on the torch thread count and on which cached KV prefix a prompt
    # reuses (both move log-probabilities by ~1e-5). For bit-equal outputs the Ray run repeats the
    # local schedule: one block on one actor (1 thread), against a local run on 1 thread.
    remote = Judge(RayBackend("hf/smollm2-135m", num_actors=1, batch_size=8), store=tmp_path / "ray.sqlite",
                   batch_size=256)
    local = Judge("hf/smollm2-135m", store=tmp_path / "local.sqlite")
    threads = torch.get_num_threads()
    try:
        got = [r.to_dict() for r in remote.score(items)]
        torch.set_num_threads(1)
        want = [r.to_dict() for r in local.score(items)]
    finally:
        torch.set_num_threads(threads)
        remote.close()
        local.close()
    assert all(r["unscored"] is None for r in got)
    assert _outputs(tmp_path / "ray.sqlite") == _outputs(tmp_path / "local.sqlite")
    assert got == want


def test_missing_ray_is_a_prerequisite_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from trustjudge.errors import PrerequisiteError

    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    with pytest.raises(PrerequisiteError, match=r"pip install 'trustjudge\[ray\]'"):
        RayBackend("mock/hash")


def test_cli_ray_option_builds_a_ray_backend_with_whole_chunk_batches(tmp_path: Path) -> None:
    # Starting Ray from a CLI subprocess takes minutes on a loaded 2-core machine; the Ray path itself is
    # covered above, so this checks the wiring of `--ray [ADDRESS]` without starting a cluster.
    from trustjudge.backends._ray import RayBackend
    from trustjudge.cli import _make_judge

    j = _make_judge("mock/hash", tmp_path / "s.sqlite", "direct", 8, 0.0, 0, 64, 1e-3, ray_address="local")
    assert isinstance(j.backend, RayBackend) and j.backend.name == "mock/hash"
    assert j.engine.batch_size == 256
    j2 = _make_judge("mock/hash", tmp_path / "s.sqlite", "direct", 8, 0.0, 0, 64, 1e-3)
    assert not isinstance(j2.backend, RayBackend)
