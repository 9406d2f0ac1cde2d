"""The service's mode routes are built from the mode registry (issue 22): each mode with a route gets
``POST <route>`` whose request is the items plus the fields of the mode's options dataclass (types, help
text, choices and bounds) and whose response is the mode's records; a mode registered by a third party gets
its route with no change to the service."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

import trustjudge.modes._registry as modes_module
from tests.test_mode_contract import ITEM, VerdictRecord, VerdictTask
from trustjudge import MODES, ConfigError, Judge, Mode, items_from_dicts, register_mode, unregister_mode
from trustjudge.serve import create_app, mode_bodies

option = modes_module.option
CALIBRATED = ("compare", "checklist", "claims", "score", "criteria")
"""The built-in modes whose routes take a calibration (each declares its units: ``Mode(calibration=...)``)."""
LEVEL_MODES = ("score", "criteria")
"""The built-in modes calibrated over a scale's levels (their routes take a ``tolerance``)."""


@dataclass(frozen=True)
class RoutedOptions:
    labels: tuple[str, ...] = option(("CORRECT", "WRONG"), "The verdicts a response may get.")
    protocol: Literal["direct", "cot"] | None = option(None, "direct or cot; default: the judge's.")
    rounds: int = option(1, "How many times to ask (1 to 3).", ge=1, le=3)
    strictness: str = option("normal", "How strict the verdict is.", choices=("lenient", "normal", "strict"))
    notes: Path | None = option(None, "A notes file on the judge's machine.")
    secret: str = option("kept", "Set by the operator only.", served=False)


def _build_routed(settings: Any, options: RoutedOptions) -> VerdictTask:
    return VerdictTask(options.labels, options.protocol or settings.protocol)


ROUTED = Mode("verdict", VerdictTask, VerdictRecord, RoutedOptions, _build_routed,
              summary="A categorical verdict per response.", route="/v1/verdict")


@pytest.fixture
def routed_mode() -> Iterator[Mode]:
    register_mode(ROUTED)
    try:
        yield ROUTED
    finally:
        unregister_mode("verdict")


def _request_schema(schema: dict[str, Any], path: str) -> dict[str, Any]:
    ref = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return dict(schema["components"]["schemas"][ref.rsplit("/", 1)[-1]])


def _library(options: dict[str, Any], store: Path) -> list[dict[str, Any]]:
    with Judge("mock/hash", store=store) as j:
        return [r.to_dict() for r in j.run(j.task("verdict", **options), items_from_dicts([ITEM]))]


def test_a_registered_mode_with_a_route_is_served_from_its_options(routed_mode: Mode, tmp_path: Path) -> None:
    app = create_app("mock/hash", store_path=tmp_path / "srv.sqlite")
    with TestClient(app) as c:
        schema = c.get("/openapi.json").json()
        body = _request_schema(schema, "/v1/verdict")
        default = c.post("/v1/verdict", json={"items": [ITEM]})
        chosen = c.post("/v1/verdict", json={"items": [ITEM], "labels": ["YES", "NO"], "rounds": 3,
                                             "strictness": "strict"})
        too_many = c.post("/v1/verdict", json={"items": [ITEM], "rounds": 4})
        not_a_choice = c.post("/v1/verdict", json={"items": [ITEM], "strictness": "harsh"})
        a_path = c.post("/v1/verdict", json={"items": [ITEM], "notes": "/etc/passwd"})
        operator_only = c.post("/v1/verdict", json={"items": [ITEM], "secret": "mine"})
        bad_item = c.post("/v1/verdict", json={"items": [{"id": "x", "question": "Q?"}]})
    # The body names the served options with their help text, types and bounds; the rest are named as skipped.
    props = body["properties"]
    assert set(props) == {"items", "labels", "protocol", "rounds", "strictness"}
    assert body["required"] == ["items"] and body["additionalProperties"] is False
    help_text = routed_mode.option_help()
    assert all(props[name]["description"] == help_text[name] for name in ("labels", "rounds", "strictness"))
    assert props["labels"]["default"] == ["CORRECT", "WRONG"] and props["labels"]["items"] == {"type": "string"}
    assert (props["rounds"]["minimum"], props["rounds"]["maximum"]) == (1, 3)
    assert props["strictness"]["enum"] == ["lenient", "normal", "strict"]
    operation = schema["paths"]["/v1/verdict"]["post"]
    assert "A categorical verdict per response." in operation["description"]
    assert "`notes` (a path on the server)" in operation["description"]
    assert "`secret` (not served)" in operation["description"]
    # The response's records are the mode's record dataclass, field for field.
    response = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    record = schema["components"]["schemas"][response]["properties"]["records"]["items"]["$ref"].rsplit("/", 1)[-1]
    assert set(schema["components"]["schemas"][record]["properties"]) == {
        f.name for f in dataclasses.fields(VerdictRecord)}
    # A POST judges with the mode's task and returns exactly the library's records.
    assert default.status_code == 200, default.text
    assert default.json() == {"records": _library({}, tmp_path / "a.sqlite")}
    assert chosen.status_code == 200, chosen.text
    assert chosen.json()["records"] == _library({"labels": ("YES", "NO")}, tmp_path / "b.sqlite")
    assert {r["verdict"] for r in chosen.json()["records"]} <= {"YES", "NO"}
    assert too_many.status_code == 422 and too_many.json()["detail"][0]["loc"] == ["body", "rounds"]
    assert not_a_choice.status_code == 422 and not_a_choice.json()["detail"][0]["loc"] == ["body", "strictness"]
    for refused in (a_path, operator_only):  # not request fields: unknown fields are refused
        assert refused.status_code == 422 and refused.json()["detail"][0]["type"] == "extra_forbidden"
    assert bad_item.status_code == 422 and bad_item.json()["detail"][0]["item"] == 0
    # Unregistered, the next app has no such route.
    unregister_mode("verdict")
    with TestClient(create_app("mock/hash", store_path=tmp_path / "srv2.sqlite")) as c:
        assert c.post("/v1/verdict", json={"items": [ITEM]}).status_code == 404


