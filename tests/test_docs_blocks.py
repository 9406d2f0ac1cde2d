"""Every shell and Python block of the README and docs/ runs from a clone (issue 39): the documented commands,
flags, files and APIs are the real ones, not only present.

Each page runs in a fresh folder holding a copy of ``examples/``: its shell blocks in order (so a block may use
what an earlier one wrote, as a reader following the page would), then its Python blocks in order in one
interpreter (a later block may use an earlier one's names). Judges are swapped for the mock judge
(``TRUSTJUDGE_JUDGE=mock/hash``, and every named model judge in a block): what the blocks check is the
interface; the real judges have their own tests. A block that cannot run here says so in the page, on the line
before its fence, with a reason a reader can check::

    <!-- docs-test: skip: starts a server that runs until stopped -->

and one that needs a user's file gets it made from the examples, also said in the page::

    <!-- docs-test: before: cp examples/items.jsonl items.jsonl -->

A shell block runs up to a line ``# label ...``: what follows needs a person's labels.

A block that installs packages (``pip install``, ``python -m venv``) must be skipped: the test never changes the
environment it runs in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "examples" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"bash": "shell", "sh": "shell", "python": "python"}
_OPEN = re.compile(r"^```(\w+)\s*$")
_MARK = re.compile(r"^<!--\s*docs-test:\s*(skip|before):\s*(.+?)\s*-->\s*$")
_MODEL_JUDGE = re.compile(r"\b(?:hf|llamacpp|llamacpp-server|openai|vllm|http|ollama|ray)/[^\s,'\"\]]+")
_INSTALLS = re.compile(r"(?:^|&&|;|\|\|)\s*(?:pip3? install|python3? -m (?:pip|venv)|uv pip)\b", re.M)
"""A command that changes the environment (not one named in a comment)."""
TIMEOUT_S = 180


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    """The 1-based line of the block's first line of code."""
    language: str
    code: str
    skip: str | None = None
    before: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's shell and Python blocks with their markers."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if m is None:
            if lines[i].startswith("```"):  # a block without a language, or a closing fence
                i += 1
                while i < len(lines) and not lines[i].startswith("```"):
                    i += 1
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        marks: dict[str, str] = {}
        back = i - 1
        while back >= 0 and (mark := _MARK.match(lines[back])):
            # several markers of a kind are one, in page order (before: commands run one after the other)
            kind, said = mark.group(1), mark.group(2)
            marks[kind] = f"{said} && {marks[kind]}" if kind == "before" and kind in marks else said
            back -= 1
        if m.group(1) in RUN:
            found.append(Block(page, i + 2, RUN[m.group(1)], "\n".join(lines[i + 1:end]), marks.get("skip"),
                               marks.get("before")))
        i = end + 1
    return found


