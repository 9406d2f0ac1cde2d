"""The inspect_ai scorer: real inspect evals, run offline (inspect's own mockllm model writes the outputs),
scored by trustjudge judges; and the core install never imports inspect_ai."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai")
# inspect_ai 0.3.285 passes tenacity a deprecated argument; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:The .initial. parameter is deprecated:DeprecationWarning")

from inspect_ai import Task, score  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import EvalLog  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.scorer import Score  # noqa: E402
from inspect_ai.solver import generate  # noqa: E402

from trustjudge import Check, Criterion, Judge, load_items  # noqa: E402
from trustjudge.errors import ConfigError  # noqa: E402
from trustjudge.inspect_scorer import trustjudge_scorer  # noqa: E402

QUESTIONS = {"What is the capital of France?": "Paris is the capital of France.",
             "What is 2 + 2?": "2 + 2 = 4."}


def answering(answers: dict[str, str]) -> Callable[..., ModelOutput]:
    """A mockllm output function: each sample's answer looked up by its question (samples run concurrently)."""
    def output(messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        question = messages[-1].text
        out = ModelOutput.from_content(model="mockllm", content=answers[question])
        # Usage given: mockllm would otherwise count tokens with tiktoken, which downloads its encoding.
        out.usage = ModelUsage(input_tokens=len(question.split()), output_tokens=len(out.completion.split()),
                               total_tokens=len(question.split()) + len(out.completion.split()))
        return out
    return output


def run_eval(scorer: Any, answers: dict[str, str], log_dir: Path, samples: list[Sample] | None = None) -> EvalLog:
    dataset = samples or [Sample(input=q, target="", id=f"s{i}") for i, q in enumerate(answers)]
    task = Task(dataset=dataset, solver=generate(), scorer=scorer)
    model = get_model("mockllm/model", custom_outputs=answering(answers))
    [log] = inspect_eval(task, model=model, log_dir=str(log_dir), display="none")
    assert log.status == "success", log.error
    return log


def scores_of(log: EvalLog) -> dict[str, Score]:
    assert log.samples is not None
    return {str(s.id): s.scores["trustjudge_scorer"] for s in log.samples if s.scores}


def calls(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_two_sample_eval_scored_by_the_mock_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "calls.txt"
    monkeypatch.setenv("TRUSTJUDGE_MOCK_CALLS", str(counter))  # mock/hash appends one line per model call
    answers = {"What is the capital of France?": "Paris.", "What is 2 + 2?": ""}  # the second output is empty
    samples = [Sample(input="What is the capital of France?", target="Paris", id="france"),
               Sample(input="What is 2 + 2?", target="4", id="sum")]
    store = tmp_path / "s.sqlite"
    log = run_eval(trustjudge_scorer(judge="mock/hash", store=store), answers, tmp_path / "logs", samples)
    got = scores_of(log)
    france, empty = got["france"], got["sum"]
    assert isinstance(france.value, float) and 1 <= france.value <= 10
    meta = france.metadata or {}
    assert meta["kind"] == "score" and meta["judge"] == "mock/hash" and meta["method"] == "trustjudge"
    assert meta["scale"] == 10 and meta["protocol"] == "direct" and meta["label_method"] == "exact"
    assert meta["unscored"] is None and meta["label_mass"] == pytest.approx(0.9)
    assert sorted(meta["distribution"], key=int) == [str(n) for n in range(1, 11)]
    assert meta["scores"]["trustjudge"] == france.value and meta["record"]["item_id"] == "france"
    assert "trustjudge on 1-10 by judge mock/hash, protocol direct, labels read exact" in (france.explanation or "")
    # The empty output is not a number: inspect's unscored score, with the reason.
    assert isinstance(empty.value, float) and math.isnan(empty.value)
    assert empty.reason == "no_response" and (empty.metadata or {})["unscored"] == "empty_response"
    assert "could not score this output (empty_response)" in (empty.explanation or "")
    # The metrics leave it out and count it.
    assert log.results is not None
    [result] = log.results.scores
    assert result.metrics["mean"].value == pytest.approx(france.value)
    assert result.unscored_samples == 1
    assert calls(counter) == 1  # the empty output never reached the judge

    # The reference answer reaches the prompt: the same output without a target is another judgment.
    no_target = [Sample(input="What is the capital of France?", id="france")]
    run_eval(trustjudge_scorer(judge="mock/hash", store=store), answers, tmp_path / "logs", no_target)
    assert calls(counter) == 2

    # Re-scoring the log (or re-running the eval) asks the store, not the model.
    rescored = score(log, trustjudge_scorer(judge="mock/hash", store=store), display="none")
    assert scores_of(rescored)["france"].value == france.value
    run_eval(trustjudge_scorer(judge="mock/hash", store=store), answers, tmp_path / "logs", samples)
    assert calls(counter) == 2


def test_criteria_and_checklists(tmp_path: Path) -> None:
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    criteria = [Criterion("accuracy", "Is it correct?", weight=2), {"name": "clarity", "description": "Is it clear?"}]
    log = run_eval(trustjudge_scorer("criteria", judge=judge, criteria=criteria, scale=5, method="expected"),
                   QUESTIONS, tmp_path / "logs")
    for s in scores_of(log).values():
        meta = s.metadata or {}
        assert meta["kind"] == "criteria" and meta["method"] == "expected" and meta["scale"] == [1.0, 5.0]
        assert set(meta["criteria"]) == {"accuracy", "clarity"}
        acc, clar = meta["criteria"]["accuracy"], meta["criteria"]["clarity"]
        assert isinstance(s.value, float) and s.value == pytest.approx((2 * acc["score"] + clar["score"]) / 3)
        assert len(acc["distribution"]) == 5 and acc["label_mass"] == pytest.approx(0.9)
        assert "weighted aggregate of 2 criteria" in (s.explanation or "")
    # A checklist from the scorer, and one from a sample's metadata (which wins for that sample).
    samples = [Sample(input="What is 2 + 2?", id="suite"),
               Sample(input="What is the capital of France?", id="own",
                      metadata={"checklist": ["Does it name Paris?", {"id": "short", "text": "Is it one sentence?"}]})]
    log = run_eval(trustjudge_scorer("checklist", judge=judge, checklist=[Check("c1", "Does it answer?")]),
                   QUESTIONS, tmp_path / "logs", samples)
    got = scores_of(log)
    assert set((got["suite"].metadata or {})["checks"]) == {"c1"}
    own = got["own"].metadata or {}
    assert set(own["checks"]) == {"1", "short"} and own["kind"] == "checklist"
    for s in got.values():
        meta = s.metadata or {}
        assert isinstance(s.value, float) and 0 <= s.value <= 1 and s.value == meta["satisfaction"]
        assert 0 <= meta["p_all"] <= 1 and meta["label_mass"] == pytest.approx(0.9)
    judge.close()


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="kind must be one of"):
        trustjudge_scorer("rubric", judge="mock/hash", store=tmp_path / "s.sqlite")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="method must be one of"):
        trustjudge_scorer(judge="mock/hash", store=tmp_path / "s.sqlite", method="average")
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    with pytest.raises(ConfigError, match="give store and protocol to the Judge itself"):
        trustjudge_scorer(judge=judge, store=tmp_path / "other.sqlite")
    judge.close()


