"""Recipes (trustjudge.recipes): shipped protocols, their metrics computed by hand, reruns from the store, bad
recipe files, third-party recipes by path and entry point, and the CLI."""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import InputError, MockBackend, items_from_dicts
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli
from trustjudge.recipes import _recipe, builtin_recipes, get_recipe, load_recipe, recipe_judge, run_recipe

ITEMS = [
    {"id": "q1", "question": "Where is the cup?", "reference": "on the left",
     "responses": [{"id": "m1", "text": "On the left of the plate."}, {"id": "m2", "text": "On the right."}]},
    {"id": "q2", "question": "How many chairs are there?", "reference": "3",
     "responses": [{"id": "m1", "text": "three"}, {"id": "m2", "text": "3"}]},
]


def _by_response(table: dict[str, dict[str, float]]) -> MockBackend:
    """A judge whose label probabilities depend on which response text the prompt holds."""

    def script(req: LabelRequest) -> list[float]:
        body = req.prompt[req.prompt.rfind("<response>"):]
        for text, probs in table.items():
            if text in body:
                return [probs.get(lab.rstrip("]").strip(), 0.0) for lab in req.labels]
        raise AssertionError(f"no script entry for {body[:80]!r}")

    return MockBackend("recipes", script)


def _never(req: LabelRequest) -> list[float]:
    raise AssertionError("a rerun must be served from the store")


def test_every_shipped_recipe_loads_and_is_listed() -> None:
    shipped = builtin_recipes()
    assert {"dit", "omnispatial", "datamind", "trustjudge-study"} <= set(shipped)
    for name in shipped:
        r = get_recipe(name)
        assert r.name == name and r.version and r.benchmark and r.source
        assert (shipped[name].parent / "README.md").is_file(), f"{name} has no README"
    result = CliRunner().invoke(cli, ["recipes"])
    assert result.exit_code == 0 and "omnispatial" in result.output and "accuracy" in result.output


def _run(name: str, backend: MockBackend, store: Path, **kwargs: Any) -> Any:
    recipe = get_recipe(name)
    judge = recipe_judge(recipe, backend, store=store)  # type: ignore[arg-type]
    try:
        return run_recipe(recipe, items_from_dicts(ITEMS), judge, bootstrap=200, **kwargs), judge.stats.model_calls
    finally:
        judge.close()


@pytest.mark.parametrize("name, yes", [("omnispatial", "TRUE"), ("datamind", "YES")])
def test_equivalence_recipes_give_accuracy_by_hand_and_a_rerun_makes_no_call(name: str, yes: str,
                                                                              tmp_path: Path) -> None:
    no = {"TRUE": "FALSE", "YES": "NO"}[yes]
    # P(pass) per response: 0.9, 0.2, 0.6, 1.0 -> expected accuracy (0.9 + 0.2 + 0.6 + 1.0) / 4 = 0.675
    p = {"On the left": 0.9, "On the right": 0.2, "three": 0.6, "<response>\n3\n": 1.0}

    def backend() -> MockBackend:
        def script(req: LabelRequest) -> list[float]:
            body = req.prompt[req.prompt.rfind("<response>"):]
            for key, q in p.items():
                if key.replace("<response>\n", "") in body and (not key.startswith("<") or key in req.prompt):
                    return [q if lab.startswith(yes) else 1 - q if lab.startswith(no) else 0.0 for lab in req.labels]
            raise AssertionError(body)
        return MockBackend("eq", script)

    run, calls = _run(name, backend(), tmp_path / "s.sqlite")
    assert calls == 4
    # the published reading is hard (P(pass) >= 0.5 counts 1): (1 + 0 + 1 + 1) / 4; soft beside it: 0.675
    assert list(run.readings) == ["hard", "soft"]
    assert run.result.value == pytest.approx(0.75)
    soft = run.readings["soft"]
    assert soft.value == pytest.approx(0.675)
    assert soft.systems["m1"].value == pytest.approx((0.9 + 0.6) / 2)
    assert soft.systems["m2"].value == pytest.approx((0.2 + 1.0) / 2)
    low, high = soft.overall.ci
    assert low <= 0.675 <= high
    assert run.to_dict()["readings"]["hard"]["published"] is True
    assert all(r["checks"][0]["text"].endswith(f"{yes} or {no}.") for r in run.records)
    assert all(r["prompt"]["source"] == "recipe" for r in run.records)
    again, calls = _run(name, MockBackend("eq", _never), tmp_path / "s.sqlite")
    assert calls == 0 and again.readings["soft"].value == pytest.approx(0.675)


