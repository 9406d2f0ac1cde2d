"""Backend faults: a fault-injecting proxy in front of a real llama.cpp server on loopback.

At a 20% fault rate (HTTP 500, 429 with Retry-After, timeouts, truncated JSON, missing logprobs,
dropped connections) an audit run completes; every judgment is either scored with exactly the
numbers of a fault-free run or recorded as unscored with its reason; the audit counts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trustjudge import Judge, items_from_dicts

from ._fault_proxy import FAULTS, FaultProxy
from ._llama_server import smollm2_server, time_bound  # noqa: F401 - time_bound: autouse

QUESTIONS = [
    ("What is the boiling point of water at sea level?",
     ["100 degrees Celsius.", "About 50 degrees.", "It depends on the kettle."]),
    ("Name a prime number larger than 10.", ["11", "12 is prime.", "POISON 13"]),
    ("Translate 'gato' from Spanish to English.", ["cat", "dog", "The word means cat."]),
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with smollm2_server() as url:
        yield url


def items() -> list:  # type: ignore[type-arg]
    return items_from_dicts([{"id": f"q{i}", "question": q, "responses": [{"id": f"r{k}", "text": t}
                                                                       for k, t in enumerate(rs)]}
                             for i, (q, rs) in enumerate(QUESTIONS)])


def audit(url: str, store: Path, **options: object):  # type: ignore[no-untyped-def]
    # top_k labels: llama-cpp-python's server computes echoed prompt log-probabilities in Python over the
    # whole vocabulary (~10 s per 300-token prompt here), too slow for ~200 requests; the exact path's
    # handling of the same faults is tested against a scripted server in test_backend_openai.py.
    judge = Judge(f"llamacpp-server/smollm2@{url}?timeout=3&labels=top_k", store=store,
                  **options)  # type: ignore[arg-type]
    try:
        return judge.audit(items(), scales=(5,), bootstrap=0)
    finally:
        judge.close()


@pytest.mark.model
def test_twenty_percent_faults_lose_nothing_and_invent_nothing(upstream: str, tmp_path: Path) -> None:
    clean = audit(upstream, tmp_path / "clean.sqlite")
    assert not clean.report.unscored_scores[5] and not clean.report.unscored_compare
    proxy = FaultProxy(upstream, rate=0.2, seed=3, hang_s=4.0, poison="POISON")
    with proxy as url:
        faulty = audit(url, tmp_path / "faulty.sqlite", retry_base_s=0.05)
    assert set(proxy.injected) >= set(FAULTS), proxy.injected  # every kind of fault happened
    assert sum(proxy.injected.values()) >= 20

    # Pointwise: the poisoned response is unscored with its reason; every other score is the clean one.
    for want, got in zip(clean.score_records[5], faulty.score_records[5], strict=True):
        assert (want["item_id"], want["response_id"]) == (got["item_id"], got["response_id"])
        if got["response_id"] == "r2" and got["item_id"] == "q1":
            assert got["unscored"] == "backend_error" and all(v is None for v in got["scores"].values())
            continue
        assert got["unscored"] is None
        for method, value in want["scores"].items():
            assert got["scores"][method] == pytest.approx(value, abs=1e-5), (got["item_id"], method)
    # Pairwise: both pairs with the poisoned response are unscored; every other verdict is the clean one.
    for want, got in zip(clean.compare_records, faulty.compare_records, strict=True):
        poisoned = got["item_id"] == "q1" and "r2" in (got["first_id"], got["second_id"])
        assert (got["unscored"] == "backend_error") == poisoned
        if not poisoned:
            assert got["verdicts"] == want["verdicts"]
            for key, value in want["probabilities"].items():
                assert got["probabilities"][key] == pytest.approx(value, abs=1e-5)
    # The audit reports the counts.
    assert dict(faulty.report.unscored_scores[5]) == {"backend_error": 1}
    assert dict(faulty.report.unscored_compare) == {"backend_error": 2}
    rows = {(r[0], r[1], r[2]): r[3] for r in faulty.report.rows()}
    assert rows[("unscored", "score 5pt", "backend_error")] == 1
    assert rows[("unscored", "compare", "backend_error")] == 2