def _mocked(code: str) -> str:
    return _MODEL_JUDGE.sub("mock/hash", code)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRUSTJUDGE_")}
    env.update(TRUSTJUDGE_JUDGE="mock/hash", HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1")
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], block: Block, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(cmd, cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: the block ran past {TIMEOUT_S} s")
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        pytest.fail(f"{block.where}: exit status {done.returncode}\n{block.code}\n--- output (last lines)\n{tail}")
    assert "Traceback" not in done.stderr, f"{block.where}: a traceback\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def _the_cascade_keeps_verdicts(work: Path, said: str) -> None:
    """The calibrate -> select -> cascade block keeps some verdicts and writes the rest out for a person."""
    decided = re.search(r"decided by a model: (\d+)", " ".join(said.split()))
    assert decided and int(decided.group(1)) > 0, said[-2000:]
    assert (work / "to_label.jsonl").exists() or (work / "for_people.jsonl").exists()


def _the_trust_page_keeps_verdicts(work: Path, said: str) -> None:
    assert json.loads((work / "summary.json").read_text())["verdicts"] > 0
    assert [json.loads(line) for line in (work / "verdicts.jsonl").read_text().splitlines()]


def _the_examples_say_their_target(work: Path, said: str) -> None:
    """examples/README.md's prose says which target its calibration supports: calibrate says the same."""
    _the_cascade_keeps_verdicts(work, said)
    page = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    claimed = re.search(r"here up to (0\.\d+) at the default risk level (0\.\d+)", " ".join(page.split()))
    assert claimed, "examples/README.md no longer says which target its calibration supports"
    assert f"up to {claimed.group(1)} at --risk-delta {claimed.group(2)}" in " ".join(said.split()), said[-2000:]


AFTER = {"README.md": _the_cascade_keeps_verdicts, "examples/README.md": _the_examples_say_their_target,
         "docs/trust.md": _the_trust_page_keeps_verdicts}
"""What a page's shell blocks must have done, past exiting 0: the labelled example keeps verdicts."""
PYTHON_AFTER = {"docs/trust.md": "assert summary['kept'] > 0, summary"}
"""Code run after a page's Python blocks, in their scope."""


_DRIVER = """
import json, sys, traceback
blocks = json.load(sys.stdin)
scope = {"__name__": "__main__"}
for where, code in blocks:
    try:
        exec(compile(code, where, "exec"), scope)
    except BaseException:
        print(f"FAILED {where}", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


def test_every_block_is_found_and_none_installs_unmarked() -> None:
    found = [b for page in PAGES for b in blocks(page)]
    assert len(found) >= 30, f"only {len(found)} blocks found: is the fence pattern right?"
    unmarked = [b.where for b in found if b.skip is None and _INSTALLS.search(b.code)]
    assert not unmarked, f"blocks that install packages must carry a docs-test skip marker: {unmarked}"
    bare = [b.where for b in found if b.skip is not None and len(b.skip) < 10]
    assert not bare, f"a skip marker gives its reason: {bare}"


def test_the_block_reader_sees_markers_and_languages(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("text\n\n<!-- docs-test: skip: needs a key the test has not -->\n```bash\nexit 1\n```\n\n"
                    "```toml\nx = 1\n```\n\n<!-- docs-test: before: touch a -->\n```python\nprint(1)\n```\n"
                    "```\nplain\n```\n", encoding="utf-8")
    got = [(b.line, b.language, b.code, b.skip, b.before) for b in blocks(page)]
    assert got == [(5, "shell", "exit 1", "needs a key the test has not", None),
                   (14, "python", "print(1)", None, "touch a")]
    # Two before: markers both run, in page order (before: the one farther up was silently dropped).
    page.write_text("<!-- docs-test: before: touch a -->\n<!-- docs-test: before: touch b -->\n```bash\nls\n```\n",
                    encoding="utf-8")
    assert [b.before for b in blocks(page)] == ["touch a && touch b"]
    assert _mocked("trustjudge score x --judge llamacpp/qwen2.5-coder-1.5b -j hf/smollm2-135m "
                   "--cascade openai/gpt-4o,recorded/g.jsonl,human") == (
        "trustjudge score x --judge mock/hash -j mock/hash --cascade mock/hash,recorded/g.jsonl,human")


def guarantee_blocks(page: Path) -> list[Block]:
    """The runnable shell blocks of ``page`` that judge the labelled example (calibrate, select, a calibrated mode)."""
    return [b for b in blocks(page) if b.language == "shell" and b.skip is None
            and ("examples/labelled.jsonl" in b.code or "--calibration" in b.code)]


def test_every_page_has_a_block_to_run() -> None:
    for page in AFTER:
        assert guarantee_blocks(ROOT / page), page
    for page in (ROOT / "README.md", ROOT / "docs" / "trust.md"):
        text = page.read_text(encoding="utf-8")
        for name in ("labelled.jsonl", "new.jsonl", "qags.jsonl"):  # the files that never shipped
            assert not re.search(rf"(?<![/\w]){re.escape(name)}", text.replace("examples/" + name, "")), (page, name)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_the_page_s_blocks_run_from_a_clone(page: Path, tmp_path: Path) -> None:
    runnable = [b for b in blocks(page) if b.skip is None]
    installing = [b.where for b in runnable if _INSTALLS.search(b.code)]
    assert not installing, f"not run: these blocks install packages and carry no skip marker: {installing}"
    if not runnable:
        pytest.skip(f"{page.name} has no block that runs here")
    work = tmp_path / "clone"
    shutil.copytree(ROOT / "examples", work / "examples")
    env = _env(tmp_path / "home")
    said = []
    for block in runnable:
        if block.before is not None:
            _run(["bash", "-euo", "pipefail", "-c", block.before], work, env, block)
        if block.language == "shell":
            code = re.split(r"^# label\b", block.code, maxsplit=1, flags=re.M)[0]
            said.append(_run(["bash", "-euo", "pipefail", "-c", _mocked(code)], work, env, block))
    rel = page.relative_to(ROOT).as_posix()
    if rel in AFTER:
        AFTER[rel](work, "\n".join(said))
    python = [b for b in runnable if b.language == "python"]
    if python:
        payload = json.dumps([[b.where, _mocked(b.code)] for b in python]
                             + ([[f"{rel} (after)", PYTHON_AFTER[rel]]] if rel in PYTHON_AFTER else []))
        _run([sys.executable, "-c", _DRIVER], work, env, python[0], stdin=payload)


# -- every documented command's flags are the command's own (run or not) ---------------------------------------

_SPAN = re.compile(r"`(trustjudge [^`]+)`")
_AT_START = re.compile(r"(?:^|&&|\|\||[;|]|\$\()\s*(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(trustjudge\s.*)")
PLUGIN_COMMANDS = {"verdict": "docs/modes.md's plug-in example (tests/test_mode_plugin_fixture.py installs one)"}
"""Commands the docs show that a plug-in of the page's own adds, with where that plug-in is tested."""


def documented_commands(page: Path) -> list[tuple[int, str]]:
    """(line, command) for every ``trustjudge ...`` command of ``page``: in its shell and unlabelled blocks,
    skipped or not (a line continued by a backslash, or by an indented line of options as a synopsis has, is
    one command), and in its inline code."""
    found: list[tuple[int, str]] = []
    prose: list[str] = []  # the page with its blocks blanked: an inline span may run over a line's end
    fence: str | None = None
    last = 0  # the line the last command of a block ended on
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        prose.append("" if fence is not None or line.startswith("```") else line)
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence not in ("", "bash", "sh"):
            continue
        code = re.split(r"\s#\s", line, maxsplit=1)[0]
        if (m := _AT_START.search(code)) is not None:
            found.append((number, m.group(1)))
            last = number
        elif found and last == number - 1 and re.match(r"^\s+[\[-]", code):
            found[-1] = (found[-1][0], found[-1][1] + " " + code.strip())
            last = number
    text = "\n".join(prose)
    found += [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _SPAN.finditer(text)]
    found.sort(key=lambda entry: entry[0])
    return [(n, " ".join(c.replace("\\", " ").split())) for n, c in found]


def stale_options(page: Path) -> list[str]:
    """'page:line: ...' for each documented command that is not a command of ``trustjudge``, or that gives an
    option the command does not take (as its ``--help`` lists them)."""
    import click

    from trustjudge.cli import cli

    ctx = click.Context(cli)
    stale = []
    for number, text in documented_commands(page):
        where = f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name}:{number}"
        command: click.Command = cli
        words = text.split()[1:]
        while words and isinstance(command, click.Group) and (sub := command.get_command(ctx, words[0])):
            command, words = sub, words[1:]
        if isinstance(command, click.Group):
            if words and re.fullmatch(r"[a-z][a-z-]*", words[0]) and words[0] not in PLUGIN_COMMANDS:
                stale.append(f"{where}: no command {words[0]!r} ({text})")
            continue
        takes = {"--help", *(o for p in command.params for o in (*p.opts, *p.secondary_opts))}
        for word in words:
            flag = word.strip("[](){}'\"").split("=", 1)[0]
            if re.fullmatch(r"--?[A-Za-z][\w-]*", flag) and flag not in takes:
                stale.append(f"{where}: {command.name} takes no {flag} ({text})")
    return stale


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_documented_command_and_option_exists(page: Path) -> None:
    """Skipped blocks and inline commands too: what the blocks run is checked by running them, the rest here."""
    assert stale_options(page) == []


