"""The in-process vision judge (``hf/`` with an image-text-to-text model folder), on a tiny LLaVA with random
weights built by the test (``tests/_tiny_vision.py``; nothing downloaded; its verdicts mean nothing).

Checked for real: the chat template places each image, the label log-probabilities are exact (equal to a
brute-force forward pass over prompt + label with the image), the image reaches the model (another image,
another distribution), store keys (a rerun calls nothing), and compare's two orders.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

import torch
from PIL import Image as PILImage

from trustjudge import Judge, items_from_dicts
from trustjudge._images import MARKER, load_image
from trustjudge.backends import LabelRequest, get_backend

from ._tiny_vision import build_tiny_llava

pytestmark = pytest.mark.model


def uri(color: tuple[int, int, int], size: int = 40) -> str:
    im = PILImage.new("RGB", (size, size), color)
    for x in range(0, size, 5):
        im.putpixel((x, x), (255 - color[0], 255 - color[1], 255 - color[2]))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"))


@pytest.fixture(scope="module")
def backend(folder: Path) -> Any:
    return get_backend(f"hf/{folder}")


def brute_force(backend: Any, prompt: str, label: str) -> float:
    """log P(label | prompt) from one plain forward pass over prompt + label, the image attached."""
    enc, _ = backend._inputs(prompt)
    ids = backend.tokenizer(label, add_special_tokens=False).input_ids
    full = torch.cat([enc["input_ids"], torch.tensor([ids])], dim=1)
    with torch.no_grad():
        logits = backend.model(input_ids=full, pixel_values=enc["pixel_values"],
                               attention_mask=torch.ones_like(full)).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    n = enc["input_ids"].shape[1]
    return float(sum(logp[n - 1 + j, t] for j, t in enumerate(ids)))


def test_an_image_text_folder_is_a_vision_judge_and_its_template_keeps_each_image_in_place(backend: Any) -> None:
    from trustjudge.backends._vision import VisionTransformersBackend

    assert isinstance(backend, VisionTransformersBackend) and backend.accepts_images
    image = load_image(uri((200, 0, 0)), "images[0]")
    from trustjudge._images import marker

    prompt = backend.format_prompt("Be strict.", f"Look:{marker(image)}\nRate it.", "Score: [")
    assert prompt.startswith("<|system|>Be strict.") and prompt.endswith("<|assistant|>Score: [")
    assert [m.group(1) for m in MARKER.finditer(prompt)] == [image.digest]
    assert prompt.index("Look:") < prompt.index(image.digest) < prompt.index("Rate it.")
    enc, n = backend._inputs(prompt)
    image_id = backend.tokenizer.convert_tokens_to_ids("<image>")
    assert n == 1 and int((enc["input_ids"] == image_id).sum()) == 16  # 32x32 in 8x8 patches
    assert backend.count_tokens(prompt) == enc["input_ids"].shape[1]


def test_label_log_probabilities_are_exact_and_the_image_reaches_the_model(backend: Any) -> None:
    from trustjudge._images import marker

    red, blue = load_image(uri((220, 10, 10)), "a"), load_image(uri((10, 10, 220)), "b")
    labels = tuple(f"{v}]" for v in range(0, 101, 10))
    results = []
    for image in (red, blue):
        prompt = backend.format_prompt("S", f"Rate the plot 0-100.{marker(image)}", "Score: [")
        (res,) = backend.label_logprobs([LabelRequest(prompt, labels)])
        for label, lp in zip(labels, res.logprobs):
            assert lp == pytest.approx(brute_force(backend, prompt, label), abs=1e-4)
        results.append(res.logprobs)
    assert max(abs(a - b) for a, b in zip(*results)) > 1e-4  # another image, another distribution


def test_score_and_compare_in_both_orders_through_the_store(backend: Any, folder: Path, tmp_path: Path) -> None:
    rows = [{"id": "plot", "question": "Draw a red square.", "reference_images": [uri((255, 0, 0))],
             "responses": [{"id": "a", "text": "", "images": [uri((250, 5, 5))]},
                           {"id": "b", "text": "Here it is.", "images": [uri((5, 5, 250))]}]}]
    items = items_from_dicts(rows)
    store = tmp_path / "s.sqlite"
    with Judge(backend, store=store, scale=10, min_label_mass=1e-9) as j:
        scores = list(j.score(items))
        verdicts = list(j.compare(items))
        calls = j.stats.model_calls
    assert calls == 4 and all(r.unscored is None for r in scores) and verdicts[0].unscored is None
    assert all(r.label_mass is not None and 0 < r.label_mass <= 1 for r in scores)
    orders = verdicts[0].orders
    assert [o["shown_first"] for o in orders] == ["a", "b"]
    assert orders[0]["A"] != orders[1]["A"]  # the images swap with the texts
    with Judge(backend, store=store, scale=10, min_label_mass=1e-9) as j:
        again = list(j.score(items))
        assert j.stats.model_calls == 0
    assert [r.scores for r in again] == [r.scores for r in scores]


def test_a_cot_critique_is_generated_with_the_image(backend: Any, tmp_path: Path) -> None:
    items = items_from_dicts([{"id": "q", "question": "Is it red?",
                               "responses": [{"id": "a", "text": "", "images": [uri((240, 0, 0))]}]}])
    before = backend.images_seen
    with Judge(backend, store=tmp_path / "s.sqlite", scale=5, protocol="cot", max_new_tokens=8,
               min_label_mass=1e-9) as j:
        (record,) = list(j.score(items))
    assert backend.images_seen > before  # the critique was written looking at the image
    assert record.critique is not None if record.unscored is None else record.unscored in ("truncated", "no_label_mass")