def test_core_install_does_not_import_inspect_and_the_extra_is_named(tmp_path: Path) -> None:
    """Without the extra, importing the scorer says what to install; trustjudge itself never imports inspect_ai.
    Through inspect's own entry point the scorer is found by its registry name."""
    code = """
import sys
import trustjudge, trustjudge.cli, trustjudge.pytest_plugin
assert "inspect_ai" not in sys.modules, "the core install imported inspect_ai"
sys.modules["inspect_ai"] = None  # as if the extra were not installed
try:
    import trustjudge.inspect_scorer
except trustjudge.PrerequisiteError as exc:
    print("ERROR", exc)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert ("ERROR the inspect_ai scorer: inspect-ai is not installed; install with `pip install 'trustjudge[inspect]'`"
            in out.stdout)
    code = f"""
from inspect_ai.util import registry_create, registry_info
s = registry_create("scorer", "trustjudge/trustjudge_scorer", judge="mock/hash", store={str(tmp_path / 's.sqlite')!r})
print("NAME", registry_info(s).name)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert "NAME trustjudge/trustjudge_scorer" in out.stdout, out.stderr


@pytest.mark.model
def test_two_sample_eval_scored_by_smollm(tmp_path: Path) -> None:
    judge = Judge("hf/smollm2-135m", store=tmp_path / "s.sqlite")
    log = run_eval(trustjudge_scorer(judge=judge), QUESTIONS, tmp_path / "logs")
    got = scores_of(log)
    assert len(got) == 2
    for s in got.values():
        meta = s.metadata or {}
        assert isinstance(s.value, float) and 1 <= s.value <= 10, (s.value, s.explanation)
        assert meta["judge"] == "hf/smollm2-135m" and meta["label_method"] == "exact" and meta["unscored"] is None
        assert 0 < meta["label_mass"] <= 1 and len(meta["distribution"]) == 10
    assert log.results is not None
    values = [s.value for s in got.values() if isinstance(s.value, float)]
    assert log.results.scores[0].metrics["mean"].value == pytest.approx(sum(values) / 2)
    assert judge.stats.model_calls == 2
    run_eval(trustjudge_scorer(judge=judge), QUESTIONS, tmp_path / "logs")
    assert judge.stats.model_calls == 2 and judge.stats.from_store == 2
    judge.close()


