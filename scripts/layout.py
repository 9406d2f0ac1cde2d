"""Write the README's Layout section from the source tree (each entry: its docstring's first sentence).

    .venv/bin/python scripts/layout.py          # rewrite README.md's block between the layout markers
    .venv/bin/python scripts/layout.py --check  # exit 1 if the README's block differs (tests/test_docs_links.py)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "trustjudge"
BEGIN, END = "<!-- layout: begin (scripts/layout.py writes this block) -->", "<!-- layout: end -->"
WIDTH = 124


def summary(path: Path) -> str:
    """The first sentence of the module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    if ". " in first:
        first = first[: first.index(". ")]
    text = first.rstrip(".").replace("``", "")
    room = WIDTH - 22
    if len(text) > room and ": " in text[:room]:
        text = text[: text.index(": ")]
    return text if len(text) <= room else text[: room - 3].rstrip() + "..."


def block() -> str:
    lines = ["```", "src/trustjudge/"]
    entries: list[tuple[str, Path]] = []
    for path in sorted(PACKAGE.iterdir()):
        if path.is_dir() and (path / "__init__.py").exists():
            entries.append((path.name + "/", path / "__init__.py"))
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name != "__main__.py":
            entries.append((path.name, path))
    for name, path in entries:
        lines.append(f"  {name:<20}{summary(path)}")
    lines += ["bench/                benchmarks that print numbers and write bench/results/",
              "docs/                 the reference pages linked below (docs/architecture.md: the layers)", "```"]
    return "\n".join(lines)


def main() -> int:
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"README.md has no layout markers ({BEGIN} ... {END})", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{block()}\n{END}{tail}"
    if "--check" in sys.argv:
        if new != text:
            print("README.md's Layout section is out of date: run .venv/bin/python scripts/layout.py", file=sys.stderr)
            return 1
        return 0
    readme.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
