"""The in-process vision judge's time per judgment (hf/ with an image-text-to-text folder).

The judge is the tiny random-weight LLaVA the tests build (tests/_tiny_vision.py: 2 layers of width 32,
16 image tokens per image), so the numbers are the plumbing's cost (image decoding, the processor, the chat
template, one prompt pass and one label pass), not a real model's: ratios within one run say what an image
adds. Rows: the same responses scored on 1-10 and 0-100 with no image, with the response's image, and with
the response's and a reference image; then the 0-100 images run again from the store (no model call).

Run: TRUSTJUDGE_THREADS=1 .venv/bin/python bench/vision.py [--responses 12]
Results: bench/results/vision.{md,json}
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests._tiny_vision import build_tiny_llava

from _common import machine, write_results


def png(seed: int) -> str:
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (96, 96), "white")
    draw = ImageDraw.Draw(im)
    draw.line([(0, 90), (48, 10 + seed % 40), (95, 80)], fill=(seed * 37 % 255, 40, 200), width=3)
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def rows(n: int, images: str) -> list[dict[str, Any]]:
    out = []
    for k in range(n):
        response: dict[str, Any] = {"id": "a", "text": f"Plot {k}: a line through three points."}
        item: dict[str, Any] = {"id": f"q{k}", "question": "Plot a line through (0, 0), (1, 2), (2, 1).",
                                "responses": [response]}
        if images != "none":
            response["images"] = [png(k)]
        if images == "response+reference":
            item["reference_images"] = [png(1000 + k)]
        out.append(item)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--responses", type=int, default=12)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(int(os.environ.get("TRUSTJUDGE_THREADS", "1")))
    from trustjudge import Judge, items_from_dicts
    from trustjudge.backends import get_backend

    table = []
    with tempfile.TemporaryDirectory() as folder:
        model = build_tiny_llava(Path(folder) / "tiny-llava")
        backend = get_backend(f"hf/{model}")
        warm = items_from_dicts(rows(2, "response"))
        with Judge(backend, store=Path(folder) / "warm.sqlite", scale=10, min_label_mass=1e-9) as j:
            list(j.score(warm))  # loads the model
        for scale in ("10", "0-100"):
            for images in ("none", "response", "response+reference"):
                items = items_from_dicts(rows(args.responses, images))
                store = Path(folder) / f"{scale}-{images}.sqlite"
                with Judge(backend, store=store, scale=scale, min_label_mass=1e-9) as j:
                    start = time.perf_counter()
                    records = list(j.score(items))
                    seconds = time.perf_counter() - start
                    calls = j.stats.model_calls
                assert all(r.unscored is None for r in records), [r.unscored for r in records]
                table.append({"scale": scale, "images": images, "judgments": len(records), "model_calls": calls,
                              "seconds": seconds, "ms_per_judgment": 1000 * seconds / len(records)})
        items = items_from_dicts(rows(args.responses, "response"))
        with Judge(backend, store=Path(folder) / "0-100-response.sqlite", scale="0-100", min_label_mass=1e-9) as j:
            start = time.perf_counter()
            records = list(j.score(items))
            seconds = time.perf_counter() - start
            assert j.stats.model_calls == 0
        table.append({"scale": "0-100", "images": "response, from the store", "judgments": len(records),
                      "model_calls": 0, "seconds": seconds, "ms_per_judgment": 1000 * seconds / len(records)})
    base = {r["scale"]: r["ms_per_judgment"] for r in table if r["images"] == "none"}
    for r in table:
        r["vs_text"] = r["ms_per_judgment"] / base[r["scale"]]
    facts = machine()
    lines = ["# Vision judge: time per judgment (bench/vision.py)", "",
             f"Command: `TRUSTJUDGE_THREADS=1 python bench/vision.py --responses {args.responses}`. Machine: {facts}; "
             f"load average {os.getloadavg()[0]:.1f} at the end (2 cores shared with other work). The judge is a "
             "tiny LLaVA with random weights (tests/_tiny_vision.py: 16 image tokens per image), so this is the "
             "plumbing's cost per judgment (decoding the PNG, the processor, the chat template, the passes), not a "
             "real vision model's; `vs text` is the ratio to the same responses scored without an image.", "",
             "| scale | images | judgments | model calls | ms / judgment | vs text |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in table:
        lines.append(f"| {r['scale']} | {r['images']} | {r['judgments']} | {r['model_calls']} | "
                     f"{r['ms_per_judgment']:.1f} | {r['vs_text']:.2f} |")
    write_results("vision", {"machine": facts, "responses": args.responses, "rows": table}, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
