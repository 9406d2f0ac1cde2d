"""Engine speed against the machine's limit on the bundled judge.

50 direct pointwise judgments (100-point scale, ~400-token prompts: 10 questions x 5 responses) through
the full engine (store, trie, KV reuse), then the same token sequences through plain torch:
(1) every prompt computed in full, one after another; (2) a minimal loop with ideal prefix reuse
(the shared part of each question's prompts computed once). Prints and writes bench/results/speed.{json,md}.

Run: .venv/bin/python bench/speed.py [--judge hf/smollm2-135m] [--questions 10] [--per-question 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from _common import machine, synthetic_items, write_results
from trustjudge import Judge, items_from_dicts


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--judge", default="hf/smollm2-135m")
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--per-question", type=int, default=5)
    ap.add_argument("--words", type=int, default=190, help="words per response (~400-token prompts)")
    args = ap.parse_args()
    items = items_from_dicts(synthetic_items(args.questions, args.per_question, args.words))
    with tempfile.TemporaryDirectory() as tmp:
        judge = Judge(args.judge, store=Path(tmp) / "s.sqlite", scale=100)
        backend = judge.backend
        model = backend.model  # type: ignore[attr-defined]
        task = judge.score_task()
        prompts = [q.prompt for item in items for q in task.questions(item, judge.backend.format_prompt)
                   if not isinstance(q, str)]
        seqs = [backend._encode(p) for p in prompts]  # type: ignore[attr-defined]
        tokens = sum(len(s) for s in seqs)
        # warm-up (one judgment on other text) so that no timing includes first-call costs
        list(Judge(backend, store=Path(tmp) / "w.sqlite").score(items_from_dicts(synthetic_items(1, 1, 20, seed=9))))

        t0 = time.perf_counter()
        records = list(judge.score(items))
        engine_s = time.perf_counter() - t0
        assert all(r.unscored is None for r in records), "every judgment must be scored"

        with torch.inference_mode():
            t0 = time.perf_counter()
            for s in seqs:
                model(torch.tensor([s]), logits_to_keep=1)
            full_s = time.perf_counter() - t0

            from transformers import DynamicCache

            kw = backend._cache_kw  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            shared: list[int] = []
            cache = None
            for s in sorted(seqs):
                keep = common_prefix(shared, s) if cache is not None else 0
                keep = min(keep, len(s) - 1)
                if cache is None or keep == 0:
                    cache, keep = DynamicCache(), 0
                elif cache.get_seq_length() > keep:
                    cache.crop(keep - cache.get_seq_length())
                model(torch.tensor([s[keep:]]), position_ids=torch.arange(keep, len(s)).unsqueeze(0),
                      use_cache=True, logits_to_keep=1, **{kw: cache})
                shared = s
            reuse_s = time.perf_counter() - t0

    n = len(seqs)
    res = {
        "judge": args.judge, "judgments": n, "prompt_tokens": tokens, "mean_prompt_tokens": tokens / n,
        "engine_s": engine_s, "engine_judgments_per_s": n / engine_s, "engine_tokens_per_s": tokens / engine_s,
        "limit1_full_tokens_per_s": tokens / full_s, "limit2_prefix_reuse_tokens_per_s": tokens / reuse_s,
        "ratio_engine_vs_limit1": full_s / engine_s, "ratio_engine_vs_limit2": reuse_s / engine_s,
        "machine": machine(),
    }
    lines = [
        "# Engine speed on the bundled judge (bench/speed.py)", "",
        f"Machine: {res['machine']['cpu']}, {res['machine']['cores']} cores, torch {res['machine']['torch']} "
        f"({res['machine']['torch_threads']} threads), commit {res['machine']['commit']}.", "",
        f"{n} direct pointwise judgments, 100-point scale (multi-token labels scored exactly), "
        f"{tokens / n:.0f} prompt tokens on average, judge `{args.judge}`.", "",
        "| what | prompt tokens/s | judgments/s |", "|---|---|---|",
        f"| trustjudge engine (store + trie + KV reuse) | {tokens / engine_s:,.0f} | {n / engine_s:.2f} |",
        f"| limit (1): plain torch, every prompt in full | {tokens / full_s:,.0f} | {n / full_s:.2f} |",
        f"| limit (2): plain torch, ideal prefix reuse | {tokens / reuse_s:,.0f} | {n / reuse_s:.2f} |", "",
        f"Engine / limit (1): **{res['ratio_engine_vs_limit1']:.2f}x**; engine / limit (2): "
        f"**{res['ratio_engine_vs_limit2']:.2f}x** (the limits read no labels at all; the engine also scores "
        "100 labels per prompt through the trie and writes the store).", "",
    ]
    print("\n".join(lines))
    write_results("speed", res, "\n".join(lines))


if __name__ == "__main__":
    main()
