"""Images as inputs: loading and checking (Pillow), store keys over the image bytes, templates placing them,
every mode taking them, text-only judges refusing them, and the OpenAI-compatible chat path sending them.

The images are written by the tests (a few pixels, drawn with Pillow). The HTTP tests run the chat-only
stand-in of ``tests/_chat_server.py`` on loopback (a real HTTP server, scripted answers: control flow only).
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as PILImage

from trustjudge import Judge, items_from_dicts, load_items
from trustjudge._images import MARKER, Image, load_image, split
from trustjudge.backends import LabelRequest, MockBackend, register_mock
from trustjudge.errors import ConfigError, InputError

from ._chat_server import chat_only_server


def png_bytes(color: tuple[int, int, int] = (200, 30, 30), size: tuple[int, int] = (8, 8),
              pixel: tuple[int, int] | None = None) -> bytes:
    im = PILImage.new("RGB", size, color)
    if pixel is not None:
        im.putpixel(pixel, (0, 0, 0))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def write_items(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def item(response_images: list[str], **extra: Any) -> dict[str, Any]:
    return {"id": "q1", "question": "Plot y = x squared.",
            "responses": [{"id": "a", "text": "", "images": response_images},
                          {"id": "b", "text": "A parabola.", "images": response_images[:1]}], **extra}


@pytest.fixture()
def judge_mock() -> Iterator[MockBackend]:
    backend = MockBackend("vision")
    register_mock("vision-test", backend)
    try:
        yield backend
    finally:
        register_mock("vision-test", None)


# -- loading and checking ----------------------------------------------------------------------------
def test_an_image_path_is_read_relative_to_the_items_file_and_a_data_uri_is_decoded(tmp_path: Path) -> None:
    (tmp_path / "figs").mkdir()
    data = png_bytes()
    (tmp_path / "figs" / "a.png").write_bytes(data)
    items = load_items(write_items(tmp_path / "items.jsonl", [item(["figs/a.png"], images=[data_uri(data)])]))
    drawn = items[0].responses[0].images
    assert len(drawn) == 1 and (drawn[0].width, drawn[0].height) == (8, 8) and drawn[0].data == data
    assert drawn[0].media_type == "image/png" and drawn[0].digest.startswith("sha256:")
    assert items[0].images[0] == drawn[0]  # the same bytes: the same image, wherever it came from
    assert items[0].has_images and "images" not in items[0].fields


def test_a_url_is_kept_for_the_server_and_the_service_takes_data_uris_only(tmp_path: Path) -> None:
    url = load_image("https://example.org/plot.png", "images[0]")
    assert url.url == "https://example.org/plot.png" and url.data is None and url.digest.startswith("url:")
    with pytest.raises(InputError, match="data: URIs only"):
        items_from_dicts([item(["figs/a.png"])], source="request", sources="data")
    ok = items_from_dicts([item([data_uri(png_bytes())])], source="request", sources="data")
    assert ok[0].responses[0].images[0].width == 8


def _bomb() -> bytes:
    buf = io.BytesIO()
    PILImage.new("1", (9000, 9000)).save(buf, "PNG")  # 81 M pixels in a few kilobytes
    return buf.getvalue()


@pytest.mark.parametrize("kind, message", [
    ("missing", "not found"),
    ("text", "not an image"),
    ("corrupt", "corrupt"),
    ("tiff", "is TIFF, not one of"),
    ("bomb", "decompression bomb"),
    ("big", r"bytes \(limit"),
])
def test_a_bad_image_is_refused_naming_file_line_and_field_and_nothing_is_judged(
        kind: str, message: str, tmp_path: Path, judge_mock: MockBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.png"
    if kind == "text":
        bad.write_text("this is not a picture")
    elif kind == "corrupt":
        bad.write_bytes(png_bytes(size=(64, 64))[:-40])
    elif kind == "tiff":
        buf = io.BytesIO()
        PILImage.new("RGB", (4, 4)).save(buf, "TIFF")
        bad.write_bytes(buf.getvalue())
    elif kind == "bomb":
        bad.write_bytes(_bomb())
    elif kind == "big":
        monkeypatch.setattr("trustjudge._images.MAX_IMAGE_BYTES", 100)
        bad.write_bytes(png_bytes(size=(64, 64)))
    good = tmp_path / "good.png"
    good.write_bytes(png_bytes())
    rows = [{"id": "q0", "question": "Q?", "responses": [{"id": "a", "text": "fine"}]},
            item(["good.png", "bad.png"])]
    path = write_items(tmp_path / "items.jsonl", rows)
    with pytest.raises(InputError, match=message) as caught:
        load_items(path)
    assert caught.value.file == str(path) and caught.value.line == 2
    assert caught.value.field == "responses[0].images[1]"
    from click.testing import CliRunner

    from trustjudge.cli import cli

    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(cli, ["score", str(path), "--judge", "mock/vision-test", "--store",
                                      str(tmp_path / "s.sqlite"), "--out", str(out)])
    assert result.exit_code != 0 and f"{path}:2" in result.output and "responses[0].images[1]" in result.output
    assert judge_mock.calls == 0


def test_a_bomb_in_a_data_uri_is_refused_before_decoding() -> None:
    with pytest.raises(InputError, match="decompression bomb") as caught:
        items_from_dicts([item([data_uri(_bomb())])], source="request", sources="data")
    assert caught.value.line == 1 and caught.value.field == "responses[0].images[0]"


# -- store keys and prompts --------------------------------------------------------------------------
def test_one_changed_pixel_is_a_new_judgment_and_an_unchanged_image_a_store_hit(
        tmp_path: Path, judge_mock: MockBackend) -> None:
    fig = tmp_path / "fig.png"
    fig.write_bytes(png_bytes())
    path = write_items(tmp_path / "items.jsonl", [item(["fig.png"])])
    store = tmp_path / "s.sqlite"

    def run() -> list[Any]:
        with Judge("mock/vision-test", store=store) as j:
            return list(j.score(load_items(path)))

    first = run()
    assert judge_mock.calls == 2 and all(r.unscored is None for r in first)  # the image-only response is judged
    run()
    assert judge_mock.calls == 2  # unchanged: from the store
    fig.write_bytes(png_bytes(pixel=(3, 4)))  # one pixel
    changed = run()
    assert judge_mock.calls == 4
    assert [r.scores for r in changed] != [r.scores for r in first]  # mock/hash-like scripts see the new prompt


def test_templates_place_each_image_where_its_field_is_and_a_text_item_prompt_is_unchanged(
        tmp_path: Path, judge_mock: MockBackend) -> None:
    q, ref, a, b = (data_uri(png_bytes(c)) for c in ((1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 4)))
    rows = [{"id": "q1", "question": "Draw it.", "images": [q], "reference": "like this", "reference_images": [ref],
             "responses": [{"id": "a", "text": "mine", "images": [a]}, {"id": "b", "text": "other", "images": [b]}]}]
    items = items_from_dicts(rows)
    digests = {name: load_image(uri, "x").digest for name, uri in (("q", q), ("ref", ref), ("a", a), ("b", b))}
    with Judge("mock/vision-test", store=tmp_path / "s.sqlite") as j:
        list(j.score(items))
        list(j.compare(items))
    prompts = [r.prompt for r in judge_mock.history if isinstance(r, LabelRequest)]
    score_a, _, ab, ba = prompts
    order = [m.group(1) for m in MARKER.finditer(score_a)]
    assert order == [digests["q"], digests["ref"], digests["a"]]
    assert score_a.index("<question>") < score_a.index(digests["q"]) < score_a.index("</question>")
    assert score_a.index("<reference_image>") < score_a.index(digests["ref"])
    assert score_a.index("\n<response>\n") < score_a.index(digests["a"]) < score_a.index("\n</response>")
    # compare, both orders: the image of the response shown as A sits in <response_a>
    for prompt, first, second in ((ab, "a", "b"), (ba, "b", "a")):
        assert prompt.index("\n<response_a>\n") < prompt.index(digests[first]) < prompt.index("\n</response_a>")
        assert prompt.index("\n<response_b>\n") < prompt.index(digests[second]) < prompt.index("\n</response_b>")
    parts = split(score_a)
    assert [p.digest for p in parts if isinstance(p, Image)] == order
    # the same item without images: no marker, and the prompt is the template's text as before images existed
    judge_mock.history.clear()
    plain = items_from_dicts([{"id": "q1", "question": "Draw it.", "responses": [{"id": "a", "text": "mine"}]}])
    with Judge("mock/vision-test", store=tmp_path / "s.sqlite") as j:
        list(j.score(plain))
    text = judge_mock.history[0].prompt
    assert "\ue000" not in text and "<question>\nDraw it.\n</question>\n\n<response>\nmine\n</response>" in text


def test_a_user_template_without_the_image_field_is_refused(tmp_path: Path, judge_mock: MockBackend) -> None:
    template = tmp_path / "t.txt"
    template.write_text("Q: ${question}\nA: ${response}\n${task}")
    items = items_from_dicts([item([data_uri(png_bytes())])])
    with Judge("mock/vision-test", store=tmp_path / "s.sqlite", templates={"pointwise": str(template)}) as j, \
            pytest.raises(ConfigError, match=r"\$\{response_images\}"):
        list(j.score(items))
    assert judge_mock.calls == 0


def test_criteria_and_checklist_judgments_carry_the_response_images(tmp_path: Path, judge_mock: MockBackend) -> None:
    image = data_uri(png_bytes())
    rows = [{"id": "q1", "question": "Plot it.", "criteria": [{"name": "clarity", "description": "Readable."}],
             "checklist": ["Is there a legend?"], "responses": [{"id": "a", "text": "", "images": [image]}]}]
    items = items_from_dicts(rows)
    digest = load_image(image, "x").digest
    with Judge("mock/vision-test", store=tmp_path / "s.sqlite") as j:
        crit = list(j.criteria(items))
        checks = list(j.checklist(items))
    assert crit[0].unscored is None and checks[0].unscored is None
    prompts = [r.prompt for r in judge_mock.history if isinstance(r, LabelRequest)]
    assert len(prompts) == 2 and all(digest in p for p in prompts)


def test_a_text_only_judge_given_an_image_refuses_before_any_call_naming_judge_and_item(tmp_path: Path) -> None:
    backend = MockBackend("text", accepts_images=False)
    register_mock("text-only-test", backend)
    try:
        items = items_from_dicts([{"id": "plain", "question": "Q?", "responses": [{"id": "a", "text": "t"}]},
                                  {**item([data_uri(png_bytes())]), "id": "pictured"}])
        with Judge("mock/text-only-test", store=tmp_path / "s.sqlite") as j, pytest.raises(ConfigError) as caught:
            list(j.score(items))
        assert "mock/text-only-test" in str(caught.value) and "'pictured'" in str(caught.value)
        assert backend.calls == 0
    finally:
        register_mock("text-only-test", None)


# -- the OpenAI-compatible chat path -----------------------------------------------------------------
@pytest.mark.slow
def test_images_reach_a_chat_server_as_data_uri_content_parts_and_labels_are_read(tmp_path: Path) -> None:
    data = png_bytes((10, 200, 10))
    (tmp_path / "fig.png").write_bytes(data)
    path = write_items(tmp_path / "items.jsonl", [item(["fig.png"])])
    store = tmp_path / "s.sqlite"
    with chat_only_server() as server:
        with Judge(f"http/fake@{server.url}", store=store, scale=10) as j:
            records = list(j.score(load_items(path)))
        sent = [body for p, body in server.calls if p == "/v1/chat/completions"]
        answers = [body for body in sent if body["messages"][-1]["role"] == "user"]  # not the prefill probes
        assert len(answers) == 2
        user = answers[0]["messages"][-1]
        assert user["role"] == "user" and isinstance(user["content"], list)
        kinds = [part["type"] for part in user["content"]]
        assert kinds.count("image_url") == 1 and kinds[0] == "text"
        url = next(part["image_url"]["url"] for part in user["content"] if part["type"] == "image_url")
        assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == data
        text = "".join(part.get("text", "") for part in user["content"])
        assert "\ue000" not in text and "<response>" in text
        # the scripted answer "Score: [5]" with 6 and 4 beside it: 0.6 / 0.25 / 0.15, read at the label position
        assert all(r.unscored is None and r.label_method == "top_k_first" and r.api == "chat" for r in records)
        assert all(r.scores["expected"] == pytest.approx(5 * 0.6 + 6 * 0.25 + 4 * 0.15) for r in records)
        with Judge(f"http/fake@{server.url}", store=store, scale=10) as j:
            list(j.score(load_items(path)))
        assert len([p for p, _ in server.calls if p == "/v1/chat/completions"]) == len(sent)  # from the store
        # a completions server still gets a prompt with images as chat messages
        from trustjudge.backends._openai import OpenAICompatibleBackend

        backend = OpenAICompatibleBackend("fake", server.url, api="completions")
        prompt = backend.format_prompt("S", "look:" + split_marker(load_items(path)[0].responses[0].images[0]),
                                       "Score: [")
        assert prompt.startswith("trustjudge-chat-v1:")


def split_marker(image: Image) -> str:
    from trustjudge._images import marker

    return marker(image)


def test_the_service_takes_images_as_data_uris_and_refuses_a_server_path(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trustjudge.serve import create_app

    uri = data_uri(png_bytes())
    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite", max_body_bytes=len(uri) * 3)
    with TestClient(app) as c:
        ok = c.post("/v1/score", json={"items": [{"id": "q", "question": "Q?", "images": [uri],
                                                   "responses": [{"id": "a", "text": "", "images": [uri]}]}]})
        assert ok.status_code == 200 and ok.json()["records"][0]["unscored"] is None
        (tmp_path / "secret.png").write_bytes(png_bytes())
        path = c.post("/v1/score", json={"items": [{"id": "q", "question": "Q?", "responses": [
            {"id": "a", "text": "x", "images": [str(tmp_path / "secret.png")]}]}]})
        assert path.status_code == 422 and "data: URIs only" in path.text
        assert path.json()["detail"][0]["field"] == "responses[0].images[0]"
        big = c.post("/v1/score", json={"items": [{"id": "q", "question": "Q?", "responses": [
            {"id": "a", "text": "", "images": [uri] * 4}]}]})
        assert big.status_code == 413  # image bytes count in the body limit


def test_a_plug_in_mode_places_images_with_the_public_mode_api() -> None:
    import trustjudge.mode_api as api

    (parsed,) = items_from_dicts([item([data_uri(png_bytes()), data_uri(png_bytes((1, 2, 3)))])])
    response = parsed.responses[0]
    prompt = "Look at these:" + api.images_block(response.images) + "\nAnswer: ["
    shown = [p for p in split(prompt) if isinstance(p, api.Image)]
    assert shown == list(response.images) and not api.judged_empty(response)
    assert api.pictures(parsed, response).response == response.images


def test_a_response_given_as_turns_carries_its_images(tmp_path: Path, judge_mock: MockBackend) -> None:
    image = data_uri(png_bytes())
    rows = [{"id": "q1", "question": "Plot it.", "responses": [
        {"id": "agent", "turns": [{"role": "user", "content": "plot y=x"}, {"role": "assistant", "content": "done"}],
         "images": [image]}]}]
    (parsed,) = items_from_dicts(rows)
    assert parsed.responses[0].turns is not None and len(parsed.responses[0].images) == 1
    with Judge("mock/vision-test", store=tmp_path / "s.sqlite") as j:
        (record,) = list(j.score([parsed]))
    assert record.unscored is None
    prompt = judge_mock.history[0].prompt
    assert "<turn n=\"2\"" in prompt and load_image(image, "x").digest in prompt
