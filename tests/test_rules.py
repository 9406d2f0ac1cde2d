"""Rules before the judge (issue 24): exact, normalized, empty and regex shortcuts in the score, criteria and
checklist modes; a rule-hit response makes no call and touches no store; bad rules refused naming the field;
suites, recipes and the CLI; the real SmolLM2 judge with some items ruled and the rest judged."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import ConfigError, Criterion, InputError, Judge, MockBackend, Rule, items_from_dicts
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli
from trustjudge.io._files import load_suite
from trustjudge.io._rules import fold, parse_rules
from trustjudge.recipes import load_recipe, recipe_judge, run_recipe

from .conftest import write_jsonl

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None

ITEMS = [
    {"id": "q1", "question": "What is the capital of France?", "reference": "Paris",
     "responses": [{"id": "exact", "text": "Paris"}, {"id": "loose", "text": "  paris!! "},
                   {"id": "other", "text": "It is Lyon, I think."}]},
    {"id": "q2", "question": "Where was this photo taken?", "reference": "Rome",
     "responses": [{"id": "refuse", "text": "Sorry, I can't help with locating people."}, {"id": "empty", "text": " "},
                   {"id": "judged", "text": "Somewhere in Italy."}]},
]
RULES = [{"kind": "exact", "label": "5"}, {"kind": "normalized", "label": "4", "id": "loose-match"},
         {"kind": "regex", "pattern": "(?i)\\bsorry\\b|can't help", "label": "3", "id": "refusal"},
         {"kind": "empty", "label": "0"}]


def _counting(p_top: float = 0.75) -> MockBackend:
    """A judge that puts ``p_top`` on the scale's top label and the rest on its bottom, whatever it is asked."""

    def script(req: LabelRequest) -> list[float]:
        return [p_top if i == len(req.labels) - 1 else 1 - p_top if i == 0 else 0.0 for i in range(len(req.labels))]

    return MockBackend("rules", script)


def _judge(backend: MockBackend, store: Path | str = ":memory:", **kw: Any) -> Judge:
    return Judge(backend, store=store, **kw)


def test_fold_and_each_kind_fires_as_documented() -> None:
    assert fold("  The  U.S.A.!  ") == "the usa"
    assert fold("ＰＡＲＩＳ") == "paris"  # NFKC: full-width letters
    item = items_from_dicts([{"id": "q", "question": "?", "reference": "Paris", "context": "ctx",
                              "responses": [{"id": "a", "text": " Paris "}, {"id": "b", "text": "PARIS."},
                                            {"id": "c", "text": ""}, {"id": "d", "text": "ctx"}]}])[0]
    a, b, c, d = item.responses
    exact, norm = Rule("exact", "5"), Rule("normalized", "5")
    assert exact.fires(item, a) and not exact.fires(item, b)
    assert norm.fires(item, a) and norm.fires(item, b) and not norm.fires(item, c)
    assert Rule("empty", "1").fires(item, c) and not Rule("empty", "1").fires(item, a)
    assert Rule("exact", "5", field="context").fires(item, d)
    assert Rule("regex", "1", pattern="^PAR").fires(item, b) and not Rule("regex", "1", pattern="^PAR").fires(item, a)
    no_ref = items_from_dicts([{"id": "q", "question": "?", "responses": [{"id": "a", "text": "x"}]}])[0]
    assert not exact.fires(no_ref, no_ref.responses[0]) and not norm.fires(no_ref, no_ref.responses[0])



