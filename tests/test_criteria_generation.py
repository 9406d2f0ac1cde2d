"""Criteria generated per item by the judge (issue 24: PQR and RACE generate their criteria and weights per task
and persona): one stored generation per item, parsed into named weighted criteria, unparseable output unscored
with its text kept. Each test failed on the code before the change (criteria had to be written in advance)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trustjudge import Judge, MockBackend, items_from_dicts
from trustjudge.backends import GenerateRequest, Generation, LabelRequest
from trustjudge.errors import ConfigError, InputError

from .conftest import write_jsonl

GOOD = "- Goal fit | 3 | Serves the user's goal.\n- Clarity | 1 | Reads clearly.\nEND"
ROWS = [{"id": "q1", "question": "How should I train for a marathon?", "profile": "34, office job, travels often",
         "responses": [{"id": "a", "text": "Run three times a week."}, {"id": "b", "text": "Buy shoes."}]},
        {"id": "q2", "question": "Which car should I buy?", "profile": "Student, small budget",
         "responses": [{"id": "a", "text": "A used hatchback."}]}]


def _between(prompt: str, tag: str) -> str:
    return prompt.rsplit(f"<{tag}>\n", 1)[1].split(f"\n</{tag}>", 1)[0]


def _backend(generations: dict[str, str], scores: dict[tuple[str, str], dict[str, float]] | None = None
             ) -> MockBackend:
    """Generations by the item's question; per (response, criterion name) the label distribution."""

    def labels(req: LabelRequest) -> list[float]:
        key = (_between(req.prompt, "response"), _between(req.prompt, "criterion").split(":", 1)[0])
        table = (scores or {}).get(key)
        if table is None:
            return [1.0 / len(req.labels)] * len(req.labels)
        return [table.get(lab.rstrip("]").strip(), 0.0) for lab in req.labels]

    def generate(req: GenerateRequest) -> Generation:
        text = generations[_between(req.prompt, "question")]
        return Generation(text, (-0.1,) * 5, "length" if text.endswith("...") else "stop", 10)

    return MockBackend("gen", labels, generate)


# -- parsing -------------------------------------------------------------------------------------------------

def test_parsing_normalises_weights_and_numbers_repeated_names() -> None:
    from trustjudge.modes.criteria import parse_generated_criteria

    text = ("Here are the criteria:\n1. **Depth** | 50% | Goes beyond the obvious.\n* Depth | 30 | Again.\n"
            "- Clarity | 20\n- Extra | 5 | Beyond n.\nEND\n- After | 9 | ignored")
    got = parse_generated_criteria(text, "stop", 3)
    assert not isinstance(got, str)
    assert [c.name for c in got] == ["Depth", "Depth (2)", "Clarity"]
    assert [c.weight for c in got] == pytest.approx([0.5, 0.3, 0.2])
    assert [c.description for c in got] == ["Goes beyond the obvious.", "Again.", "Clarity"]
    assert parse_generated_criteria("Just judge it well.\nEND", "stop", 3) == "unparseable_criteria"
    assert parse_generated_criteria("- A | 0 | x\n- B | 0 | y", "stop", 3) == "unparseable_criteria"
    assert parse_generated_criteria(GOOD, "length", 3) == "truncated"


# -- control flow, store, records ----------------------------------------------------------------------------

def test_one_stored_generation_per_item_weights_in_the_aggregate_and_rerun_makes_no_call(tmp_path: Path) -> None:
    gens = {"How should I train for a marathon?": GOOD, "Which car should I buy?": "- Price | 1 | Cheap.\nEND"}
    scores = {("Run three times a week.", "Goal fit"): {"4": 1.0}, ("Run three times a week.", "Clarity"): {"2": 1.0},
              ("Buy shoes.", "Goal fit"): {"1": 1.0}, ("Buy shoes.", "Clarity"): {"5": 1.0}}
    items = items_from_dicts(ROWS)
    store = tmp_path / "s.sqlite"
    backend = _backend(gens, scores)
    judge = Judge(backend, store=store)
    recs = [r.to_dict() for r in judge.run(judge.task("criteria", generate_criteria=2), items)]
    assert judge.stats.generate_calls == 2  # one per item, not per response
    assert judge.stats.label_calls == 2 * 2 + 1 * 1
    a, b, c = recs
    assert a["generated_criteria"] == [{"name": "Goal fit", "weight": 0.75, "description": "Serves the user's goal."},
                                       {"name": "Clarity", "weight": 0.25, "description": "Reads clearly."}]
    assert a["generation"] == GOOD and b["generated_criteria"] == a["generated_criteria"]
    assert a["aggregate"]["expected"] == pytest.approx(0.75 * 4 + 0.25 * 2)  # hand-computed: 3.5
    assert b["aggregate"]["expected"] == pytest.approx(0.75 * 1 + 0.25 * 5)  # 2.0
    assert [x["name"] for x in c["criteria"]] == ["Price"] and c["generated_criteria"][0]["weight"] == 1.0
    prompts = [r.prompt for r in backend.history if isinstance(r, GenerateRequest)]
    assert "34, office job, travels often" in prompts[0] and "Write 2 criteria" in prompts[0]  # per persona
    judge.close()
    again = Judge(_backend({}, {}), store=store)  # a backend that cannot generate: all from the store
    assert [r.to_dict() for r in again.run(again.task("criteria", generate_criteria=2), items)] == recs
    assert again.stats.model_calls == 0
    # the prompt is in the key: another focus is another generation
    other = Judge(_backend(gens, scores), store=store)
    list(other.run(other.task("criteria", generate_criteria=2, criteria_focus="personalization"), items))
    assert other.stats.generate_calls == 2


