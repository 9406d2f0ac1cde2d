"""What one model call costs on this machine: the profile behind batching prompts as rows.

Times SmolLM2 (transformers, fp32) forward passes of L random tokens (the fixed cost of a call shows
at L = 1: every weight is read once), then five 118-token suffixes after a cached 290-token prefix as
five calls vs one batched call (the engine's pairwise case), and five 350-token ones after 120.

Run: .venv/bin/python bench/call_cost.py    (prints; writes nothing)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from transformers import DynamicCache

from trustjudge.backends import get_backend


def timed(fn: Callable[[], Any], repeat: int = 3) -> float:
    fn()
    began = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - began) / repeat


def main() -> None:
    backend: Any = get_backend("hf/smollm2-135m")
    model, kw = backend.model, backend._cache_kw
    torch.manual_seed(0)
    with torch.inference_mode():
        for n in (1, 10, 50, 100, 200, 400, 800):
            ids = torch.randint(100, 40000, (1, n))
            dt = timed(lambda ids=ids: model(ids, logits_to_keep=1))
            print(f"{n:4d} tokens in one call: {dt * 1000:7.1f} ms ({n / dt:5.0f} tokens/s)")
        for prefix_len, suffix_len in ((290, 118), (120, 350)):
            prefix = torch.randint(100, 40000, (1, prefix_len))
            suffixes = torch.randint(100, 40000, (5, suffix_len))
            pos = torch.arange(prefix_len, prefix_len + suffix_len)[None]

            def prefill(prefix: Any = prefix) -> Any:
                cache = DynamicCache()
                model(prefix, use_cache=True, logits_to_keep=1, **{kw: cache})
                return cache

            def one_by_one(prefix_len: int = prefix_len, suffixes: Any = suffixes, pos: Any = pos) -> None:
                cache = prefill()
                for row in suffixes:
                    if cache.get_seq_length() > prefix_len:
                        cache.crop(prefix_len - cache.get_seq_length())
                    model(row[None], position_ids=pos, use_cache=True, logits_to_keep=1, **{kw: cache})

            def batched(suffixes: Any = suffixes, pos: Any = pos) -> None:
                cache = prefill()
                cache.batch_repeat_interleave(len(suffixes))
                model(suffixes, position_ids=pos.expand(len(suffixes), -1), use_cache=True, logits_to_keep=1,
                      **{kw: cache})

            base = timed(prefill)
            seq, bat = timed(one_by_one) - base, timed(batched) - base
            print(f"5 x {suffix_len} tokens after a cached {prefix_len}: five calls {seq * 1000:.0f} ms, "
                  f"one batched call {bat * 1000:.0f} ms ({seq / bat:.2f}x)")


if __name__ == "__main__":
    main()