def test_a_mode_route_that_clashes_is_refused(tmp_path: Path) -> None:
    for route, why in (("/v1/score", "modes 'score' and 'verdict' both claim the route '/v1/score'"),
                       ("/v1/audit", "mode 'verdict': route '/v1/audit' is one of the service's own routes"),
                       ("/v1/{x}", "mode 'verdict': route '/v1/{x}' must be a plain path"),
                       (None, "mode 'verdict' has no route")):
        register_mode(dataclasses.replace(ROUTED, route=route))
        try:
            with pytest.raises(ConfigError, match=re.escape(why)):
                create_app("mock/hash", store_path=tmp_path / "s.sqlite", preload=False, modes=["score", "verdict"])
        finally:
            unregister_mode("verdict")


@pytest.mark.parametrize("name", sorted(MODES))
def test_a_built_in_route_takes_exactly_its_mode_options(name: str) -> None:
    """No hand-written copy to drift: the request's fields are the items, the served options and (for the
    modes with calibration units) the calibration fields."""
    mode = MODES[name]
    bodies = mode_bodies(mode)
    served = {f.name for f in dataclasses.fields(mode.options) if f.metadata.get("served", True)}
    calibration = {"calibration", "calibration_name", "calibration_override", "target_agreement", "risk_delta",
                   "force_delta", "calibration_by", "domain_calibrations"}
    calibration |= {"tolerance"} if name in LEVEL_MODES else set()  # score points of agreement
    assert set(bodies.request.model_fields) == {"items"} | served | (calibration if name in CALIBRATED else set())
    # Only the options kept out on purpose (served=False: claims' templates, server paths) are skipped.
    assert bodies.skipped == {n: "not served" for n in {f.name for f in dataclasses.fields(mode.options)} - served}
    fields = bodies.request.model_json_schema()["properties"]
    for option_name, text in mode.option_help().items():
        if option_name not in served:
            continue
        assert fields[option_name]["description"].startswith(text)
    assert bodies.response.model_fields["records"].annotation == list[mode.record]


@pytest.mark.model
def test_a_plugin_mode_route_on_the_bundled_judge_and_a_rerun_makes_zero_calls(routed_mode: Mode,
                                                                               tmp_path: Path) -> None:
    judge = "llamacpp/smollm2-135m" if importlib.util.find_spec("llama_cpp") else "hf/smollm2-135m"
    store = tmp_path / "s.sqlite"
    with Judge(judge, store=store) as j:
        want = [r.to_dict() for r in j.run(j.task("verdict"), items_from_dicts([ITEM]))]
    assert any(r["probabilities"] for r in want)
    app = create_app(judge, store_path=store)
    with TestClient(app) as c:
        got = c.post("/v1/verdict", json={"items": [ITEM]})
        stats = c.get("/v1/stats").json()
    assert got.status_code == 200, got.text
    assert got.json()["records"] == want
    assert stats["model_calls"] == 0 and stats["from_store"] > 0
