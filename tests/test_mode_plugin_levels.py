"""A plug-in mode with its own calibration over a scale's levels (issue 37): ``Mode(calibration=LevelUnits(...))``
from ``trustjudge.mode_api`` alone, installed as a distribution, is calibrated with a tolerance and selected with a
guarantee from the command line, as the built-in score mode is; the tolerance it was fitted with holds in select."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.conftest import install_dist, write_jsonl
from trustjudge.audit._trust import Calibration
from trustjudge.cli import cli
from trustjudge.errors import ConfigError
from trustjudge.modes._registry import PLUGIN_GROUP, unregister_mode

PLUGIN = '''
"""The rating mode: a response rated 1, 2 or 3, its distribution over the levels kept for calibration."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from trustjudge.mode_api import (ANSWER_MARKER, SYSTEM, Item, JudgeSettings, LevelUnits, Mode, Outcome, Question,
                                 ResponseHeader, Task, option, quote)

LEVELS = ("1", "2", "3")


@dataclass
class RatingRecord(ResponseHeader):
    scores: dict[str, float | None]
    distribution: dict[str, float] | None
    human_score: float | None
    unscored: str | None


@dataclass(frozen=True)
class RatingOptions:
    keep_distribution: bool = option(True, "Keep the distribution over the levels.")


@dataclass(frozen=True)
class RatingTask(Task):
    kind: ClassVar[str] = "rating"
    protocol: Any = "direct"

    def size(self, item: Item) -> int:
        return len(item.responses)

    def questions(self, item: Item, fmt: Any) -> list[Question | str]:
        return [Question(fmt(SYSTEM, f"Rate 1-3.\\\\nQ: {quote(item.question)}\\\\nA: {quote(r.text)}",
                             ANSWER_MARKER), LEVELS, ANSWER_MARKER) for r in item.responses]

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[RatingRecord]:
        it = iter(outcomes)
        for item in items:
            for r in item.responses:
                out = next(it)
                dist = None if out.probs is None else dict(zip(LEVELS, map(float, out.probs)))
                mean = None if dist is None else sum(int(k) * p for k, p in dist.items()) / sum(dist.values())
                yield RatingRecord(item.id, r.id, r.system, judge, {"mean": mean}, dist, r.human_score,
                                   out.unscored)

    def calibration_prompt(self) -> str:
        return "rating 1-3"


def build(settings: JudgeSettings, options: RatingOptions) -> RatingTask:
    return RatingTask(settings.protocol)


MODE = Mode("rating", RatingTask, RatingRecord, RatingOptions, build, summary="A 1-3 rating.", command="rating",
            route="/v1/rating",
            calibration=LevelUnits(task_scale=False))
'''


@pytest.fixture
def rating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The plug-in, written here and installed as a distribution on a temporary sys.path entry."""
    site = tmp_path / "site"
    install_dist(site, "tj-rating", PLUGIN_GROUP, {"rating": "tj_rating:MODE"})
    (site / "tj_rating").mkdir()
    (site / "tj_rating" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.delenv("TRUSTJUDGE_MODE_PLUGINS", raising=False)
    with monkeypatch.context() as m:
        m.syspath_prepend(str(site))
        yield
    unregister_mode("rating")
    sys.modules.pop("tj_rating", None)
    importlib.invalidate_caches()


def _rows(n: int, prefix: str = "q") -> list[dict[str, object]]:
    return [{"id": f"{prefix}{i}", "question": f"What is {i} + {i}?",
             "responses": [{"id": "a", "system": "good", "text": str(2 * i), "human_score": 3},
                           {"id": "b", "system": "bad", "text": f"Maybe {i}", "human_score": 1 + i % 3}]}
            for i in range(n)]


def _invoke(*args: object) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_a_plugin_with_a_levels_calibration_is_calibrated_and_selected_within_its_tolerance(
        rating: None, tmp_path: Path) -> None:
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _rows(60))
    new_items = write_jsonl(tmp_path / "new.jsonl", _rows(8, prefix="n"))
    store = tmp_path / "s.sqlite"
    fitted = _invoke("calibrate", cal_items, "--mode", "rating", "-j", "mock/hash", "--store", store,
                     "--tolerance", "1", "--out", tmp_path / "cal.json")
    assert fitted.exit_code == 0, fitted.output
    saved = json.loads((tmp_path / "cal.json").read_text())
    assert saved["mode"] == "rating" and saved["classes"] == ["1", "2", "3"]
    assert saved["levels"] == [1.0, 2.0, 3.0] and saved["tolerance"] == 1.0
    assert len(saved["calibration_set"]["human"]) == 120
    loaded = Calibration.load(tmp_path / "cal.json")  # the file read back keeps its levels and tolerance
    assert (loaded.levels, loaded.tolerance) == ([1.0, 2.0, 3.0], 1.0)
    selected = _invoke("select", new_items, "-j", "mock/hash", "--store", store, "--calibration", tmp_path / "cal.json",
                       "--target-agreement", "0.5", "--out", tmp_path / "sel.jsonl", "--summary", tmp_path / "sel.json")
    assert selected.exit_code == 0, selected.output
    rows = [json.loads(line) for line in (tmp_path / "sel.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and all("calibrated" in r for r in rows)
    summary = json.loads((tmp_path / "sel.json").read_text())
    assert summary["mode"] == "rating", summary
    judged = _invoke("rating", new_items, "-j", "mock/hash", "--store", store, "--calibration", tmp_path / "cal.json",
                     "--tolerance", "1", "--out", tmp_path / "r.jsonl")  # its own command takes --tolerance
    assert judged.exit_code == 0, judged.output
    assert all("calibrated" in json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines())
    with pytest.raises(ConfigError, match="fitted with tolerance 1, not 0"):  # before any judging
        _invoke("rating", new_items, "-j", "mock/hash", "--store", store, "--calibration", tmp_path / "cal.json",
                "--tolerance", "0", "--out", tmp_path / "x.jsonl")
    with pytest.raises(ConfigError, match=r"mode 'rating'.*'scale' \(its options: keep_distribution\)"):
        _invoke("calibrate", cal_items, "--mode", "rating", "-j", "mock/hash", "--store", store,  # its levels are
                "--scale", "5", "--out", tmp_path / "cal5.json")  # its own (task_scale=False): a task option


def test_a_plugin_with_a_levels_calibration_is_served_with_a_tolerance(rating: None, tmp_path: Path) -> None:
    from trustjudge.serve import create_app

    schema = create_app("mock/hash", store_path=tmp_path / "srv.sqlite").openapi()
    request = schema["components"]["schemas"]["RatingRequest"]["properties"]
    assert {"calibration", "target_agreement", "tolerance"} <= set(request), sorted(request)
    assert "`tolerance`" in schema["paths"]["/v1/rating"]["post"]["description"]