def test_lower_compares_lower_cased_and_a_marker_picks_what_is_compared() -> None:
    """``lower`` is Python's ``a.lower() == b.lower()`` (no punctuation or Unicode folding, unlike normalized);
    a ``pattern`` on a comparing rule compares its first group, and without it found the rule does not fire."""
    item = items_from_dicts([{"id": "q", "question": "?", "reference": "CD4-positive T cell",
                              "responses": [{"id": "a", "text": " cd4-POSITIVE t cell "},
                                            {"id": "b", "text": "CD4-positive T cell."},
                                            {"id": "c", "text": "I think [Predicted_Cell_Type: cd4-positive t cell]."},
                                            {"id": "d", "text": "cd4-positive t cell, no marker"}]}])[0]
    a, b, c, d = item.responses
    lower = Rule("lower", "5")
    assert lower.fires(item, a) and not lower.fires(item, b) and not Rule("exact", "5").fires(item, a)
    assert Rule("normalized", "5").fires(item, b)   # normalized drops the full stop; lower keeps it
    marked = Rule("lower", "5", pattern=r"\[Predicted_Cell_Type:\s*([^\]]+?)\]")
    assert marked.fires(item, c) and not marked.fires(item, d) and not marked.fires(item, a)
    assert not lower.fires(item, c)                 # without the marker the whole text is compared
    assert Rule("exact", "5", pattern=r"cd4\S+").fires(item, c) is False   # no group: the whole match
    assert marked.to_dict() == {"id": "lower", "kind": "lower", "label": "5", "pattern": marked.pattern,
                                "field": "reference"}

def test_score_rules_make_no_call_for_the_responses_they_fire_on(tmp_path: Path) -> None:
    backend = _counting(0.75)
    store = tmp_path / "s.sqlite"
    j = _judge(backend, store)
    try:
        records = [r.to_dict() for r in j.run(j.score_task("0-5", rules=RULES), items_from_dicts(ITEMS))]
        calls = j.stats.model_calls
    finally:
        j.close()
    by_id = {r["response_id"]: r for r in records}
    assert [r["response_id"] for r in records] == ["exact", "loose", "other", "refuse", "empty", "judged"]
    # two responses judged ("other", "judged"): two calls; the four others by their rules, none
    assert calls == 2 and len(backend.history) == 2
    assert all("Lyon" in str(h.prompt) or "Italy" in str(h.prompt) for h in backend.history)
    expected = {"exact": ("exact", 5.0), "loose": ("loose-match", 4.0), "refuse": ("refusal", 3.0),
                "empty": ("empty", 0.0)}
    for rid, (rule, value) in expected.items():
        r = by_id[rid]
        assert r["rule"] == rule and r["unscored"] is None and r["label_mass"] is None
        assert r["scores"] == dict.fromkeys(("discrete", "geval", "expected", "trustjudge"), value)
        assert r["distribution"] == {str(v): (1.0 if v == value else 0.0) for v in range(6)} and r["entropy"] == 0.0
    # judged: 0.75 on "5", 0.25 on "0" -> expected 0.75 * 5 = 3.75, and no rule
    assert by_id["other"]["scores"]["expected"] == pytest.approx(3.75) and "rule" not in by_id["other"]
    # a rerun: the judged two from the store, the ruled four from their rules: zero calls
    again = _judge(MockBackend("rules", lambda req: pytest.fail("a rerun must make no call")), store)
    try:
        rerun = [r.to_dict() for r in again.run(again.score_task("0-5", rules=RULES), items_from_dicts(ITEMS))]
        assert again.stats.model_calls == 0 and again.stats.from_store == 2
    finally:
        again.close()
    assert rerun == records


def test_first_rule_wins_and_an_all_ruled_run_leaves_the_store_untouched(tmp_path: Path) -> None:
    items = items_from_dicts([{"id": "q", "question": "?", "reference": "Paris",
                               "responses": [{"id": "a", "text": "Paris"}, {"id": "b", "text": "paris"}]}])
    backend = _counting()
    j = _judge(backend, tmp_path / "s.sqlite")
    try:
        rules = [Rule("normalized", "2", id="first"), Rule("exact", "5", id="second")]
        records = list(j.run(j.score_task(5, rules=rules), items))
        assert [getattr(r, "rule") for r in records] == ["first", "first"]  # noqa: B009 (a record field)
        assert j.stats.model_calls == 0 and j.stats.from_store == 0 and j.store.count() == 0
        plan = j.plan(items, j.score_task(5, rules=rules))
        assert plan.judgments == 0 and plan.model_calls == 0
    finally:
        j.close()
    assert backend.history == []


