"""The pytest plugin, run the way users run it: pytest's own ``pytester`` writes real test files and runs
them in a fresh pytest session that loads the plugin through its ``pytest11`` entry point."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from trustjudge import Criterion, Judge
from trustjudge.errors import ConfigError
from trustjudge.pytest_plugin import assert_scores_at_least

pytest_plugins = ["pytester"]

# A scripted judge for the inner sessions: every score is "3" (probability 0.8, label mass 0.9), and the
# response containing GOOD wins a pair whichever position it is shown in.
SCRIPTED = '''
from trustjudge import MockBackend, register_mock


def script(request):
    labels = [label.rstrip("]") for label in request.labels]
    if labels == ["A", "B", "C"]:
        good_first = request.prompt.index("GOOD") < request.prompt.index("BAD")
        return [0.8, 0.05, 0.05] if good_first else [0.05, 0.8, 0.05]
    rest = 0.1 / (len(labels) - 1)
    return [0.8 if label == "3" else rest for label in labels]


register_mock("scripted", MockBackend("scripted", script=script))
'''


def test_entry_point_is_installed() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert found.get("trustjudge") == "trustjudge.pytest_plugin", (
        "the pytest11 entry point is missing: reinstall trustjudge (pip install -e .)")


def calls(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_fixture_judges_and_a_rerun_makes_no_model_call(pytester: pytest.Pytester, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "calls.txt"
    monkeypatch.setenv("TRUSTJUDGE_MOCK_CALLS", str(counter))  # mock/hash appends one line per model call
    store = tmp_path / "store.sqlite"
    pytester.makepyfile(test_answers='''
        from trustjudge.pytest_plugin import assert_scores_at_least

        def test_answer(trustjudge_judge):
            assert trustjudge_judge.name == "mock/hash"
            record = assert_scores_at_least(trustjudge_judge, "What is 2 + 2?", "4", 1)
            assert record.scores["trustjudge"] >= 1 and record.label_mass > 0.5
            assert record.distribution and len(record.distribution) == 10
    ''')
    args = ("--trustjudge-judge", "mock/hash", "--trustjudge-store", str(store), "-p", "no:cacheprovider")
    first = pytester.runpytest(*args)
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines([f"*judge mock/hash, store {store}: 1 model call, 0 judgments from the store*"])
    assert calls(counter) == 1 and store.exists()
    again = pytester.runpytest(*args)
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*: 0 model calls, 1 judgment from the store*"])
    assert calls(counter) == 1  # nothing new reached the model


def test_ini_options_and_command_line_override(pytester: pytest.Pytester) -> None:
    pytester.makeini("""
        [pytest]
        trustjudge_judge = mock/hash
        trustjudge_store = stores/judgments.sqlite
    """)
    pytester.makepyfile(test_ini='''
        def test_configured(trustjudge_judge, request):
            expected = request.config.getoption("trustjudge_judge") or "mock/hash"
            assert trustjudge_judge.name == expected
            print("STORE", trustjudge_judge.store.path)
    ''')
    result = pytester.runpytest("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*STORE {pytester.path / 'stores' / 'judgments.sqlite'}*"])
    other = pytester.path / "elsewhere.sqlite"
    result = pytester.runpytest("-s", "-p", "no:cacheprovider", "--trustjudge-judge", "mock/other-name",
                                "--trustjudge-store", str(other))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*STORE {other}*"])


def test_failure_messages_show_the_distribution_and_how(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makeconftest(SCRIPTED)
    pytester.makepyfile(test_fail='''
        from trustjudge import Criterion
        from trustjudge.pytest_plugin import assert_beats, assert_scores_at_least

        def test_too_low(trustjudge_judge):
            assert_scores_at_least(trustjudge_judge, "Name a prime.", "9", 7)

        def test_criterion_too_low(trustjudge_judge):
            assert_scores_at_least(trustjudge_judge, "Name a prime.", "9", 4, "discrete", 5,
                                   Criterion("accuracy", "Is the number prime?"))

        def test_high_enough(trustjudge_judge):
            record = assert_scores_at_least(trustjudge_judge, "Name a prime.", "7", 3, method="discrete")
            assert record.scores["discrete"] == 3

        def test_beats(trustjudge_judge):
            record = assert_beats(trustjudge_judge, "Name a prime.", "GOOD: 7", "BAD: 9")
            assert record.verdicts["likelihood"] == "first"

        def test_loses(trustjudge_judge):
            assert_beats(trustjudge_judge, "Name a prime.", "BAD: 9", "GOOD: 7")

        def test_empty(trustjudge_judge):
            assert_scores_at_least(trustjudge_judge, "Name a prime.", "  ", 1)
    ''')
    result = pytester.runpytest("--trustjudge-judge", "mock/scripted", "--trustjudge-store",
                                str(tmp_path / "s.sqlite"), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=4)
    result.stdout.fnmatch_lines([
        "*trustjudge: the response scored 3, below the minimum 7",
        "*how: method trustjudge on a 1-10 scale, judge mock/scripted, protocol direct, labels read exact",
        "*top labels: 3: 0.800, 1: 0.011, 2: 0.011, 4: 0.011, 5: 0.011 (+5 more labels with 0.056)",
        "*label mass: 0.9 (probability the judge put on the scale's labels)",
        "*all methods: discrete 3, *",
        "*question: 'Name a prime.'",
        "*response: '9'",
    ])
    result.stdout.fnmatch_lines([
        "*trustjudge: the response scored 3, below the minimum 4",
        "*how: method discrete on a 1-5 scale, judge mock/scripted, protocol direct",
        "*criterion: accuracy: 'Is the number prime?'",
        "*top labels: 3: 0.800, 1: 0.025, 2: 0.025, 4: 0.025, 5: 0.025",
    ])
    result.stdout.fnmatch_lines([
        "*trustjudge: A does not beat B (A must win by likelihood and in each order on its own)",
        "*how: both presentation orders, probabilities summed (likelihood aggregation), judge mock/scripted, "
        "protocol direct, labels read exact",
        "*likelihood verdict: B wins (P(A wins) 0.056, P(B wins) 0.889, P(tie) 0.056)",
        "*each order's own verdict: B wins with A shown first, B wins with B shown first",
        "*order 1 (A shown first): labels B: 0.800, A: 0.050, C: 0.050 *; label mass 0.9",
        "*A: 'BAD: 9'",
    ])
    result.stdout.fnmatch_lines(["*the response was not scored (empty_response): no number to compare*",
                                 "*response: '  '"])
    # The losing pair's two prompts are the winning pair's, shown the other way round: both from the store.
    result.stdout.fnmatch_lines(["*judge mock/scripted, store *: 5 model calls, 2 judgments from the store, "
                                 "1 unscored*"])


def test_bad_arguments_are_refused_before_judging(tmp_path: Path) -> None:
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    try:
        with pytest.raises(ConfigError, match="scale's top 5"):
            assert_scores_at_least(judge, "q", "r", 7, scale=5)
        with pytest.raises(ConfigError, match="scale's top 3"):
            assert_scores_at_least(judge, "q", "r", 4, criterion=Criterion("c", "d", levels=("x", "y", "z")))
        with pytest.raises(ConfigError, match="method must be one of"):
            assert_scores_at_least(judge, "q", "r", 1, method="mean")
        with pytest.raises(ConfigError, match="finite"):
            assert_scores_at_least(judge, "q", "r", float("nan"))
        assert judge.stats.model_calls == 0
        # A context and a reference reach the prompt (different prompts: different judgments).
        plain = assert_scores_at_least(judge, "q", "r", 1)
        grounded = assert_scores_at_least(judge, "q", "r", 1, context="c", reference="ref")
        assert plain.scores != grounded.scores and judge.stats.model_calls == 2
    finally:
        judge.close()


@pytest.mark.model
def test_real_judge_in_a_test_session(pytester: pytest.Pytester, tmp_path: Path) -> None:
    # A separate process, as users run it (in-process runs unload what they import, and torch and
    # transformers cannot be imported twice in one process). The second test asks what the first asked:
    # the store answers (reruns across sessions: test_fixture_judges_and_a_rerun_makes_no_model_call).
    pytester.makepyfile(test_real='''
        from trustjudge.pytest_plugin import assert_scores_at_least

        def test_scores(trustjudge_judge):
            record = assert_scores_at_least(trustjudge_judge, "What is the capital of France?", "Paris.", 1)
            assert record.unscored is None and record.label_method == "exact"

        def test_same_again(trustjudge_judge):
            assert_scores_at_least(trustjudge_judge, "What is the capital of France?", "Paris.", 1)
    ''')
    result = pytester.runpytest_subprocess("--trustjudge-judge", "hf/smollm2-135m", "--trustjudge-store",
                                           str(tmp_path / "s.sqlite"), "-p", "no:cacheprovider", timeout=600)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*judge hf/smollm2-135m, store *: 1 model call, 1 judgment from the store*"])


def test_the_plugin_imports_no_scipy_stats() -> None:
    """The plugin is an entry point: every pytest run where trustjudge is installed imports it. It (and
    ``import trustjudge``) must stay light: scipy.stats alone took ~1.3 s of it before it was made lazy."""
    code = "import sys, trustjudge, trustjudge.pytest_plugin; print(sorted(m for m in sys.modules " \
           "if m.startswith(('scipy.stats', 'scipy.optimize', 'torch', 'llama_cpp', 'pandas'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_judge_that_cannot_be_loaded_is_one_skip_reason_not_a_traceback_per_test(pytester: pytest.Pytester) -> None:
    """Without llama-cpp-python the default judge cannot load: every test of the fixture is skipped with the
    install line, once (issue 39), instead of failing with a traceback each."""
    pytester.makeconftest("import sys\nsys.modules['llama_cpp'] = None  # as if llama-cpp-python were not installed\n")
    pytester.makepyfile('''
        from trustjudge.pytest_plugin import assert_scores_at_least

        def test_one(trustjudge_judge):
            assert_scores_at_least(trustjudge_judge, "2+2?", "4", 5)

        def test_two(trustjudge_judge):
            assert_scores_at_least(trustjudge_judge, "3+3?", "6", 5)

        def test_three(trustjudge_judge):
            assert_scores_at_least(trustjudge_judge, "4+4?", "8", 5)
    ''')
    result = pytester.runpytest_subprocess("--trustjudge-judge", "llamacpp/qwen2.5-coder-1.5b",
                                           "--trustjudge-store", str(pytester.path / "s.sqlite"),
                                           "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(skipped=3)
    out = result.stdout.str()
    assert "Traceback" not in out and "pip install" in out
    assert "3 tests skipped: the trustjudge_judge fixture's judge llamacpp/qwen2.5-coder-1.5b cannot be loaded" in out
    assert "pip install 'trustjudge[llamacpp]'" in out
