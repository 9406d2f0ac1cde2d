"""The README is a front door and the docs are where its material lives: every relative link resolves."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a markdown page defines (duplicate headings get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    for _, line in _prose_lines(page.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if match:
            slug = _slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            if count:
                seen[f"{slug}-{count}"] = 1
    return set(seen)


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """'page:line: target (why)' for every relative link of ``page`` that does not resolve."""
    problems: list[str] = []
    for number, line in _prose_lines(page.read_text(encoding="utf-8")):
        for target in _LINK.findall(_CODE_SPAN.sub("", line)):
            if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue                                  # http:, https:, mailto: ...
            path_part, _, anchor = target.partition("#")
            where = f"{page.relative_to(root)}:{number}: {target}"
            resolved = (page.parent / path_part).resolve() if path_part else page
            if not resolved.exists():
                problems.append(f"{where} (no such file)")
            elif root not in resolved.parents and resolved != root:
                problems.append(f"{where} (outside the repository)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{where} (no heading with anchor #{anchor})")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cli.md").write_text("# CLI\n\n## Methods\n", encoding="utf-8")
    page = docs / "page.md"
    page.write_text("# Title\n\n[ok](cli.md#methods) [gone](no-such-page.md) [bad anchor](cli.md#no-such-heading)\n"
                    "[out](../../elsewhere.md) `[span](ignored.md)`\n"
                    "```\n[in code](ignored.md)\n```\n", encoding="utf-8")
    (tmp_path.parent / "elsewhere.md").write_text("x", encoding="utf-8")
    assert broken_links(page, tmp_path.resolve()) == [
        "docs/page.md:3: no-such-page.md (no such file)",
        "docs/page.md:3: cli.md#no-such-heading (no heading with anchor #no-such-heading)",
        "docs/page.md:4: ../../elsewhere.md (outside the repository)"]


def test_readme_fits_its_budget() -> None:
    # Lines a reader sees: the docs-test markers (HTML comments for tests/test_docs_blocks.py) are not shown.
    lines = len([line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
                 if not line.startswith("<!-- docs-test:")])
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, at most {README_MAX_LINES}: move detail to docs/"


def test_the_readme_layout_is_the_tree() -> None:
    """README's Layout block is written from the source tree by scripts/layout.py: a moved or new module
    without the README rewritten fails here."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "scripts" / "layout.py"), "--check"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