def test_dit_mean_similarity_by_hand(tmp_path: Path) -> None:
    # discrete = the most probable label: 5, 2, 4, 4 -> mean 3.75 (expected would be 4.5, 2, 3.5, 4)
    backend = _by_response({"On the left": {"4": 0.5, "5": 0.5001}, "On the right": {"2": 1.0},
                            "three": {"3": 0.5, "4": 0.5001}, "3\n</response>": {"4": 1.0}})
    run, calls = _run("dit", backend, tmp_path / "s.sqlite")
    assert calls == 4 and {r["scale"] for r in run.records} == {5}
    assert any("similar" in h.prompt and "<reference_answer>\non the left" in h.prompt for h in backend.history)
    assert run.result.value == pytest.approx(3.75)
    assert run.result.overall.n == 4 and run.result.overall.unscored == 0
    again, calls = _run("dit", MockBackend("recipes", _never), tmp_path / "s.sqlite")
    assert calls == 0 and again.result.value == pytest.approx(3.75)


def test_the_trustjudge_study_recipe_scores_and_audits_consistency(tmp_path: Path) -> None:
    # One-hot distributions: every scoring method gives the label: 4, 2, 5, 3 -> mean 3.5.
    backend = _by_response({"On the left": {"4": 1.0}, "On the right": {"2": 1.0}, "three": {"5": 1.0},
                            "3\n</response>": {"3": 1.0}})

    def script(req: LabelRequest) -> list[float]:
        if "<response_a>" in req.prompt or "Response A" in req.prompt:
            return [1.0 / len(req.labels)] * len(req.labels)
        return backend.script(req)  # type: ignore[no-any-return]

    run, _calls = _run("trustjudge-study", MockBackend("study", script), tmp_path / "s.sqlite", audit=True)
    assert run.result.value == pytest.approx(3.5)
    assert "5/trustjudge/likelihood" in run.audit["consistency"]["conflict"]


def _write(tmp_path: Path, text: str, **files: str) -> Path:
    (tmp_path / "recipe.toml").write_text(text)
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    return tmp_path / "recipe.toml"


GOOD = ('name = "mine"\nversion = "0.1"\nbenchmark = "Mine"\nsource = "me"\nmode = "checklist"\n'
        '[options]\nchecklist = [{ id = "ok", text = "Is it right?" }]\n[metric]\nname = "accuracy"\n')


@pytest.mark.parametrize("text, field, message", [
    (GOOD.replace('mode = "checklist"', 'mode = "nope"'), "mode", "unknown mode"),
    ('colour = "red"\n' + GOOD, "colour", "not a recipe field"),
    (GOOD.replace('name = "accuracy"', 'name = "accuracy"\nhard = "yes"'), "metric", "must be a bool"),
    (GOOD.replace('name = "accuracy"', 'name = "mean_score"'), "metric.name", "reads score records"),
    (GOOD.replace('name = "accuracy"', 'name = "nope"'), "metric", "unknown metric"),
    (GOOD.replace("[options]", '[templates]\ncheck = "missing.txt"\n[options]'), "templates.check", "not a file"),
    (GOOD.replace("[options]", "[options]\nscale = 5"), "options.scale", "not an option of mode"),
    (GOOD.replace('version = "0.1"\n', ""), "version", "version string"),
    (GOOD.replace("[options]", "[judge]\nscale = \"five\"\n[options]"), "judge.scale", "must be a int"),
    (GOOD + '[provenance]\nauthor = "me"\n', "provenance.author", r"is not a provenance field \(known: commit, "),
    (GOOD + "[provenance]\ncommit = 7\n", "provenance.commit", "must be a string"),
    (GOOD + '[provenance]\nfiles = "x.py"\n', "provenance.files", "must be a table of element -> file"),
    (GOOD + '[input]\nreader = "x"\n', "input.reader", r"is not an input setting \(known: checklist_from, "),
    (GOOD + '[input]\nformat = ""\n', "input.format", "must be a non-empty string"),
])
def test_bad_recipe_files_name_the_file_and_field(tmp_path: Path, text: str, field: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match=message) as info:
        load_recipe(path)
    assert info.value.file == str(path) and info.value.field == field


