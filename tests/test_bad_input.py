"""Property-based tests: random and adversarial input files never produce a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustjudge import InputError, Item, iter_items

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
keys = st.sampled_from(["id", "question", "responses", "pairs", "text", "response_a", "response_b", "label",
                        "human_score", "first", "second", "human", "annotators", "context", "system"])
records = st.dictionaries(keys, json_values, max_size=6)
response = st.fixed_dictionaries({"id": st.text(max_size=5), "text": st.text(max_size=30)},
                                 optional={"human_score": json_values, "system": json_values})
itemish = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=4), st.integers()), "question": st.text(max_size=30),
     "responses": st.lists(response, max_size=4)},
    optional={"pairs": st.lists(st.dictionaries(keys, json_values, max_size=3), max_size=3)},
)


def _lines(draw_lines: list[bytes], tmp: Path) -> Path:
    path = tmp / "items.jsonl"
    path.write_bytes(b"\n".join(draw_lines) + b"\n")
    return path


def _check(path: Path) -> None:
    for value in iter_items(path):
        assert isinstance(value, (Item, InputError))
        if isinstance(value, InputError):
            assert value.file == str(path)
            assert value.line is not None and value.line >= 1
            assert str(value).startswith(f"{path}:")


line = st.one_of(
    records.map(lambda r: json.dumps(r).encode()),
    itemish.map(lambda r: json.dumps(r).encode()),
    st.binary(max_size=60),                                                    # invalid UTF-8, garbage
    itemish.map(lambda r: json.dumps(r).encode()[: max(1, len(json.dumps(r)) // 2)]),  # truncated lines
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40).map(lambda t: json.dumps(
        {"id": "u", "question": t or "q", "responses": [{"id": "x", "text": t + "\u202e\u0000\U0001f600"}]}
    ).encode()),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(line, min_size=1, max_size=8))
def test_loader_never_raises_unexpectedly(tmp_path: Path, lines: list[bytes]) -> None:
    _check(_lines(lines, tmp_path))


def test_huge_field_and_one_response_items(tmp_path: Path) -> None:
    huge = {"id": "h", "question": "Q", "responses": [{"id": "x", "text": "a" * 2_000_001}]}
    one = {"id": "o", "question": "Q", "responses": [{"id": "x", "text": "only"}]}
    path = _lines([json.dumps(huge).encode(), json.dumps(one).encode()], tmp_path)
    values = list(iter_items(path, min_responses=2))
    assert all(isinstance(v, InputError) for v in values)
    assert "characters long" in str(values[0]) and "at least 2 responses" in str(values[1])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(line, min_size=1, max_size=5))
def test_cli_reports_without_traceback(tmp_path: Path, lines: list[bytes]) -> None:
    path = _lines(lines, tmp_path)
    result = subprocess.run([sys.executable, "-m", "trustjudge.cli", "score", str(path), "--judge", "mock/hash",
                             "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "o.jsonl"), "-q"],
                            capture_output=True, text=True, timeout=60)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in (0, 2)
    if result.returncode == 2:
        assert "error:" in result.stderr
