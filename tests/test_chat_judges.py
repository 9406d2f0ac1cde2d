"""Chat judges: the OpenAI-compatible backend judging through ``/v1/chat/completions``.

Unit tests check the message path and where a label is read in an answer. The ``slow`` tests run a chat-only
stand-in on loopback (``tests/_chat_server.py``: its completions endpoint answers 404 "This is a chat
model ...", as OpenAI's does for gpt-4o): detection with no option, ``?api=``, the store, ``cot``, every mode.
The stand-in is for control flow only; the ``model`` test at the end compares a real llama-cpp-python server's
chat endpoint with its completions endpoint on the same prompts, label by label.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trustjudge import MODES, Judge, items_from_dicts
from trustjudge.backends import LabelRequest, get_backend
from trustjudge.backends._openai import OpenAICompatibleBackend
from trustjudge.backends._openai_chat import ChatPrompt, Entry, build_messages, read_answer
from trustjudge.backends._openai_labels import trie_values
from trustjudge.errors import BackendUnavailable
from trustjudge.modes._prompts import SCORE_MARKER, SYSTEM

from ._chat_server import chat_only_server
from ._llama_server import require_llama_cpp, smollm2_server, time_bound  # noqa: F401 - time_bound: autouse


def _entry(token: str, tops: dict[str, float] | None = None) -> Entry:
    return token, 0.0, dict(tops or {token: 0.0})


# -- the message path --------------------------------------------------------------------------------
def test_a_chat_prompt_is_messages_then_the_assistants_text_and_appending_extends_it() -> None:
    messages = build_messages("S", "line one\nline two", turns=[{"role": "user", "content": "earlier"},
                                                                {"role": "assistant", "content": "reply"}])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    encoded = ChatPrompt(messages, "Score: [").encode()
    assert "\n" not in encoded.split("\n", 1)[0][-20:] and encoded.endswith("\nScore: [")
    decoded = ChatPrompt.decode(encoded + "critique. Score: [")  # what cot appends
    assert decoded is not None and decoded.messages == messages
    assert decoded.assistant == "Score: [critique. Score: ["
    assert decoded.body(None) == {"messages": list(messages)}
    assert decoded.body("vllm")["continue_final_message"] is True
    assert decoded.body("trailing")["messages"][-1] == {"role": "assistant", "content": decoded.assistant}
    parts = build_messages("S", [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}])
    assert ChatPrompt.decode(ChatPrompt(parts).encode()) == ChatPrompt(parts)
    assert ChatPrompt(parts).text().startswith("S\n\nlook")
    assert ChatPrompt.decode("Score: [") is None


def test_the_label_is_read_after_the_expected_text_in_the_final_answer() -> None:
    labels = ("1]", "2]", "10]")
    answer = [_entry("Score"), _entry(":"), _entry(" ["), _entry("1", {"1": math.log(0.5), "2": math.log(0.3)}),
              _entry("0", {"0": math.log(0.8), "]": math.log(0.2)}), _entry("]")]
    dists = read_answer(answer, "Score: [10]", "Score: [", labels)
    assert dists is not None and set(dists) == {"", "1", "10"}
    p = [math.exp(v) for v in trie_values(labels, dists, assume="]")]
    # "10]" and "1]" read along the written path; "2]" at the first position, its bracket assumed
    assert p == pytest.approx([0.5 * 0.2, 0.3, 0.5 * 0.8])
    # without the assumption an unseen position counts nothing
    assert math.exp(trie_values(labels, dists)[1]) == 0.0
    # the expected text's end inside a token: " [5" and its alternatives that begin with " ["
    straddle = [_entry("Score"), _entry(":"), _entry(" [5", {" [5": math.log(0.7), " [4": math.log(0.2),
                                                             " (": math.log(0.1)}), _entry("]")]
    dists = read_answer(straddle, "Score: [5]", "Score: [", ("4]", "5]"))
    assert dists is not None and [math.exp(v) for v in trie_values(("4]", "5]"), dists, assume="]")] == \
        pytest.approx([0.2, 0.7])
    # reasoning tokens listed before the final content: the label is read in the content, not the reasoning
    thinking = [_entry("Score"), _entry(":"), _entry(" ["), _entry("1", {"1": 0.0}), _entry("]"), _entry("\n"),
                _entry("Score"), _entry(":"), _entry(" ["), _entry("2", {"2": math.log(0.9), "1": math.log(0.1)}),
                _entry("]")]
    dists = read_answer(thinking, "Score: [2]", "Score: [", ("1]", "2]"))
    assert dists is not None and math.exp(trie_values(("1]", "2]"), dists, assume="]")[1]) == pytest.approx(0.9)
    assert read_answer([_entry("I"), _entry(" cannot")], "I cannot", "Score: [", ("1]",)) is None


def test_options_and_identity_of_a_chat_judge() -> None:
    chat = get_backend("http/m@http://127.0.0.1:9/v1?api=chat&top_k=7")
    done = get_backend("http/m@http://127.0.0.1:9/v1?api=completions&top_k=7")
    try:
        assert isinstance(chat, OpenAICompatibleBackend) and chat.api == "chat" and chat.exact_labels is False
        assert chat.fingerprint.endswith(":api=chat") and "api=" not in done.fingerprint
        assert chat.fingerprint != done.fingerprint  # the store key covers the API
        assert ChatPrompt.decode(chat.format_prompt("S", "U", SCORE_MARKER)) == ChatPrompt(
            build_messages("S", "U"), SCORE_MARKER)
        assert get_backend("llamacpp-server/m@http://127.0.0.1:9?api=completions").concurrency == 1  # type: ignore[attr-defined]
        assert get_backend("vllm/m@http://127.0.0.1:9?api=completions").concurrency == 4  # type: ignore[attr-defined]
    finally:
        chat.close()
        done.close()
    with pytest.raises(Exception, match="labels=exact needs the completions endpoint"):
        get_backend("http/m@http://127.0.0.1:9/v1?api=chat&labels=exact")
    with pytest.raises(Exception, match="api must be chat or completions"):
        get_backend("http/m@http://127.0.0.1:9/v1?api=soap")


# -- a chat-only stand-in on loopback ------------------------------------------------------------------
ITEM: dict[str, Any] = {
    "id": "tea", "question": "How do I brew green tea?",
    "evidence": ["Green tea brews best at 70-80 C for one to three minutes."],
    "criteria": [{"name": "accuracy", "description": "Are the temperature and time right?"},
                 {"name": "clarity", "description": "Is it clear?", "levels": ["unclear", "clear enough", "clear"]}],
    "checklist": [{"id": "temp", "text": "Does it give a temperature below boiling?"}],
    "responses": [
        {"id": "a", "text": "Use 80 C water.\nSteep it for two minutes."},
        {"id": "b", "text": "Boil it hard for ten minutes.", "claims": ["Boil for ten minutes."]},
    ],
}


@pytest.fixture()
def stand_in() -> Iterator[Any]:
    with chat_only_server() as server:
        yield server


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_chat_only_model_is_judged_through_chat_with_no_option(stand_in: Any, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from trustjudge.cli import cli

    items = _write(tmp_path / "items.jsonl", [ITEM])
    out, store = tmp_path / "out.jsonl", tmp_path / "s.sqlite"
    args = ["score", str(items), "--judge", f"http/fake@{stand_in.url}", "--store", str(store), "--out", str(out),
            "--scale", "10"]
    result = CliRunner().invoke(cli, args)
    # Before: "error: .../v1/completions returned HTTP 404: This is a chat model ..." (exit 2)
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 and all(r["unscored"] is None for r in records)
    assert {(r["api"], r["label_method"]) for r in records} == {("chat", "top_k_first")}
    # the scripted answer "Score: [5]" with 6 and 4 beside it: 0.6 / 0.25 / 0.15
    assert all(r["label_mass"] == pytest.approx(1.0) for r in records)
    assert all(r["scores"]["expected"] == pytest.approx(5 * 0.6 + 6 * 0.25 + 4 * 0.15) for r in records)
    assert "top-k" in result.output or "top_k" in result.output  # the warning top-k judges give
    assert stand_in.paths().count("/v1/completions") == 1  # one detection request
    sent = [body for path, body in stand_in.calls if path == "/v1/chat/completions"]
    assert sent[-1]["messages"][0] == {"role": "system", "content": SYSTEM}
    assert sent[-1]["logprobs"] is True and sent[-1]["top_logprobs"] == 20
    # a rerun answers from the store: no chat request
    before = len(sent)
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert len([p for p in stand_in.paths() if p == "/v1/chat/completions"]) == before


@pytest.mark.slow
def test_api_forces_one_endpoint_and_detection_is_kept_per_server_and_model(stand_in: Any, tmp_path: Path) -> None:
    items = items_from_dicts([ITEM])
    with pytest.raises(BackendUnavailable, match="This is a chat model"), \
            Judge(f"http/fake@{stand_in.url}?api=completions", store=tmp_path / "a.sqlite", scale=5) as j:
        list(j.score(items))
    stand_in.calls.clear()
    with Judge(f"http/fake@{stand_in.url}?api=chat", store=tmp_path / "b.sqlite", scale=5) as j:
        assert all(r.unscored is None for r in j.score(items))
    assert "/v1/completions" not in stand_in.paths()  # forced: nothing detected
    with Judge(f"http/fake@{stand_in.url}", store=tmp_path / "c.sqlite", scale=5) as j:
        list(j.score(items))
    with Judge(f"http/fake@{stand_in.url}", store=tmp_path / "d.sqlite", scale=5) as j:
        list(j.score(items))
    assert stand_in.paths().count("/v1/completions") == 1  # detected once for the server and model
    with Judge(f"http/other@{stand_in.url}", store=tmp_path / "e.sqlite", scale=5) as j:
        list(j.score(items))
    assert stand_in.paths().count("/v1/completions") == 2  # another model is detected again


@pytest.mark.slow
def test_a_server_that_continues_the_assistant_message_walks_the_labels(tmp_path: Path) -> None:
    with chat_only_server(continues=True) as server, \
            Judge(f"vllm/fake@{server.url}", store=tmp_path / "s.sqlite", scale=10) as j:
        records = list(j.score(items_from_dicts([ITEM])))
    assert {(r.api, r.label_method) for r in records} == {("chat", "top_k")}
    assert all(r.label_mass == pytest.approx(1.0) for r in records)
    walked = [b for p, b in server.calls if p == "/v1/chat/completions" and b.get("continue_final_message")]
    assert walked and all(b["messages"][-1]["role"] == "assistant" and b["add_generation_prompt"] is False
                          for b in walked)
    # the walk asks the position after each label prefix in the top-k: "5", "6", "4" (one request each)
    assert {b["messages"][-1]["content"] for b in walked} >= {"Score: [5", "Score: [6", "Score: [4"}


@pytest.mark.slow
def test_cot_reads_the_label_after_the_critique_in_the_same_answer(stand_in: Any, tmp_path: Path) -> None:
    with Judge(f"http/fake@{stand_in.url}", store=tmp_path / "s.sqlite", scale=10, protocol="cot") as j:
        records = list(j.score(items_from_dicts([ITEM])))
    assert all(r.unscored is None and r.critique == "The response is partly right.\n" for r in records)
    assert all(r.scores["discrete"] == 5 for r in records)
    chats = [b for p, b in stand_in.calls if p == "/v1/chat/completions"]
    probes = [b for b in chats if b["top_logprobs"] == 1]  # does the server continue an assistant message?
    assert len(probes) == 4 and all(b["messages"][-1]["role"] == "assistant" for b in probes)  # 2 styles x 2
    answers = [b for b in chats if b not in probes]
    assert len(answers) == 2  # one answer per judgment: the critique and, past its stop, the label
    assert all("stop" not in b and b["top_logprobs"] == 20 for b in answers)


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_mode_judges_through_a_chat_only_api(stand_in: Any, tmp_path: Path, mode: str) -> None:
    with Judge(f"http/fake@{stand_in.url}", store=tmp_path / "s.sqlite") as j:
        records = [r.to_dict() for r in j.run(MODES[mode].task_of(j), items_from_dicts([ITEM]))]
    assert records, mode
    assert all(r.get("unscored") is None for r in records), records
    assert "/v1/chat/completions" in stand_in.paths()
    assert stand_in.paths().count("/v1/completions") == 1


@pytest.mark.slow
def test_a_chat_api_without_log_probabilities_is_refused_naming_the_option(tmp_path: Path) -> None:
    with chat_only_server(logprobs=False) as server, \
            Judge(f"http/fake@{server.url}", store=tmp_path / "s.sqlite", scale=5) as j, \
            pytest.raises(BackendUnavailable, match=r"http/fake returned no log-probabilities.*labels=sampled"):
        list(j.score(items_from_dicts([ITEM])))


# -- a real llama-cpp-python server: chat against completions --------------------------------------
@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    with smollm2_server() as url:
        yield url


@pytest.mark.slow
@pytest.mark.model
def test_a_real_servers_chat_labels_match_its_completions_labels(llama_server: str) -> None:
    """llama-cpp-python's server does not continue an assistant message, so its chat labels are read in the
    judge's own answer, at the position after "Score: [" (``top_k_first``). When the judge writes "Score: ["
    first, that position has the same context as the completions prompt ending "Score: [" over the same
    messages rendered in ChatML (SmolLM2's template with a system turn): the same distribution, up to the
    top-k cut. SmolLM2-135M ignores a format it is only told about, so two earlier turns show it (the
    messages' ``turns``)."""
    chat = get_backend(f"llamacpp-server/smollm2@{llama_server}?api=chat")
    done = get_backend(f"llamacpp-server/smollm2@{llama_server}?api=completions&template=chatml&labels=top_k")
    assert isinstance(chat, OpenAICompatibleBackend) and isinstance(done, OpenAICompatibleBackend)

    def ask(answer: str) -> str:
        return ("Rate the answer from 1 to 5. Reply with the rating only, in the form \"Score: [N]\".\n"
                f"Question: What is 2 + 2?\nAnswer: {answer}")

    shots = [{"role": "user", "content": ask("22")}, {"role": "assistant", "content": "Score: [1]"},
             {"role": "user", "content": ask("Four")}, {"role": "assistant", "content": "Score: [5]"}]
    labels = tuple(str(i) for i in range(1, 6))  # single tokens: the first position is the whole label
    compared, worst = 0, 0.0
    try:
        for text in ("4", "It is four.", "5", "I do not know."):
            messages = build_messages(SYSTEM, ask(text), turns=shots)
            got = chat.label_logprobs([LabelRequest(chat.format_messages(messages, SCORE_MARKER), labels)])[0]
            prompt = str(done._template.render(messages=list(messages), add_generation_prompt=True, bos_token="",
                                               eos_token="")) + SCORE_MARKER
            want = done.label_logprobs([LabelRequest(prompt, labels)])[0]
            assert got.api == "chat" and got.method == "top_k_first" and want.method == "top_k"
            assert want.api == "completions"
            if all(v == -math.inf for v in got.logprobs):
                continue  # the judge did not write "Score: [" in its answer: nothing to compare
            compared += 1
            for a, b in zip(got.logprobs, want.logprobs):
                worst = max(worst, abs(math.exp(a) - math.exp(b)))
    finally:
        chat.close()
        done.close()
    assert compared >= 3, "the judge wrote the marker too rarely to compare"
    # Measured: 0 (the same probabilities to the last bit, 4 prompts of 4 compared; the fixture's float32 KV
    # cache makes llama.cpp's logits independent of how the tokens are batched). Tolerance 1e-6.
    assert worst < 1e-6, worst