def test_a_bad_template_names_the_recipe(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("[options]", '[templates]\ncheck = "t.txt"\n[options]'), **{"t.txt": "$nope"})
    with pytest.raises(InputError) as info:
        load_recipe(path)
    assert info.value.file == str(path)


def test_a_third_party_recipe_by_path_and_by_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, GOOD)
    assert get_recipe(str(path)).name == "mine" and get_recipe(str(tmp_path)).name == "mine"
    result = CliRunner().invoke(cli, ["run", str(path), _items(tmp_path), "-j", "mock/hash", "--store",
                                      str(tmp_path / "s.sqlite"), "-q", "--bootstrap", "20"])
    assert result.exit_code == 0, result.output
    module = tmp_path / "my_recipes.py"
    module.write_text(f"RECIPE = {str(path)!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = EntryPoint("mine", "my_recipes:RECIPE", _recipe.PLUGIN_GROUP)
    monkeypatch.setattr(_recipe, "installed", lambda group, env, taken: {"mine": [ep]})
    assert get_recipe("mine").path == path
    assert "mine" in _recipe.recipe_names()
    wrong = EntryPoint("other", "my_recipes:RECIPE", _recipe.PLUGIN_GROUP)
    monkeypatch.setattr(_recipe, "installed", lambda group, env, taken: {"other": [wrong]})
    with pytest.raises(Exception, match="entry point's name must be the recipe's"):
        get_recipe("other")
    sys.modules.pop("my_recipes", None)


def _items(tmp_path: Path) -> str:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(it) + "\n" for it in ITEMS))
    return str(path)


def test_the_run_command_prints_the_metric_writes_records_and_reruns_from_the_store(tmp_path: Path) -> None:
    items, store, out, js = _items(tmp_path), tmp_path / "s.sqlite", tmp_path / "r.jsonl", tmp_path / "m.json"
    args = ["run", "omnispatial", items, "-j", "mock/hash", "--store", str(store), "--out", str(out),
            "--json", str(js), "--bootstrap", "50", "--audit"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert "accuracy" in first.output and "model calls 4" in first.output
    data = json.loads(js.read_text())
    records = [json.loads(line) for line in out.read_text().splitlines()]
    expected = sum(r["checks"][0]["p_pass"] for r in records) / 4
    hard = sum(r["checks"][0]["p_pass"] >= 0.5 for r in records) / 4
    assert data["result"]["value"] == pytest.approx(hard) and data["result"]["n"] == 4  # published: hard
    assert data["readings"]["soft"]["value"] == pytest.approx(expected) and "Readings" in first.output
    assert data["prompt"]["source"] == "recipe" and all(r["prompt"]["source"] == "recipe" for r in records)
    assert "mode" in data["audit"]
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and "model calls 0" in again.output
    bad = CliRunner().invoke(cli, ["run", "no-such-recipe", items, "-j", "mock/hash"])
    assert bad.exit_code != 0 and "unknown recipe" in str(bad.exception or bad.output)


HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None


@pytest.mark.model
@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed")
@pytest.mark.parametrize("name", ["dit", "datamind"])
def test_recipes_end_to_end_on_the_small_judge(name: str, tmp_path: Path) -> None:
    """The real SmolLM2 judge: every record scored, the metric within its range, a rerun makes no call."""
    store = tmp_path / "s.sqlite"
    recipe = get_recipe(name)
    for expected_calls in (None, 0):
        judge = recipe_judge(recipe, "llamacpp/smollm2-135m", store=store)
        try:
            run = run_recipe(recipe, items_from_dicts(ITEMS), judge, bootstrap=100)
            calls = judge.stats.model_calls
        finally:
            judge.close()
        assert run.result.overall.unscored == 0 and run.result.overall.n == 4
        low, high = (1.0, 5.0) if name == "dit" else (0.0, 1.0)
        assert low <= run.result.value <= high
        ci = run.result.overall.ci
        assert ci[0] <= run.result.value <= ci[1]
        if expected_calls is None:
            assert calls == 4
        else:
            assert calls == expected_calls