def test_criteria_rules_give_a_labelled_criterion_its_level_with_no_call() -> None:
    levels = Criterion("disclosure", "How precisely the answer locates the photo.", 1.0,
                       ("discloses nothing", "country", "city", "exact place"), (0, 1, 2, 3), ("A", "B", "C", "D"))
    other = Criterion("tone", "Polite?", 1.0)
    backend = _counting(0.5)
    j = _judge(backend)
    try:
        task = j.criteria_task([levels], rules=[{"kind": "empty", "label": "D"},
                                                {"kind": "regex", "pattern": "(?i)sorry", "label": "a"}])
        records = [r.to_dict() for r in j.run(task, items_from_dicts(ITEMS))]
        # 6 responses, 2 ruled (refuse: A, empty: D): 4 judged on one criterion
        assert j.stats.model_calls == 4
        with pytest.raises(InputError, match=r"rules\[0\]\.label.*'D' is not a label of criterion 'tone'"):
            j.criteria_task([levels, other], rules=[Rule("empty", "D")])
    finally:
        j.close()
    by_id = {r["response_id"]: r for r in records}
    refuse, empty = by_id["refuse"], by_id["empty"]
    assert refuse["rule"] == "regex" and refuse["aggregate"]["expected"] == 0.0
    assert refuse["criteria"][0]["distribution"] == {"A": 1.0, "B": 0.0, "C": 0.0, "D": 0.0}
    assert empty["rule"] == "empty" and empty["unscored"] is None and empty["aggregate"]["expected"] == 3.0
    # judged: 0.5 on D (3) and 0.5 on A (0) -> 1.5
    assert by_id["judged"]["aggregate"]["expected"] == pytest.approx(1.5) and "rule" not in by_id["judged"]


def test_checklist_rules_give_every_check_the_label() -> None:
    backend = _counting(0.5)
    j = _judge(backend)
    checks = [{"id": "c1", "text": "Is it right?", "weight": 1}, {"id": "c2", "text": "Is it short?", "weight": 3}]
    items = items_from_dicts([{**it, "checklist": checks} for it in ITEMS])
    try:
        from trustjudge.io._items import parse_checklist
        task = j.checklist_task(parse_checklist(checks, "t", 1), rules=[Rule("exact", "YES"), Rule("empty", "NO")])
        records = [r.to_dict() for r in j.run(task, items)]
        assert j.stats.model_calls == 2 * 4  # 4 responses judged, 2 checks each
    finally:
        j.close()
    by_id = {r["response_id"]: r for r in records}
    exact = by_id["exact"]
    assert exact["rule"] == "exact" and exact["satisfaction"] == 1.0 and exact["p_all"] == 1.0
    assert by_id["empty"]["satisfaction"] == 0.0 and by_id["empty"]["p_all"] == 0.0
    assert by_id["empty"]["checks"][1]["probabilities"] == {"YES": 0.0, "NO": 1.0}
    # judged: YES with 0.5 (the mock puts 0.5 on the last label, NO, and 0.5 on YES): satisfaction 0.5
    assert by_id["other"]["satisfaction"] == pytest.approx(0.5)


@pytest.mark.parametrize("raw, field, message", [
    ([{"kind": "fuzzy", "label": "5"}], "rules[0].kind", "must be one of exact, normalized, empty, regex"),
    ([{"kind": "regex", "label": "5", "pattern": "(unclosed"}], "rules[0].pattern", "not a valid regular expression"),
    ([{"kind": "regex", "label": "5"}], "rules[0].pattern", "is missing"),
    ([{"kind": "exact"}], "rules[0].label", "is missing"),
    ([{"kind": "exact", "label": " "}], "rules[0].label", "must not be empty"),
    ([{"kind": "empty", "label": "5", "pattern": "x"}], "rules[0].pattern", "not empty"),
    ([{"kind": "exact", "label": "5", "field": "question"}], "rules[0].field", "reference, context"),
    ([{"kind": "exact", "label": "5", "verdict": "x"}], "rules[0].verdict", "is not a rule field"),
    ([{"kind": "exact", "label": "5"}, {"kind": "exact", "label": "4"}], "rules[1].id", r"repeats rules\[0\]'s id"),
    ({"kind": "exact"}, "rules", "must be a list"),
])
def test_bad_rules_in_a_suite_are_refused_naming_file_and_field(raw: Any, field: str, message: str,
                                                                tmp_path: Path) -> None:
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"rules": raw}))
    with pytest.raises(InputError, match=message) as info:
        load_suite(suite)
    assert info.value.file == str(suite) and info.value.field == field
    with pytest.raises(InputError, match=message):
        parse_rules(raw, None)