def test_unparseable_generation_leaves_the_item_unscored_with_its_text(tmp_path: Path) -> None:
    gens = {"How should I train for a marathon?": "I think the answer is good.",
            "Which car should I buy?": "- Price | 1 | Cheap. and then it went on..."}
    judge = Judge(_backend(gens), store=tmp_path / "s.sqlite")
    recs = [r.to_dict() for r in judge.run(judge.task("criteria", generate_criteria=3), items_from_dicts(ROWS))]
    assert [r["unscored"] for r in recs] == ["unparseable_criteria", "unparseable_criteria", "truncated"]
    assert recs[0]["generation"] == "I think the answer is good." and recs[0]["criteria"] == []
    assert all(v is None for v in recs[0]["aggregate"].values()) and "generated_criteria" not in recs[0]
    assert judge.stats.label_calls == 0  # nothing judged on criteria that do not exist


def test_items_with_their_own_criteria_are_not_generated_and_options_are_checked(tmp_path: Path) -> None:
    rows = [dict(ROWS[1], criteria=[{"name": "Own", "description": "Given.", "weight": 1}])]
    judge = Judge(_backend({}), store=tmp_path / "s.sqlite")
    [rec] = list(judge.run(judge.task("criteria", generate_criteria=2), items_from_dicts(rows)))
    assert judge.stats.generate_calls == 0 and rec.generated_criteria is None  # type: ignore[attr-defined]
    task = judge.task("criteria", generate_criteria=2)
    assert judge.plan(items_from_dicts(ROWS), task).judgments == 0 and "generat" in task.plan_note  # --dry-run
    assert judge.task("criteria").plan_note == ""
    # the facade's criteria() takes it too
    recs = list(judge.criteria(items_from_dicts(ROWS[:1]), generate_criteria=2, criteria_focus="fit"))
    assert judge.stats.generate_calls == 1 and recs[0].unscored == "backend_error"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="exclude each other"):
        judge.task("criteria", generate_criteria=2, criteria=items_from_dicts(rows)[0].criteria)
    with pytest.raises(ConfigError, match="need generate_criteria"):
        judge.task("criteria", criteria_focus="x")
    with pytest.raises(ConfigError, match="from 1 to 20"):
        judge.task("criteria", generate_criteria=0)
    with pytest.raises(ConfigError, match=r"lacks the field\(s\) \$\{n\}"):
        judge.task("criteria", generate_criteria=2, generation_template="Criteria for ${question}\n")
    without = Judge(_backend({}), store=":memory:")
    with pytest.raises(InputError, match="has no criteria"):  # without generation, criteria stay required
        list(without.run(without.task("criteria"), items_from_dicts(ROWS)))


def test_cli_generate_flag_and_rerun(tmp_path: Path) -> None:
    from trustjudge.cli import cli

    items = write_jsonl(tmp_path / "items.jsonl", ROWS)
    store, out = tmp_path / "s.sqlite", tmp_path / "out.jsonl"
    args = ["criteria", str(items), "-j", "mock/hash", "--store", str(store), "--out", str(out), "--generate", "3",
            "--focus", "how well it fits the user", "--scale", "0-10"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    # mock/hash writes no criteria list: said per record, with the text kept
    assert all(r["unscored"] == "unparseable_criteria" and r["generation"] for r in rows)
    rerun = CliRunner().invoke(cli, args)
    assert rerun.exit_code == 0 and "model calls 0," in rerun.output, rerun.output


# -- the bundled small judge end to end ----------------------------------------------------------------------

@pytest.mark.model
def test_generated_criteria_end_to_end_on_the_bundled_judge(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install trustjudge[llamacpp])")
    items = items_from_dicts(ROWS[:1])
    store = tmp_path / "s.sqlite"
    with Judge("llamacpp/smollm2-135m", store=store) as judge:
        task = judge.task("criteria", generate_criteria=3, scale="0-10", generation_tokens=256)
        recs = list(judge.run(task, items))
        assert judge.stats.generate_calls == 1
    for rec in recs:
        assert rec.generation  # type: ignore[attr-defined]
        if rec.unscored is None:
            gen = rec.generated_criteria  # type: ignore[attr-defined]
            assert gen and len(gen) <= 3 and sum(c.weight for c in gen) == pytest.approx(1.0)
            assert [c.name for c in rec.criteria] == [c.name for c in gen]  # type: ignore[attr-defined]
            assert 0.0 <= rec.aggregate["expected"] <= 10.0  # type: ignore[attr-defined]
        else:  # a small judge may write no parseable list: said, never a silent score
            assert rec.unscored in ("unparseable_criteria", "truncated")
    with Judge("llamacpp/smollm2-135m", store=store) as again:
        assert [r.to_dict() for r in again.run(again.task("criteria", generate_criteria=3, scale="0-10",
                                                          generation_tokens=256), items)] == [r.to_dict() for r in recs]
        assert again.stats.model_calls == 0


def test_the_service_takes_generate_criteria_from_the_options(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trustjudge.serve import create_app

    with TestClient(create_app("mock/hash", store_path=tmp_path / "srv.sqlite")) as c:
        body = {"items": ROWS[:1], "generate_criteria": 3, "criteria_focus": "fit to the user", "scale": "0-10"}
        first = c.post("/v1/criteria", json=body)
        assert first.status_code == 200, first.text
        records = first.json()["records"]
        assert [r["unscored"] for r in records] == ["unparseable_criteria"] * 2 and records[0]["generation"]
        assert c.post("/v1/criteria", json=body).json() == first.json()
        assert c.post("/v1/criteria", json={**body, "generate_criteria": 21}).status_code == 422
        path = c.post("/v1/criteria", json={**body, "generation_template": "/etc/passwd"})
        assert path.status_code == 422 and path.json()["detail"][0]["type"] == "extra_forbidden"