def test_a_stale_option_or_command_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("Run `trustjudge score items.jsonl --scale 5 --no-such-flag` or `trustjudge verdict ITEMS`.\n\n"
                    "<!-- docs-test: skip: a reason long enough -->\n```bash\n"
                    "trustjudge store export --out x.jsonl \\\n  --kind labels -x  # a comment --not-a-flag\n"
                    "cat x | TRUSTJUDGE_JUDGE=mock/hash trustjudge nosuch --help\n```\n\n"
                    "```\ntrustjudge select ITEMS --calibration F\n"
                    "                  [--delta-typo D]\nThe trustjudge command line\n```\n", encoding="utf-8")
    assert documented_commands(page) == [
        (1, "trustjudge score items.jsonl --scale 5 --no-such-flag"), (1, "trustjudge verdict ITEMS"),
        (5, "trustjudge store export --out x.jsonl --kind labels -x"), (7, "trustjudge nosuch --help"),
        (11, "trustjudge select ITEMS --calibration F [--delta-typo D]")]
    assert stale_options(page) == [
        "p.md:1: score takes no --no-such-flag (trustjudge score items.jsonl --scale 5 --no-such-flag)",
        "p.md:5: export takes no -x (trustjudge store export --out x.jsonl --kind labels -x)",
        "p.md:7: no command 'nosuch' (trustjudge nosuch --help)",
        "p.md:11: select takes no --delta-typo (trustjudge select ITEMS --calibration F [--delta-typo D])"]
