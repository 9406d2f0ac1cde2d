"""Fuzz the service from its own OpenAPI schema (schemathesis) on loopback: no 5xx, every 4xx explains."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustjudge.serve import create_app

from .test_server import KEY, OPENAPI, serving

pytestmark = pytest.mark.slow  # subprocesses, servers or Ray: opt-in locally (scripts/test --quick skips)

SCHEMA = schemathesis.openapi.from_dict(json.loads(OPENAPI.read_text()))
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    app = create_app("mock/hash", store_path=tmp_path_factory.mktemp("fuzz") / "s.sqlite", api_keys=[KEY],
                     max_items=20, max_body_bytes=200_000)
    with serving(app) as url:
        yield url


def _explains(response: httpx.Response) -> bool:
    try:
        body = response.json()
    except ValueError:
        return False
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str):
        return bool(detail.strip())
    return isinstance(detail, list) and all(isinstance(d, dict) and d.get("msg") for d in detail)


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: f"{op.method.upper()} {op.path}")
def test_fuzzed_requests_never_get_a_5xx(keyed_server: str, operation: schemathesis.APIOperation) -> None:
    with httpx.Client(base_url=keyed_server, timeout=60) as client:

        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        @given(case=operation.as_strategy(), authorised=st.booleans())
        def run(case: schemathesis.Case, authorised: bool) -> None:
            headers = {k: v for k, v in (case.headers or {}).items() if k.lower() not in ("authorization", "x-api-key")}
            if authorised:
                headers["Authorization"] = f"Bearer {KEY}"
            kwargs: dict[str, object] = {"headers": headers, "params": case.query}
            if case.body is not None and not isinstance(case.body, schemathesis.core.NotSet):
                kwargs["json"] = case.body
            response = client.request(case.method, case.formatted_path, **kwargs)  # type: ignore[arg-type]
            assert response.status_code < 500, response.text
            if response.status_code >= 400:
                assert _explains(response), response.text
            if not authorised and operation.path != "/healthz":
                assert response.status_code == 401

        run()


def test_oversized_and_unauthenticated_are_refused(keyed_server: str) -> None:
    item = {"id": "q", "question": "Q?", "responses": [{"id": "a", "text": "x" * 300_000}]}
    big = httpx.post(f"{keyed_server}/v1/score", json={"items": [item]}, headers={"Authorization": f"Bearer {KEY}"})
    assert big.status_code == 413
    many = {"items": [{"id": str(i), "question": "Q?", "responses": [{"id": "a", "text": "x"}]} for i in range(21)]}
    assert httpx.post(f"{keyed_server}/v1/score", json=many,
                      headers={"Authorization": f"Bearer {KEY}"}).status_code == 413
    assert httpx.post(f"{keyed_server}/v1/score", json=many).status_code == 401


def test_schema_file_is_the_one_fuzzed() -> None:
    assert Path(OPENAPI).exists() and len(OPERATIONS) >= 5
