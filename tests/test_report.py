"""The HTML audit report: content, self-containment, escaping, the CLI command, and a real headless browser.

Data come from the built-in deterministic ``mock/hash`` judge, so no model is loaded. The browser test
drives Debian's chromium (/usr/bin/chromium, installed by .ci/install-chromium) through Playwright and
never downloads a browser. Without chromium it skips, unless ``CI`` is set: then it fails.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trustjudge import Judge, load_items
from trustjudge.cli._report import report as command
from trustjudge.report._conflicts import _conflicts_html, conflicts_by_item
from trustjudge.report._plots import _plot_ranking
from trustjudge.report._report import PLOT_IDS, _ranking_html, render_report

from .conftest import write_jsonl

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCRIPT = "<script>alert(1)</script>"
SYSTEMS = ("model-a", "model-b", "model-c", "model-d")


def report_items() -> list[dict[str, Any]]:
    """3 items x 4 responses, each with a system and a human score; one response carries markup."""
    answers = {
        "alert": ("How do I show a pop-up message from a web page?",
                  [f"Put {SCRIPT} in the page's HTML.", "Call window.alert('hi') from your JavaScript.",
                   "Use a pop-up.", "You cannot."]),
        "capital": ("What is the capital of Australia?",
                    ["Canberra.", "Canberra, chosen as a compromise between Sydney and Melbourne.", "Sydney.",
                     "Melbourne, probably."]),
        "boil": ("At what temperature does water boil at sea level?",
                 ["100 degrees Celsius (212 F).", "About 90 degrees.", "100 C.", "It depends on the kettle."]),
    }
    humans = {"alert": (3, 5, 2, 1), "capital": (4, 5, 1, 1), "boil": (5, 1, 4, 2)}
    return [{"id": item_id, "question": question,
             "responses": [{"id": f"r{i + 1}", "text": text, "system": SYSTEMS[i], "human_score": humans[item_id][i]}
                           for i, text in enumerate(texts)]}
            for item_id, (question, texts) in answers.items()]


def count_figures(page: str) -> int:
    return len(re.findall(r'<figure class="plot"', page))


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any], Any]:
    folder = tmp_path_factory.mktemp("report")
    path = write_jsonl(folder / "items.jsonl", report_items())
    items = load_items(path)
    judge = Judge("mock/hash", store=folder / "judgments.sqlite")
    try:
        run = judge.audit(items, scales=(5, 100), bootstrap=100)
    finally:
        judge.close()
    return path, items, run


def simple_ranking(run: Any) -> dict[str, Any]:
    """A ranking in the minimal documented form (mean 100-point score per system), independent of _ranking."""
    means: dict[str, list[float]] = {}
    for rec in run.score_records[100]:
        if rec["scores"]["trustjudge"] is not None:
            means.setdefault(rec["system"], []).append(rec["scores"]["trustjudge"])
    systems = [{"system": s, "strength": sum(v) / len(v), "ci_low": min(v), "ci_high": max(v)}
               for s, v in means.items()]
    systems.append({"system": SCRIPT, "strength": 50.0, "ci_low": 40.0, "ci_high": 60.0})
    return {"systems": sorted(systems, key=lambda s: -s["strength"])}


@pytest.fixture(scope="module")
def report_html(audited: tuple[Path, list[Any], Any]) -> str:
    _, items, run = audited
    return render_report(run, judge="mock/hash", protocol="direct", data="items.jsonl", ranking=simple_ranking(run),
                         items=items)


@pytest.fixture(scope="module")
def report_file(report_html: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(report_html, encoding="utf-8")
    return path


def test_report_shows_the_run(report_html: str, audited: tuple[Path, list[Any], Any]) -> None:
    run = audited[2]
    assert report_html.startswith("<!DOCTYPE html>")
    assert "mock/hash" in report_html and "items.jsonl" in report_html and "direct" in report_html
    assert f"<dd>{run.report.items}</dd>" in report_html and f"<dd>{run.report.pairs}</dd>" in report_html
    for section in ("conflict", "transitivity", "position", "human-scores"):
        assert f'id="audit-{section}"' in report_html
    assert report_html.count('<tbody class="item-group">') == len(conflicts_by_item(run)[1])


def test_report_is_self_contained(report_html: str) -> None:
    assert "http://" not in report_html and "https://" not in report_html
    assert not re.search(r"\bsrc\s*=", report_html, re.IGNORECASE)
    assert all(href.startswith("#") for href in re.findall(r'href="([^"]*)"', report_html))
    assert all(url.startswith("#") for url in re.findall(r"url\(([^)]*)\)", report_html))
    assert "@import" not in report_html and "<link" not in report_html
    assert "Content-Security-Policy" in report_html and "default-src 'none'" in report_html


def test_report_escapes_user_text(report_html: str, audited: tuple[Path, list[Any], Any]) -> None:
    assert "<script" not in report_html.lower()
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert escaped in report_html  # in the ranking table (a system name) ...
    assert "alert" in conflicts_by_item(audited[2])[1]  # ... and in the alert item's conflicting responses
    assert f"Put {escaped} in the page" in report_html


def test_report_plots(report_html: str) -> None:
    assert count_figures(report_html) == len(PLOT_IDS) == 5
    for plot_id in PLOT_IDS:
        match = re.search(rf'<figure class="plot" id="{plot_id}">\s*<svg (.*?)</figure>', report_html, re.DOTALL)
        assert match, plot_id
        assert 'aria-label="' in match.group(1) and "<path" in match.group(1) and "<figcaption>" in match.group(1)
    ids = re.findall(r'\bid="([^"]+)"', report_html)
    assert len(ids) == len(set(ids)), "element ids repeat across the inline SVGs"


def test_conflict_view_matches_the_audit(audited: tuple[Path, list[Any], Any]) -> None:
    _, items, run = audited
    scale, found = conflicts_by_item(run)
    assert scale == 100
    assert sum(map(len, found.values())) == run.report.conflict[(100, "trustjudge", "likelihood")].conflicts
    capped = _conflicts_html(run, items, 1, max_per_item=2)
    assert capped.count('<tbody class="item-group">') == 1 and "items with the most conflicts are shown" in capped
    top = max(map(len, found.values()))
    assert (f"and {top - 2} more conflicting pairs" in capped) == (top > 2)


def test_report_without_pairs_or_ranking(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"Question {i}?", "responses": [{"id": "a", "text": f"Answer {i}."}]}
            for i in range(3)]
    items = load_items(write_jsonl(tmp_path / "single.jsonl", rows))
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite")
    try:
        run = judge.audit(items, scales=(10,), bootstrap=0)
    finally:
        judge.close()
    page = render_report(run, judge="mock/hash", protocol="direct", data="single.jsonl", title="T & <b>")
    assert count_figures(page) == 4 and 'id="plot-ranking"' not in page
    assert "<title>T &amp; &lt;b&gt;" in page and "0 conflicts" in page


def test_ranking_dict_is_read_leniently() -> None:
    import matplotlib

    ranking = {"primary": "hard", "systems": [{"system": "x", "bt_hard": 0.5}, {"strength": 0.1, "ci_low": 0.0},
                                              {"system": "no-strength"}, "junk"]}
    with matplotlib.rc_context({"svg.fonttype": "path"}):
        _plot_ranking(ranking)
        _plot_ranking({})
    table = _ranking_html(ranking)
    assert "<td>x</td>" in table and "<td>system 2</td>" in table and "no-strength" in table
    assert "no systems" in _ranking_html({"systems": None})


def test_cli_report(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", report_items())
    out = tmp_path / "sub" / "report.html"
    args = [str(items), "--judge", "mock/hash", "--store", str(tmp_path / "s.sqlite"), "--html", str(out),
            "--bootstrap", "10", "--scales", "100", "--quiet"]
    result = CliRunner().invoke(command, args)
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    has_ranking = find_spec("trustjudge.audit._ranking") is not None
    assert count_figures(page) == (5 if has_ranking else 4)
    assert "<script" not in page.lower() and "Put &lt;script&gt;" in page
    missing = CliRunner().invoke(command, [str(items), "--judge", "mock/hash"])
    assert missing.exit_code != 0 and "--html" in missing.output


def test_install_chromium_script() -> None:
    script = ROOT / ".ci" / "install-chromium"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    if CHROMIUM.exists():  # idempotent: with chromium present it installs nothing
        done = subprocess.run([str(script)], capture_output=True, text=True, timeout=60, check=True)
        assert "already installed" in done.stdout


# -- the browser ------------------------------------------------------------------------------------------
def _need_browser() -> Any:
    """Playwright's sync API; skip when chromium is missing, except under CI where that fails."""
    ci = bool(os.environ.get("CI"))
    if not CHROMIUM.exists():
        reason = f"Debian's chromium is not installed at {CHROMIUM} (install it with .ci/install-chromium)"
        if ci:
            pytest.fail(f"{reason}; CI is set, so this is a failure, not a skip")
        pytest.skip(reason)
    try:
        from playwright import sync_api
    except ImportError:  # a declared test dependency: never a skip
        pytest.fail("Python Playwright is not installed: pip install -e '.[test]' (never `playwright install`)")
    return sync_api


