"""The README's command against a llama.cpp server: seconds per judgment, beside the in-process judge (issue 39).

Judges the first ``--items`` questions of examples/items.jsonl (three answers each) three ways with the same GGUF,
each into a fresh store, in one run:

- ``in-process``: ``llamacpp//PATH`` (the in-process llama.cpp backend the README's ``scripts/demo`` uses);
- ``server``: ``llamacpp-server/judge@URL?template=chatml``, the command docs/judges.md gives, with the server's
  defaults detected (exact labels from echoed prompt log-probabilities where the server gives them);
- ``server top-k``: the same with ``labels=top_k`` (the answer's top-20 log-probabilities instead).

The server is llama-cpp-python's (``python -m llama_cpp.server``, started on loopback by
``tests._llama_server.running_server`` with docs/judges.md's flags). Reports seconds per judgment, the ratio to
in-process, the largest difference of an expected score from the in-process one, and the label method each
path used. Writes bench/results/server_path.{json,md} (``--model smollm2``: server_path_smollm2.{json,md}).

Run (nothing else heavy at the same time; ~5 min with the default judge and --items 2):

    .venv/bin/python bench/server_path.py --model qwen --items 2
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests._llama_server

from tests._llama_server import running_server  # noqa: E402

from _common import machine, write_results  # noqa: E402 (after the sys.path set-up)
from trustjudge import Judge, load_items  # noqa: E402
from trustjudge.backends._models import qwen_coder_gguf, smollm2_gguf  # noqa: E402

MODELS = {"qwen": qwen_coder_gguf, "smollm2": smollm2_gguf}


def judged(name: str, judge: str, items: list[Any], store: Path) -> dict[str, Any]:
    """Score ``items`` with ``judge`` into ``store``; seconds, judgments, expected scores and label methods."""
    j = Judge(judge, store=store)
    try:
        start = time.perf_counter()
        records = list(j.score(items))
        took = time.perf_counter() - start
        calls = j.stats.model_calls
    finally:
        j.close()
    scores = {f"{r.item_id}/{r.response_id}": r.scores.get("expected") for r in records}
    methods = sorted({str(r.to_dict().get("label_method")) for r in records})
    print(f"{name}: {len(records)} judgments in {took:.1f} s ({took / max(1, len(records)):.2f} s each), "
          f"{calls} model calls, label methods {methods}", flush=True)
    return {"path": name, "judge": judge, "judgments": len(records), "seconds": took, "model_calls": calls,
            "seconds_per_judgment": took / max(1, len(records)), "label_methods": methods, "scores": scores}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="qwen")
    parser.add_argument("--items", type=int, default=2, help="questions of examples/items.jsonl (3 answers each)")
    parser.add_argument("--no-exact", action="store_true",
                        help="leave out the server's exact path (minutes per judgment on llama-cpp-python's server)")
    args = parser.parse_args()
    gguf = MODELS[args.model]()
    items = load_items(REPO / "examples" / "items.jsonl")[: args.items]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="server-path-") as tmp:
        rows.append(judged("in-process", f"llamacpp//{gguf}", items, Path(tmp) / "a.sqlite"))
        with running_server(gguf, alias="judge", n_ctx=4096) as url:
            base = f"llamacpp-server/judge@{url}?template=chatml"
            if not args.no_exact:
                rows.append(judged("server", base, items, Path(tmp) / "b.sqlite"))
            rows.append(judged("server top-k", f"{base}&labels=top_k", items, Path(tmp) / "c.sqlite"))
    ref = rows[0]
    for row in rows:
        row["ratio_to_in_process"] = row["seconds_per_judgment"] / ref["seconds_per_judgment"]
        diffs = [abs(v - ref["scores"][k]) for k, v in row["scores"].items()
                 if v is not None and ref["scores"].get(k) is not None]
        row["max_abs_score_difference"] = max(diffs) if diffs else None
    name = "server_path" if args.model == "qwen" else f"server_path_{args.model}"
    payload = {"model": args.model, "gguf": gguf.name, "items": args.items, "machine": machine(), "paths": rows}
    lines = [f"# The README's command against a llama.cpp server ({args.model}, {gguf.name})", "",
             f"{rows[0]['judgments']} judgments (the first {args.items} questions of examples/items.jsonl), one run, "
             f"{payload['machine'].get('cores')} cores. Rebuild: `.venv/bin/python bench/server_path.py --model "
             f"{args.model} --items {args.items}{' --no-exact' if args.no_exact else ''}`.", "",
             "| path | judge | s per judgment | x in-process | max abs score diff | label method |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        diff = row["max_abs_score_difference"]
        judge = "llamacpp//MODEL.gguf" if row["path"] == "in-process" else row["judge"].split("@")[0]
        lines.append(f"| {row['path']} | `{judge}` | {row['seconds_per_judgment']:.2f} | "
                     f"{row['ratio_to_in_process']:.2f} | {'-' if diff is None else f'{diff:.4f}'} | "
                     f"{', '.join(row['label_methods'])} |")
    write_results(name, payload, "\n".join(lines) + "\n")
    print("\n".join(lines))
    print(json.dumps({r["path"]: round(r["seconds_per_judgment"], 2) for r in rows}))


if __name__ == "__main__":
    main()