def test_claims_are_scored_by_their_summary_metric_and_pairwise_modes_are_refused(tmp_path: Path) -> None:
    # claims declares its summary through the mode contract (issue 37), so the scorer reads its first metric,
    # the expected precision, as it reads a plug-in's; a pairwise summary has no per-response value.
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    samples = [Sample(input=q, target=a, id=f"s{i}") for i, (q, a) in enumerate(QUESTIONS.items())]
    log = run_eval(trustjudge_scorer("claims", judge=judge), QUESTIONS, tmp_path / "logs", samples)
    got = scores_of(log)
    assert got
    for s in got.values():
        meta = s.metadata or {}
        assert meta["kind"] == "claims" and meta["method"] == "precision"
        record = meta["record"]
        if record["unscored"] is not None:  # the mock judge's extraction does not parse: said, never a number
            assert isinstance(s.value, float) and math.isnan(s.value)
            assert record["unscored"] in (s.explanation or "")
        else:
            assert s.value == pytest.approx(record["precision"])
    with pytest.raises(ConfigError, match="kind must be one of") as info:
        trustjudge_scorer("compare", judge=judge)  # type: ignore[arg-type]
    assert "claims" in str(info.value) and "compare" not in str(info.value).split("got")[0]
    judge.close()


def test_threshold_gives_c_i_values_that_accuracy_reads_and_the_prompt_is_explained(tmp_path: Path) -> None:
    from inspect_ai.scorer import accuracy
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    numbers = {k: s.value for k, s in scores_of(run_eval(trustjudge_scorer(judge=judge), QUESTIONS,
                                                         tmp_path / "logs")).items()}
    cut = sorted(numbers.values())[-1]  # exactly one sample reaches it
    dataset = [Sample(input=q, target="", id=f"s{i}") for i, q in enumerate(QUESTIONS)]
    task = Task(dataset=dataset, solver=generate(), scorer=trustjudge_scorer(judge=judge, threshold=cut),
                metrics=[accuracy()])
    [log] = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=answering(QUESTIONS)),
                         log_dir=str(tmp_path / "logs"), display="none")
    got = scores_of(log)
    assert sorted(str(s.value) for s in got.values()) == ["C", "I"]
    for key, s in got.items():
        meta = s.metadata or {}
        assert meta["value"] == numbers[key] and meta["threshold"] == cut and s.answer is not None
        assert "judge prompt:" in (s.explanation or "") and "Score: [" in (s.explanation or "")
    assert log.results is not None and log.results.scores[0].metrics["accuracy"].value == pytest.approx(0.5)
    judge.close()


def test_a_calibration_file_values_scores_by_the_calibrated_verdict(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    rows = [{"id": f"q{i}", "question": f"Question {i}?",
             "responses": [{"id": f"r{j}", "text": f"answer {i}-{j}", "human_score": 1 + (i + j) % 5}
                           for j in range(3)]} for i in range(4)]
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite", scale=5)
    cal = judge.calibrate(load_items(items), "score", tolerance=1)
    cal.save(tmp_path / "cal.json")
    log = run_eval(trustjudge_scorer(judge=judge, scale=5, calibration=tmp_path / "cal.json"), QUESTIONS,
                   tmp_path / "logs")
    for s in scores_of(log).values():
        block = (s.metadata or {})["calibrated"]
        assert s.value == float(block["verdict"]) and set(block["probabilities"]) == {"1", "2", "3", "4", "5"}
        assert "calibrated (vector) verdict" in (s.explanation or "")
    # fitted for another protocol: refused before any sample is judged
    with pytest.raises(ConfigError, match="does not fit this judging"):
        trustjudge_scorer(judge="mock/hash", store=tmp_path / "o.sqlite", protocol="cot", scale=5,
                          calibration=tmp_path / "cal.json")
    with pytest.raises(ConfigError, match="target_agreement needs a calibration"):
        trustjudge_scorer(judge=judge, target_agreement=0.8)
    judge.close()