def test_missing_chromium_skips_locally_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(f"{__name__}.CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="install-chromium"):
        _need_browser()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        _need_browser()


@pytest.fixture(scope="module")
def browser_page() -> Iterator[Any]:
    sync_api = _need_browser()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser.new_page(viewport={"width": 1200, "height": 1500})
        finally:
            browser.close()


def test_report_in_headless_chromium(browser_page: Any, report_file: Path) -> None:
    page = browser_page
    console: list[Any] = []
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda msg: console.append(msg))  # noqa: PLW0108 (playwright tags the handler; a builtin cannot be)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("request", lambda req: requests.append(req.url))
    page.goto(report_file.as_uri(), wait_until="load")

    assert errors == []
    assert [m.text for m in console if m.type == "error"] == []
    assert requests == [report_file.as_uri()], "the report loaded something besides itself"
    assert page.evaluate("() => document.querySelectorAll('script').length") == 0
    assert page.locator("figure.plot").count() == len(PLOT_IDS)
    for plot_id in PLOT_IDS:
        svg = page.locator(f"figure.plot#{plot_id} > svg")
        assert svg.count() == 1, plot_id
        box = svg.bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 100, (plot_id, box)
        drawn = page.evaluate(f"() => document.querySelector('#{plot_id} > svg').getBBox().width")
        assert drawn > 0, plot_id
    assert SCRIPT in page.inner_text("body")  # shown as text, never run

    artifacts = Path(__file__).parent / "artifacts"
    artifacts.mkdir(exist_ok=True)
    page.screenshot(path=str(artifacts / "report.png"), full_page=True)
    assert (artifacts / "report.png").stat().st_size > 10_000
    if os.environ.get("TRUSTJUDGE_WRITE_DOCS") == "1":
        docs = ROOT / "docs"
        docs.mkdir(exist_ok=True)
        page.screenshot(path=str(docs / "report-screenshot.png"), full_page=False)
