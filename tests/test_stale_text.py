"""No stale line a newcomer trips on (issue 39): ids the examples have, the judge a measurement was made with,
the service's real port, no internal issue numbers in user docs, and install hints that read as sentences."""

from __future__ import annotations

import json
import re
from pathlib import Path

from trustjudge.errors import pip_dependency_error

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_store_show_commands_name_ids_the_example_has() -> None:
    found = 0
    for page in DOCS:
        for m in re.finditer(r"trustjudge store show (\S+) (\S+)", page.read_text(encoding="utf-8")):
            path, item_id = m.groups()
            if path.isupper():  # a placeholder (ITEMS ID)
                continue
            assert path.startswith("examples/"), f"{page.name}: store show on {path}, which no clone has"
            ids = {json.loads(line)["id"] for line in (ROOT / path).read_text().splitlines() if line.strip()}
            assert item_id in ids, f"{page.name}: {path} has no item {item_id!r} (its ids: {sorted(ids)})"
            found += 1
    assert found >= 2


def test_a_measurement_names_the_judge_it_was_made_with() -> None:
    text = " ".join((ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8").split())
    claim = text.split("bundled SmolLM2 judge", 1)[1].split("## ", 1)[0]
    command = re.search(r"`(trustjudge audit [^`]*--injection[^`]*)`", claim)
    assert command is not None and "--judge hf/smollm2-135m" in command.group(1)


def test_the_service_docs_use_the_default_port() -> None:
    from trustjudge.cli._serve import serve

    port = next(p.default for p in serve.params if p.name == "port")
    text = (ROOT / "docs" / "service.md").read_text(encoding="utf-8")
    ports = set(re.findall(r"(?:127\.0\.0\.1|localhost|0\.0\.0\.0):(\d+)", text))
    assert ports == {str(port)}, ports


def test_user_docs_and_recipes_name_no_internal_issue() -> None:
    pages = [ROOT / "docs" / "benchmarks.md", *sorted((ROOT / "src" / "trustjudge" / "recipes").rglob("*.md")),
             *sorted((ROOT / "src" / "trustjudge" / "recipes").rglob("*.toml"))]
    for page in pages:
        assert not re.search(r"\bissue 24\b", page.read_text(encoding="utf-8")), page


def test_an_install_hint_is_a_sentence() -> None:
    one = str(pip_dependency_error("The llamacpp/ judges", ["llama-cpp-python"], "llamacpp"))
    assert one == ("The llamacpp/ judges: llama-cpp-python is not installed; install with "
                   "`pip install 'trustjudge[llamacpp]'`.")
    two = str(pip_dependency_error("trustjudge serve", ["fastapi", "uvicorn"], "server"))
    assert "fastapi, uvicorn are not installed" in two and " needs " not in two
