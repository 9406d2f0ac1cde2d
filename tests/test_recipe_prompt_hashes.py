"""The benchmark prompt files the recipes read, checked against the benchmarks' own repositories (issue 35).

``VERIFIED`` records what was checked by hand: for each recipe (and SC-Arena rubric) that reads a benchmark's
prompt, the repository, the commit the recipe pins, the file, and the sha256 of that file at that commit as
``git show COMMIT:FILE`` gives it. The checks that read the real files run only where a local copy is given:
``TRUSTJUDGE_BENCHMARK_REPOS`` names a folder holding one copy per repository, named ``owner+name`` (a git
work tree, a bare repository, or a folder whose ``repo/`` is one); without it they are skipped. No benchmark's
text is in this repository: the real files are read from the user's copies, never written here.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest

from trustjudge.recipes import get_recipe
from trustjudge.recipes._prompt import load_benchmark_prompt

ROOT = Path(__file__).resolve().parent.parent

VERIFIED = [  # recipe, rubric, repository, commit, file, sha256 of the file at the commit
    ("omnispatial", None, "qizekun/OmniSpatial", "208bac258d8671c6857b3be2834997936ba7fc51", "system_prompts.py",
     "a67f96e609c3d15a81a11d4b20403881b99ea3a2d3a1a59e1441b29db22ee661"),
    ("livedrbench", None, "microsoft/livedrbench", "6ff85b67b35fa303907f6f275417622338acd1f6",
     "src/evals/scifacts.py", "ee88d2c1b8378d46a4b6035c69bf0c089b8d0d12f4778282240b6a836bcda610"),
    ("puzzleworld", None, "MIT-MI/PuzzleWorld", "0a8fbcbd33c86a29a37f7348e1eb40315e17f5c2", "src/scorers.py",
     "b80b3ba51af996970156e618073d808e9cb59894da1c4758d1fad0400d6b4ac8"),
    ("geoprivacy", None, "99starman/VLM-GeoPrivacyBench", "7653e00489bc5b05d8ea2bbf1a51fa39014bd3f8",
     "src/prompts.py", "313e314d96b5162d8b5bc3e3f53728de9c1572aaa26ad4ae6da98db665514344"),
    ("visplotbench", None, "TIGER-AI-Lab/VisCoder2", "4c63695961b722d00b14c10d2a1f559c2bad1383",
     "VisPlotBench/plotting_benchmark/resources/instructs.json",
     "a5dd1356d4ed53821fd67c14cb149038b451213f711a26d92bf35c7447290245"),
    ("visplotbench-vis", None, "TIGER-AI-Lab/VisCoder2", "4c63695961b722d00b14c10d2a1f559c2bad1383",
     "VisPlotBench/plotting_benchmark/resources/instructs.json",
     "a5dd1356d4ed53821fd67c14cb149038b451213f711a26d92bf35c7447290245"),
    ("datamind", None, "zjunlp/DataMind", "4b49ef052500c73b07b5a4955e1115da6cd9da16",
     "datacope/reason_task/eval/DSGym/dsgym/eval/metrics/equivalence_by_llm.py",
     "364e14ee683a6eae88f58b18de3ceb7051b7f04609535ad357a1a2fbbe5f8db7"),
    ("autofigure", None, "ResearAI/AutoFigure", "454ee868b9e253d2dbf990b42c4e964b93e498fd", "autofigure/judge.py",
     "67ea95143aa2156bc80cfa7977c7c0b32c946ef78a0be0bc7481dbae634b8721"),
    ("autofigure-pairwise", None, "ResearAI/AutoFigure", "454ee868b9e253d2dbf990b42c4e964b93e498fd",
     "autofigure/judge.py", "67ea95143aa2156bc80cfa7977c7c0b32c946ef78a0be0bc7481dbae634b8721"),
    ("sc-arena", None, "SUAT-AIRI/SC-Arena", "f4480a220fa4872c4c747f52f8fc784401c592fc", "evaluators/scienceqa.py",
     "ebfeacfd79270b004eac83114364620415310951bf2411c3b896dcb6db6f560b"),
    ("sc-arena", "captioning", "SUAT-AIRI/SC-Arena", "f4480a220fa4872c4c747f52f8fc784401c592fc",
     "evaluators/captioning.py", "cd2c90b43d4960623933b17acbe72a74fc8b5e9a6871252ffc1a680e53722451"),
    ("sc-arena", "generation", "SUAT-AIRI/SC-Arena", "f4480a220fa4872c4c747f52f8fc784401c592fc",
     "evaluators/generation.py", "c03a34153b5b25e1bf98d1dd85afd46c4357e4d86644ec48d998ce716432ec5a"),
    ("sc-arena", "celltype", "SUAT-AIRI/SC-Arena", "f4480a220fa4872c4c747f52f8fc784401c592fc",
     "evaluators/cell_type_annotation.py", "746db277a667d98db6dbabf82bb3f2133780e1f27457ad2b7a0f88d66d853433"),
    ("sc-arena", "perturbation", "SUAT-AIRI/SC-Arena", "f4480a220fa4872c4c747f52f8fc784401c592fc",
     "evaluators/perturbation_prediction.py", "051c31d26d86f6fa77cd0572686638e2c43e0692d7a9cf0b625ae0f9a2eb98a7"),
    ("livedrbench", "keyed", "microsoft/livedrbench", "6ff85b67b35fa303907f6f275417622338acd1f6",
     "src/evals/datasets_flights.py", "eb9b52c3c8d3de544b04c1dc173eb7f078b72abe8f3bbe17924cd211e013aa5e"),
]
"""The second column: an SC-Arena task's rubric, or a recipe group's prompt (livedrbench's ``[groups.keyed]``)."""
IDS = [f"{row[0]}{'-' + row[1] if row[1] else ''}" for row in VERIFIED]


def _spec(recipe: str, rubric: str | None) -> dict[str, str]:
    r = get_recipe(recipe)
    if rubric is None:
        return dict(r.benchmark_prompt)
    return dict(r.rubric_benchmark[rubric] if rubric in r.rubric_benchmark else r.groups[rubric]["benchmark"])


@pytest.mark.parametrize(("recipe", "rubric", "repo", "commit", "file", "sha256"), VERIFIED, ids=IDS)
def test_the_verified_hashes_are_the_recipes(recipe: str, rubric: str | None, repo: str, commit: str, file: str,
                                             sha256: str) -> None:
    """The recipe still pins the file, commit and hash that were checked against the real repository."""
    spec = _spec(recipe, rubric)
    assert (spec["file"], spec["commit"], spec["sha256"]) == (file, commit, sha256)
    assert repo in get_recipe(recipe).provenance.get("repository", "")


def test_every_benchmark_prompt_of_a_shipped_recipe_was_verified() -> None:
    from trustjudge.recipes import builtin_recipes

    known = {(row[0], row[1]) for row in VERIFIED}
    for name in builtin_recipes():
        r = get_recipe(name)
        wanted = (([(r.name, None)] if r.benchmark_prompt else []) + [(r.name, k) for k in r.rubric_benchmark]
                  + [(r.name, k) for k, g in r.groups.items() if g.get("benchmark")])
        assert set(wanted) <= known, f"{r.name}: a benchmark prompt nobody checked against its repository"


def test_the_docs_table_lists_what_was_verified() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = text.split("### Prompt files checked against the benchmarks' repositories", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `([\w-]+)`( \(([\w]+)\))? \| `([\w./-]+)` \| `([0-9a-f]{7})` \| `([^`]+)` \| "
                      r"`([0-9a-f]{12})\.\.\.` \| ok \|$", section, re.M)
    got = {(name, rubric or None, repo, commit, file, sha) for name, _, rubric, repo, commit, file, sha in rows}
    assert got == {(a, b, c, d[:7], e, f[:12]) for a, b, c, d, e, f in VERIFIED}


def _local_copy(repo: str) -> Path | None:
    base = os.environ.get("TRUSTJUDGE_BENCHMARK_REPOS")
    if not base:
        return None
    folder = Path(base) / repo.replace("/", "+")
    return folder / "repo" if (folder / "repo").is_dir() else folder if folder.is_dir() else None


@pytest.mark.parametrize(("recipe", "rubric", "repo", "commit", "file", "sha256"), VERIFIED, ids=IDS)
def test_the_real_file_at_the_pinned_commit_has_the_hash_and_its_prompt_is_read(
        tmp_path: Path, recipe: str, rubric: str | None, repo: str, commit: str, file: str, sha256: str) -> None:
    copy = _local_copy(repo)
    if copy is None:
        pytest.skip(f"no local copy of {repo} (TRUSTJUDGE_BENCHMARK_REPOS/{repo.replace('/', '+')})")
    shown = subprocess.run(["git", "-C", str(copy), "show", f"{commit}:{file}"], capture_output=True, check=False)
    if shown.returncode != 0:
        pytest.fail(f"{repo}: {commit}:{file} is not in the local copy: {shown.stderr.decode(errors='replace')}")
    data = shown.stdout
    assert hashlib.sha256(data).hexdigest() == sha256
    checkout = tmp_path / "checkout"
    (checkout / file).parent.mkdir(parents=True)
    (checkout / file).write_bytes(data)
    r = get_recipe(recipe)
    prompt = (load_benchmark_prompt(r, checkout, rubric=rubric) if rubric is None or rubric in r.rubric_benchmark
              else load_benchmark_prompt(r, checkout, group=rubric))
    assert not prompt.changed and "${benchmark_prompt}" not in prompt.text
    assert re.search(r"\$\{(response|response_a|claim)\}", prompt.text), "the judged text has no place in the prompt"