def _suite_toml(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(body)
    return path


def test_suite_rules_on_the_command_line_and_refused_for_other_modes(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", ITEMS)
    suite = _suite_toml(tmp_path, '[[rules]]\nkind = "exact"\nlabel = 5\n\n[[rules]]\nkind = "empty"\nlabel = "1"\n')
    assert [r.label for r in load_suite(suite).rules] == ["5", "1"]
    out = tmp_path / "out.jsonl"
    runner = CliRunner()
    res = runner.invoke(cli, ["score", str(items), "-j", "mock/hash", "--store", str(tmp_path / "s.sqlite"),
                              "--scale", "5", "--suite", str(suite), "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("rule") for r in rows] == ["exact", None, None, None, "empty", None]
    assert rows[0]["scores"]["expected"] == 5.0 and rows[4]["scores"]["expected"] == 1.0
    res = runner.invoke(cli, ["compare", str(items), "-j", "mock/hash", "--store", str(tmp_path / "s.sqlite"),
                              "--suite", str(suite)])
    assert res.exit_code != 0  # compare takes no suite at all
    crit = _suite_toml(tmp_path, '[[criteria]]\nname = "ok"\ndescription = "Right?"\n\n'
                                 '[[rules]]\nkind = "exact"\nlabel = "5"\n')
    res = runner.invoke(cli, ["criteria", "--pairwise", str(items), "-j", "mock/hash", "--store",
                              str(tmp_path / "s.sqlite"), "--suite", str(crit)])
    said = res.output + str(res.exception)
    assert res.exit_code != 0 and "field 'rules'" in said and "criteria-compare mode takes no rules" in said
    assert str(crit) in said
    # a label the scale lacks: refused naming the suite file and the rule's field, before anything is judged
    bad = _suite_toml(tmp_path, '[[rules]]\nkind = "exact"\nlabel = "7"\n')
    res = runner.invoke(cli, ["score", str(items), "-j", "mock/hash", "--store", str(tmp_path / "t.sqlite"),
                              "--scale", "5", "--suite", str(bad)])
    said = res.output + str(res.exception)
    assert res.exit_code != 0 and str(bad) in said and "field 'rules[0].label'" in said
    assert not (tmp_path / "t.sqlite").exists()


RECIPE = """name = "ruled"
version = "0.1"
benchmark = "a test"
source = "here"
mode = "score"
[judge]
scale = 5
[metric]
name = "mean_score"
"""


def test_recipe_rules_are_applied_and_bad_ones_refused(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(RECIPE + '[[rules]]\nkind = "normalized"\nlabel = "5"\n')
    recipe = load_recipe(good)
    backend_low = MockBackend("low", lambda req: [1.0 if lab.startswith("1") else 0.0 for lab in req.labels])
    judge = recipe_judge(recipe, backend_low, store=":memory:")  # type: ignore[arg-type]
    try:
        run = run_recipe(recipe, items_from_dicts(ITEMS), judge, bootstrap=50)
        # exact and loose hit the rule (5); the empty one is unscored (no rule for it, no call); the other three
        # are judged 1: mean (5 + 5 + 1 * 3) / 5
        assert judge.stats.model_calls == 3 and run.result.value == pytest.approx(13 / 5)
        assert run.result.overall.unscored == 1
    finally:
        judge.close()
    cases = [
        (RECIPE.replace('mode = "score"', 'mode = "claims"').replace("mean_score", "claims")
         + '[[rules]]\nkind = "exact"\nlabel = "5"\n', "rules", "claims mode takes no rules"),
        (RECIPE + '[[rules]]\nkind = "exact"\nlabel = "9"\n', "rules[0].label", "'9' is not a label"),
        (RECIPE + '[[rules]]\nkind = "regex"\nlabel = "5"\npattern = "("\n', "rules[0].pattern", "regular expression"),
        (RECIPE + '[options]\nrules = [{ kind = "exact" }]\n', "options.rules[0].label", "is missing"),
        (RECIPE + '[options]\nrules = [{ kind = "exact", label = "6" }]\n', "options.rules[0].label", "not a label"),
        (RECIPE + '[options]\nrules = [{ kind = "exact", label = "5" }]\n[[rules]]\nkind = "empty"\nlabel = "1"\n',
         "rules", "given twice"),
    ]
    for text, field, message in cases:
        path = tmp_path / "bad.toml"
        path.write_text(text)
        with pytest.raises(InputError, match=message) as info:
            load_recipe(path)
        assert info.value.file == str(path) and info.value.field == field, (field, str(info.value))


def test_rules_refused_where_they_cannot_apply() -> None:
    j = _judge(_counting())
    try:
        with pytest.raises(ConfigError, match="rules"):
            j.task("compare", rules=(Rule("exact", "A"),))
        with pytest.raises(ConfigError, match="rules and generate_criteria exclude each other"):
            j.criteria_task(generate_criteria=3, rules=[Rule("empty", "1")])
        with pytest.raises(InputError, match=r"rules\[0\]\.label.*'MAYBE' is not a label of the checklist"):
            j.checklist_task(rules=[Rule("empty", "MAYBE")])
        items = items_from_dicts([{"id": "q", "question": "?", "reference": "x",
                                   "criteria": [{"name": "c", "description": "d", "levels": ["bad", "good"]}],
                                   "responses": [{"id": "a", "text": "x"}]}])
        task = j.criteria_task(rules=[Rule("exact", "9")], scale=10)
        with pytest.raises(InputError, match=r"criteria\[0\].*criterion 'c' cannot take the label of rule 'exact'"):
            list(j.run(task, items))
    finally:
        j.close()


@pytest.mark.model
@pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed")
def test_rules_on_the_small_judge_end_to_end(tmp_path: Path) -> None:
    """The real SmolLM2 judge: ruled responses take their rule's label with no call, the rest are judged by the
    model (a real distribution), and a rerun makes zero calls."""
    store = tmp_path / "s.sqlite"
    outs = []
    for expected_calls in (2, 0):
        j = Judge("llamacpp/smollm2-135m", store=store)
        try:
            records = [r.to_dict() for r in j.run(j.score_task("0-5", rules=RULES), items_from_dicts(ITEMS))]
            assert j.stats.model_calls == expected_calls
        finally:
            j.close()
        outs.append(records)
    assert outs[0] == outs[1]
    by_id = {r["response_id"]: r for r in outs[0]}
    assert {rid for rid, r in by_id.items() if "rule" in r} == {"exact", "loose", "refuse", "empty"}
    assert by_id["exact"]["scores"]["expected"] == 5.0 and by_id["empty"]["scores"]["expected"] == 0.0
    for rid in ("other", "judged"):
        r = by_id[rid]
        assert r["unscored"] is None and 0.0 < r["label_mass"] <= 1.0 and 0.0 <= r["scores"]["expected"] <= 5.0


def test_the_progress_bar_counts_only_what_is_judged(capsys: pytest.CaptureFixture[str]) -> None:
    """A rule-hit response asks nothing, so the bar's total leaves it out and the bar ends full (2 of 2 here,
    not 2 of 6)."""
    from trustjudge._judge import _with_bar

    items = items_from_dicts(ITEMS)
    judge = _judge(_counting())
    records = [r.to_dict() for r in _with_bar(judge, judge.score_task("0-5", rules=RULES), items)]
    assert sum(1 for r in records if r.get("rule") is None) == 2
    err = capsys.readouterr().err
    assert "2/2" in err and "/6" not in err, err
