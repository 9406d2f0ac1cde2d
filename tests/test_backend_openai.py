"""The OpenAI-compatible HTTP backend.

Unit tests run against a scripted fake server (``httpx.MockTransport``): error mapping, capability
detection, the top-k fallback. The tests marked ``model`` run against a real llama-cpp-python server
started on loopback (``tests/_llama_server.py``) and compare it with the in-process llama.cpp backend.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from trustjudge import Judge, items_from_dicts
from trustjudge.backends import GenerateRequest, LabelRequest, get_backend
from trustjudge.backends._openai import PRESETS, OpenAICompatibleBackend, split_name
from trustjudge.errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    PrerequisiteError,
    TransientBackendError,
)
from trustjudge.modes._prompts import SCORE_MARKER, SYSTEM, VERDICT_MARKER

from ._llama_server import require_llama_cpp, smollm2_server, time_bound  # noqa: F401 - time_bound: autouse


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """The base URL of a llama-cpp-python server running the bundled SmolLM2 judge."""
    with smollm2_server() as url:
        yield url


# -- a scripted fake server ------------------------------------------------------------------------
# A context-free toy model whose tokens are single characters: log p(c) is the same at every position.
TABLE = {"3": -0.4, "2": -1.5, "1": -2.2, "]": -0.05, "A": -0.7, "B": -1.1, "x": -3.0}
OTHER = -12.0


def char_lp(c: str) -> float:
    return TABLE.get(c, OTHER)


def top(k: int) -> dict[str, float]:
    return dict(sorted(TABLE.items(), key=lambda kv: -kv[1])[:k])


class FakeServer:
    """An OpenAI-compatible completions endpoint over the toy model, with switchable defects."""

    def __init__(self, *, echo: str = "ok", lists: bool = True, tokenize: bool = True,
                 fail: Callable[[httpx.Request], httpx.Response | None] | None = None) -> None:
        self.echo = echo  # "ok", "reject" (HTTP 400), "shifted" (llama-cpp-python's no-BOS bug)
        self.lists = lists
        self.tokenize = tokenize
        self.fail = fail
        self.calls: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.fail is not None:
            forced = self.fail(request)
            if forced is not None:
                return forced
        path = request.url.path
        body = json.loads(request.content) if request.content else {}
        self.calls.append({"path": path, **body})
        if path == "/tokenize":
            if not self.tokenize:
                return httpx.Response(404, json={"detail": "Not Found"})
            return httpx.Response(200, json={"tokens": list(range(len(body["prompt"]))), "count": len(body["prompt"])})
        if path in ("/extras/tokenize", "/props"):
            return httpx.Response(404, json={"detail": "Not Found"})
        if path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "toy", "max_model_len": 1234}]})
        if path != "/v1/completions":
            return httpx.Response(404, json={"detail": "Not Found"})
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        if len(prompts) > 1 and not self.lists:
            return httpx.Response(500, json={"error": {"message": "AssertionError"}})
        if body.get("echo") and self.echo == "reject":
            return httpx.Response(400, json={"error": {"message": "echo is not supported"}})
        choices = [self._choice(i, p, body) for i, p in enumerate(prompts)]
        usage = {"prompt_tokens": sum(len(p) for p in prompts), "completion_tokens": len(prompts)}
        return httpx.Response(200, json={"choices": choices, "usage": usage})

    def _choice(self, index: int, prompt: str, body: dict[str, Any]) -> dict[str, Any]:
        k = int(body.get("logprobs") or 0)
        gen = max(TABLE, key=lambda c: TABLE[c])
        stop = body.get("stop") or []
        if body.get("max_tokens", 16) > 1:  # a "generation": a fixed text cut at the stop string
            text = "Fine answer. Score: 4"
            finish = "stop" if any(s in text for s in stop) else "length"
            return {"index": index, "text": text, "finish_reason": finish,
                    "logprobs": {"tokens": list(text), "token_logprobs": [-0.5] * len(text),
                                 "top_logprobs": None, "text_offset": list(range(len(text)))}}
        chars = [*list(prompt), gen] if body.get("echo") else [gen]
        lps: list[float | None] = [char_lp(c) for c in chars]
        if body.get("echo"):
            lps[0] = None
            if self.echo == "shifted":  # each entry holds the next position's probability; last entry lost
                lps = [None] + [char_lp(c) for c in chars[2:]]
                chars = chars[:-1]
        text = (prompt if body.get("echo") else "") + gen
        return {"index": index, "text": text, "finish_reason": "length",
                "logprobs": {"tokens": chars, "token_logprobs": lps,
                             "top_logprobs": [top(k) for _ in chars], "text_offset": list(range(len(chars)))}}


def fake_backend(server: Callable[[httpx.Request], httpx.Response], **kwargs: Any) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend("toy", "http://fake:1", transport=httpx.MockTransport(server), **kwargs)


LABELS = ("1]", "2]", "3]", "4]", "5]")


def test_exact_path_is_detected_and_sums_label_tokens() -> None:
    server = FakeServer()
    backend = fake_backend(server)
    res = backend.label_logprobs([LabelRequest("Rate it. Score: [", LABELS)])[0]
    assert backend.capabilities.exact is True
    assert backend.capabilities.prompt_lists is True
    assert res.method == "exact"
    for label, lp in zip(LABELS, res.logprobs):
        assert lp == pytest.approx(char_lp(label[0]) + char_lp("]"))
    # All five labels went in one request (the server accepts a list of prompts).
    echo_calls = [c for c in server.calls if c.get("echo") and isinstance(c["prompt"], list) and len(c["prompt"]) == 5]
    assert len(echo_calls) == 1
    assert backend.prompt_tokens > 0 and backend.requests >= 3


def test_single_prompt_servers_get_one_request_per_label() -> None:
    server = FakeServer(lists=False)
    backend = fake_backend(server)
    res = backend.label_logprobs([LabelRequest("P: [", LABELS)])[0]
    assert res.method == "exact" and backend.capabilities.prompt_lists is False
    assert sum(1 for c in server.calls if c.get("echo") and isinstance(c["prompt"], str)) >= len(LABELS)


def test_a_500_on_the_list_probe_is_no_at_once_and_remembered_for_the_server() -> None:
    from trustjudge._retry import RetryPolicy

    server = FakeServer(lists=False)
    transport = httpx.MockTransport(server)
    waits: list[float] = []
    first = OpenAICompatibleBackend("toy", "http://fake:1", transport=transport)
    first.use_retry_policy(RetryPolicy(max_retries=3, base_s=0.5, sleep=waits.append))
    first.label_logprobs([LabelRequest("P: [", LABELS)])
    lists = [c for c in server.calls if isinstance(c.get("prompt"), list)]
    # Before: the 500 (llama-cpp-python asserts one prompt) was retried through the whole budget.
    assert len(lists) == 1 and waits == [] and first.capabilities.prompt_lists is False
    second = OpenAICompatibleBackend("toy", "http://fake:1", transport=transport)
    second.label_logprobs([LabelRequest("Q: [", LABELS)])
    assert len([c for c in server.calls if isinstance(c.get("prompt"), list)]) == 1  # not asked again
    assert second.capabilities.prompt_lists is False


def test_llamacpp_server_prompts_use_the_chat_template_from_props() -> None:
    template = ("{% for m in messages %}<<{{ m['role'] }}>>{{ m['content'] }}{% endfor %}"
                "{% if add_generation_prompt %}<<assistant>>{% endif %}")

    def props(request: httpx.Request) -> httpx.Response | None:
        if request.url.path == "/props":
            return httpx.Response(200, json={"chat_template": template, "default_generation_settings": {"n_ctx": 512}})
        return None

    transport = httpx.MockTransport(FakeServer(fail=props))
    served = OpenAICompatibleBackend("toy", "http://fake:1", preset="llamacpp-server", transport=transport)
    assert served.format_prompt("S", "U", "Score: [") == "<<system>>S<<user>>U<<assistant>>Score: ["
    assert ":toy:tpl-" in served.fingerprint and served.concurrency == 1
    named = OpenAICompatibleBackend("toy", "http://fake:1", preset="llamacpp-server", chat_template="plain",
                                    transport=transport)
    assert named.format_prompt("S", "U", "Score: [") == "S\n\nU\n\nScore: ["  # ?template= wins
    other = OpenAICompatibleBackend("toy", "http://fake:1", preset="vllm", transport=transport)
    assert other.format_prompt("S", "U", "Score: [") == "S\n\nU\n\nScore: ["  # /props is llama.cpp's


@pytest.mark.parametrize("defect", ["reject", "shifted"])
def test_top_k_fallback_when_echo_is_unsupported_or_misaligned(defect: str, caplog: Any) -> None:
    backend = fake_backend(FakeServer(echo=defect), top_k=5)
    with caplog.at_level("WARNING"):
        res = backend.label_logprobs([LabelRequest("Rate it. Score: [", LABELS)])[0]
        backend.label_logprobs([LabelRequest("Again. Score: [", LABELS)])
    assert backend.capabilities.exact is False
    assert res.method == "top_k"
    # Top-5 of the toy model: ], 3, A, B, 2: labels 1], 4], 5] are outside it.
    assert res.logprobs[1] == pytest.approx(char_lp("2") + char_lp("]"))
    assert res.logprobs[2] == pytest.approx(char_lp("3") + char_lp("]"))
    assert res.logprobs[0] == -math.inf and res.logprobs[3] == -math.inf and res.logprobs[4] == -math.inf
    warnings = [r for r in caplog.records if "top-5" in r.getMessage()]
    assert len(warnings) == 1 and "probability 0" in warnings[0].getMessage()


def test_labels_exact_fails_loudly_without_echo() -> None:
    backend = fake_backend(FakeServer(echo="reject"), labels="exact")
    with pytest.raises(BackendError, match="cannot score labels exactly"):
        backend.label_logprobs([LabelRequest("P: [", LABELS)])


def _respond(status: int, body: Any = None, headers: dict[str, str] | None = None,
             raw: bytes | None = None) -> Callable[[httpx.Request], httpx.Response]:
    def fail(request: httpx.Request) -> httpx.Response:
        if raw is not None:
            return httpx.Response(status, content=raw, headers=headers)
        return httpx.Response(status, json=body, headers=headers)
    return fail


def _gen(backend: OpenAICompatibleBackend) -> Any:
    return backend.generate([GenerateRequest("Judge this.", ("Score:",), 64)])


def test_429_is_transient_with_retry_after() -> None:
    backend = fake_backend(FakeServer(fail=_respond(429, {"error": {"message": "slow down"}}, {"Retry-After": "7"})))
    with pytest.raises(TransientBackendError) as info:
        _gen(backend)
    assert info.value.retry_after == 7.0
    assert "429" in str(info.value) and "slow down" in str(info.value)


def test_500_is_transient() -> None:
    backend = fake_backend(FakeServer(fail=_respond(500, {"error": "boom"})))
    with pytest.raises(TransientBackendError, match="500"):
        _gen(backend)


def test_400_is_a_backend_error_with_the_servers_message() -> None:
    backend = fake_backend(FakeServer(fail=_respond(400, {"error": {"message": "max_tokens is too large"}})))
    with pytest.raises(BackendError) as info:
        _gen(backend)
    assert not isinstance(info.value, TransientBackendError)
    assert "HTTP 400" in str(info.value) and "max_tokens is too large" in str(info.value)


def test_malformed_json_is_transient() -> None:
    backend = fake_backend(FakeServer(fail=_respond(200, raw=b"{not json")))
    with pytest.raises(TransientBackendError, match="malformed JSON"):
        _gen(backend)


def test_timeouts_are_transient_and_connection_refused_stops_the_run() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(TransientBackendError):
        _gen(fake_backend(FakeServer(fail=slow)))
    # Nothing listens: no retry can help, so the run stops at once with the cause (issue 15, F12).
    with pytest.raises(BackendUnavailable, match="cannot connect"):
        _gen(fake_backend(FakeServer(fail=refuse)))


def test_engine_retries_a_429_then_scores(tmp_path: Path) -> None:
    state = {"n": 0}

    def flaky(request: httpx.Request) -> httpx.Response | None:
        if request.url.path != "/v1/completions":
            return None
        state["n"] += 1
        if state["n"] <= 2:
            return httpx.Response(429, json={"error": "busy"}, headers={"Retry-After": "0"})
        return None

    backend = fake_backend(FakeServer(fail=flaky))
    items = items_from_dicts([{"id": "q", "question": "Q?", "responses": [{"id": "a", "text": "A."}]}])
    judge = Judge(backend, store=tmp_path / "s.sqlite", scale=5)
    record = next(iter(judge.score(items)))
    assert record.unscored is None and record.scores["expected"] is not None
    assert state["n"] > 2


def test_faults_in_the_probe_and_exact_path_are_retried_not_taken_for_no_echo() -> None:
    """Every other completions request fails (500, no logprobs, truncated JSON, 429 in turn): the probe
    still finds the exact path and every label is read exactly, each request retried by the policy."""
    from trustjudge._retry import RetryPolicy

    faults = iter([_respond(500, {"error": "boom"}), None, _respond(200, {"choices": [{"text": "x"}]}), None,
                   _respond(200, raw=b'{"choices": [{"te'), None, _respond(429, {}, {"Retry-After": "0"})] * 40)

    def fail(request: httpx.Request) -> httpx.Response | None:
        if request.url.path != "/v1/completions":
            return None
        fault = next(faults)
        return fault(request) if fault is not None else None

    server = FakeServer(lists=False, fail=fail)
    backend = fake_backend(server)
    policy = RetryPolicy(max_retries=3, base_s=0.0, sleep=lambda s: None)
    assert backend.use_retry_policy(policy)
    res = backend.label_logprobs([LabelRequest("Rate it. Score: [", LABELS)])[0]
    assert backend.capabilities.exact is True and res.method == "exact"
    for label, lp in zip(LABELS, res.logprobs):
        assert lp == pytest.approx(char_lp(label[0]) + char_lp("]"))
    assert policy.retries >= 6


def test_a_connection_reset_on_reuse_is_retried_once_at_once() -> None:
    """A keep-alive connection the server closed as it was reused: one immediate retry, no policy needed."""
    resets = {"n": 0}

    def reset_once(request: httpx.Request) -> httpx.Response | None:
        if resets["n"] == 0:
            resets["n"] += 1
            raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request)
        return None

    backend = fake_backend(FakeServer(fail=reset_once))
    assert _gen(backend)[0].text and resets["n"] == 1


def test_a_fault_that_never_stops_fails_after_the_policys_retries() -> None:
    from trustjudge._retry import RetryPolicy

    waits: list[float] = []
    backend = fake_backend(FakeServer(fail=_respond(503, {"error": "down"})))
    backend.use_retry_policy(RetryPolicy(max_retries=3, base_s=0.5, sleep=waits.append))
    with pytest.raises(TransientBackendError, match="503"):
        _gen(backend)
    assert len(waits) == 3 and waits[0] < waits[1] < waits[2]  # exponential backoff with bounded jitter
    assert all(0.5 * 2**i <= w <= 0.5 * 2**i * 1.25 for i, w in enumerate(waits))


def test_generate_parses_text_logprobs_and_finish_reason() -> None:
    backend = fake_backend(FakeServer())
    gen = _gen(backend)[0]
    assert gen.text == "Fine answer. "  # cut before the stop string even if the server kept it
    assert gen.finish_reason == "stop" and len(gen.token_logprobs) == len("Fine answer. Score: 4")
    long = backend.generate([GenerateRequest("Judge this.", ("NEVER",), 64)])[0]
    assert long.finish_reason == "length"
    assert OpenAICompatibleBackend._finish_reason({"finish_reason": "stop", "stop_reason": None}) == "eos"
    assert OpenAICompatibleBackend._finish_reason({"finish_reason": "stop", "stop_reason": "Score:"}) == "stop"


def test_token_counts_and_context_length_are_detected() -> None:
    backend = fake_backend(FakeServer())
    assert backend.count_tokens("hello") == 5 and not backend.token_counts_estimated
    assert backend.context_length == 1234
    bare = fake_backend(FakeServer(tokenize=False), context_length=999)
    assert bare.count_tokens("x" * 40) == 10 and bare.token_counts_estimated
    assert bare.max_label_tokens(["100]"]) == 4
    assert bare.context_length == 999


def test_names_presets_and_fingerprint() -> None:
    assert split_name("Qwen/Qwen2.5-7B@http://gpu:8000?ctx=8192", PRESETS["vllm"]) == (
        "Qwen/Qwen2.5-7B", "http://gpu:8000", {"ctx": "8192"})
    assert split_name("smol", PRESETS["vllm"]) == ("smol", "http://127.0.0.1:8000", {})
    # With the preset's own server the options follow the model, and stay out of the model's name.
    assert split_name("smol?api=chat&ctx=512", PRESETS["vllm"]) == (
        "smol", "http://127.0.0.1:8000", {"api": "chat", "ctx": "512"})
    with pytest.raises(ConfigError, match="needs a model"):
        split_name("?api=chat", PRESETS["vllm"])
    with pytest.raises(ConfigError):
        split_name("smol", PRESETS["http"])
    # Nothing listens on these URLs, so the API (detected from the server otherwise) is named.
    backend = get_backend("vllm/m@http://127.0.0.1:9/v1?ctx=100&template=chatml&concurrency=2&api=completions")
    assert isinstance(backend, OpenAICompatibleBackend)
    assert backend.base_url == "http://127.0.0.1:9/v1" and backend.context_length == 100
    assert backend.fingerprint.startswith("openai:http://127.0.0.1:9/v1:m:chatml")
    assert backend.format_prompt("S", "U", "Score: [") == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nScore: [")
    assert get_backend("http/m@http://h:1?api=completions").format_prompt("S", "U", "V: [") == "S\n\nU\n\nV: ["
    with pytest.raises(ConfigError, match="unknown judge option"):
        get_backend("vllm/m@http://h:1?bogus=1")


def test_openai_preset_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_backend("openai/gpt-3.5-turbo-instruct")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    backend = get_backend("openai/gpt-3.5-turbo-instruct")
    assert isinstance(backend, OpenAICompatibleBackend)
    assert backend.base_url == "https://api.openai.com/v1" and backend.top_k == 5


def test_missing_httpx_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)  # makes `import httpx` raise ImportError
    with pytest.raises(PrerequisiteError, match=r"trustjudge\[openai\]"):
        OpenAICompatibleBackend("m", "http://127.0.0.1:9")


# -- against a real llama-cpp-python server -------------------------------------------------------
def _score_prompt(backend: Any, text: str) -> str:
    user = f"Rate the answer from 1 to 10.\nQuestion: What is 2 + 2?\nAnswer: {text}"
    return str(backend.format_prompt(SYSTEM, user, SCORE_MARKER))


@pytest.fixture(scope="module")
def in_process() -> Iterator[Any]:
    require_llama_cpp()
    from trustjudge.backends._llamacpp import LlamaCppBackend
    from trustjudge.backends._models import ModelSpec, smollm2_gguf

    backend = LlamaCppBackend(ModelSpec("smollm2-135m", smollm2_gguf(), "chat"), n_ctx=2048)
    yield backend
    backend.close()


@pytest.mark.model
def test_server_exact_labels_match_in_process(llama_server: str, in_process: Any, caplog: Any) -> None:
    remote = get_backend(f"llamacpp-server/smollm2@{llama_server}")
    labels = tuple(f"{i}]" for i in range(1, 11))
    prompts = [_score_prompt(in_process, t) for t in ("It is four.", "5")]
    with caplog.at_level(logging.WARNING, logger="trustjudge.backends.openai"):
        got = remote.label_logprobs([LabelRequest(p, labels) for p in prompts])
    assert "exact labels from llama-cpp-python's server are slow" in caplog.text  # its cost said, once
    assert caplog.text.count("are slow") == 1
    assert remote.capabilities.exact is True, remote.capabilities.exact_reason
    assert all(r.method == "exact" for r in got)
    worst = 0.0
    for prompt, res in zip(prompts, got):
        in_process.reset_cache()
        want = in_process.label_logprobs([LabelRequest(prompt, labels)])[0].logprobs
        worst = max(worst, *(abs(math.exp(a) - math.exp(b)) for a, b in zip(res.logprobs, want)))
    # Measured 2e-8: the fixture starts the server with a float32 KV cache like the in-process backend,
    # and then llama.cpp gives the same logits however prompt + label are split into batches (the
    # server reuses the cached prompt prefix of the previous request). With the float16 default the
    # two differed by up to 0.008.
    assert worst < 1e-3, worst


@pytest.mark.model
def test_server_pairwise_verdicts_match_in_process(llama_server: str, in_process: Any) -> None:
    remote = get_backend(f"llamacpp-server/smollm2@{llama_server}")
    labels = ("A]", "B]", "C]")
    pairs = [("4", "5"), ("It is four.", "22"), ("Four.", "I do not know.")]
    for a, b in pairs:
        verdicts = []
        for backend in (remote, in_process):
            user = f"Which answer is better?\nQuestion: What is 2 + 2?\nAnswer A: {a}\nAnswer B: {b}"
            prompt = in_process.format_prompt(SYSTEM, user, VERDICT_MARKER)
            lps = backend.label_logprobs([LabelRequest(prompt, labels)])[0].logprobs
            verdicts.append(max(range(3), key=lambda i: lps[i]))
        assert verdicts[0] == verdicts[1], (a, b)


@pytest.mark.model
def test_judge_end_to_end_through_the_server(llama_server: str, tmp_path: Path) -> None:
    items = items_from_dicts([
        {"id": "q1", "question": "What is 2 + 2?",
         "responses": [{"id": "a", "text": "4"}, {"id": "b", "text": "5"}]},
        {"id": "q2", "question": "Name a primary colour.", "responses": [{"id": "a", "text": "Red."}]},
    ])
    name = f"llamacpp-server/smollm2@{llama_server}?template=chatml"
    store = tmp_path / "judgments.sqlite"
    # A short template: llama-cpp-python's server formats echoed log-probabilities in Python at about
    # 25 ms per prompt token, so the default template's prompts would take ~4 s per label.
    template = tmp_path / "short.txt"
    template.write_text("Question: ${question}\nAnswer: ${response}\n${task}\n", encoding="utf-8")
    first = Judge(name, store=store, scale=5, pointwise_template=template)
    records = list(first.score(items))
    assert len(records) == 3 and all(r.unscored is None for r in records)
    assert first.stats.model_calls == 3
    second = Judge(name, store=store, scale=5, pointwise_template=template)
    again = list(second.score(items))
    assert second.stats.model_calls == 0
    assert [r.scores for r in again] == [r.scores for r in records]


def test_a_new_fake_server_never_inherits_what_was_found_of_a_gone_one() -> None:
    """Facts were keyed by ``id(transport)``: a transport made after another was freed often got its address, and
    with it the gone server's facts (a single-prompt server then taken for one that takes lists: a flaky test)."""
    import gc

    from trustjudge.backends._openai_server import server_facts

    inherited = 0
    for _ in range(50):
        transport = httpx.MockTransport(FakeServer(lists=False))
        facts = server_facts("http://fake:1", "toy", transport)
        inherited += bool(facts)
        facts["lists"] = True
        del transport, facts
        gc.collect()
    assert inherited == 0
    shared = httpx.MockTransport(FakeServer())
    server_facts("http://fake:1", "toy", shared)["lists"] = False
    assert server_facts("http://fake:1", "toy", shared) == {"lists": False}  # one transport: one server


@pytest.mark.parametrize(("preset", "labels", "warned"), [("llamacpp-server", "auto", True),
                                                          ("llamacpp-server", "exact", False),
                                                          ("vllm", "auto", False)])
def test_exact_labels_on_a_llamacpp_server_say_their_cost_once(preset: str, labels: str, warned: bool,
                                                               caplog: Any) -> None:
    """Exact labels detected under llamacpp-server/ come from llama-cpp-python's server (the C++ server has no
    echo), whose exact path measured 57x the in-process judge: the run says so once, naming labels=top_k; asked
    for exact on purpose, or on another server, it says nothing."""
    backend = OpenAICompatibleBackend("toy", "http://fake:1", preset=preset, labels=labels,
                                      transport=httpx.MockTransport(FakeServer()))
    with caplog.at_level(logging.WARNING, logger="trustjudge.backends.openai"):
        for _ in range(2):
            backend.label_logprobs([LabelRequest("P: [", LABELS)])
    assert backend.capabilities.exact is True
    assert caplog.text.count("labels=top_k to the judge's options") == (1 if warned else 0), caplog.text
