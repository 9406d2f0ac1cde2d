"""Judge = backend + store + one frozen JudgeConfig: settings checked once, legacy keywords kept."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trustjudge import ConfigError, Item, Judge, JudgeConfig, Response, Store


def _items() -> list[Item]:
    return [Item(id="q1", question="What is 2+2?", responses=[Response("a", "4"), Response("b", "5")])]


def test_a_config_is_frozen_and_checks_every_setting() -> None:
    config = JudgeConfig(scale=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.scale = 10  # type: ignore[misc]
    for bad, word in [({"batch_size": 0}, "batch_size"), ({"temperature": float("nan")}, "temperature"),
                      ({"min_label_mass": 2.0}, "min_label_mass"), ({"protocol": "fast"}, "protocol"),
                      ({"closing": "some"}, "closing"), ({"chunk_size": True}, "chunk_size"),
                      ({"templates": {"pointwize": "x"}}, "pointwize")]:
        with pytest.raises(ConfigError, match=word):
            JudgeConfig(**bad)  # type: ignore[arg-type]


def test_keywords_change_the_config_and_an_unknown_one_is_named(tmp_path: Path) -> None:
    template = tmp_path / "p.txt"
    template.write_text("Rate: $question / $response\n$task", encoding="utf-8")
    j = Judge("mock/hash", store=tmp_path / "s.sqlite", scale=5, pointwise_template=template)
    assert j.config.scale == 5 and j.config.templates == {"pointwise": template}
    assert j.scale.points == 5
    with pytest.raises(ConfigError, match=r"unknown judge setting.*scael"):
        Judge("mock/hash", store=tmp_path / "s.sqlite", scael=5)
    same = Judge("mock/hash", store=tmp_path / "s.sqlite",
                 config=JudgeConfig(scale=5, templates={"pointwise": template}))
    assert same.config == j.config


def test_a_twin_from_the_config_answers_from_the_store_with_zero_calls(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    first = Judge("mock/hash", store=store, scale=5, protocol="direct")
    records = [r.to_dict() for r in first.score(_items())]
    twin = Judge("mock/hash", store=store, config=first.config)
    again = [r.to_dict() for r in twin.score(_items())]
    assert again == records and twin.stats.model_calls == 0 and first.stats.model_calls == 2
    other = Judge("mock/hash", store=store, config=JudgeConfig.of(first.config, scale=10))
    list(other.score(_items()))
    assert other.stats.model_calls == 2  # another scale is another judgment
