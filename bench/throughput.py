"""Judging at the speed of the hardware: the engine against plain-torch limits, and at scale.

Parts (all by default; --parts to choose):
- pointwise: direct pointwise 100-point judgments vs (1) every prompt in full and (2) an ideal
  prefix-reuse loop, on exactly the token sequences the engine sends, same process and run.
- pairwise: direct pairwise, both orders, all pairs of 6 responses per question, same limits.
- topical-pointwise, topical-pairwise: the same on real data, Topical-Chat USR dialogues (a long
  shared context, short responses) read from ../shared/data.
- llamacpp-pointwise, llamacpp-pairwise: the llama.cpp backend (llamacpp/smollm2-135m) against the
  same two limits written with plain llama-cpp-python.
- cot: the reference protocol (sampled critique, then the score distribution) vs direct on the same
  items: seconds per judgment and the Spearman correlation of their scores.
- scale: 100k stored judgments (mock judge): re-aggregation time from the store, audit time, and peak
  memory of `trustjudge score` on a 100k-response file vs a 1k one (input and output stream).
Writes bench/results/throughput.{md,json}.

Run: .venv/bin/python bench/throughput.py [--parts pointwise,pairwise,...] [--batch-size N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from scipy.stats import spearmanr

from _common import RESULTS, machine, peak_rss_mb, synthetic_items, write_results
from trustjudge import Judge, items_from_dicts
from trustjudge.audit._audit import audit
from trustjudge.engine._asking import Question


def trie_tokens(backend: Any, labels: tuple[str, ...]) -> list[int]:
    """The label-trie positions the engine reads for ``labels`` (each label with its closing bracket):
    one token per proper prefix of a label's tokens."""
    ids = [tuple(backend._encode_label(lab + "]")) for lab in labels]
    return [node[-1] for node in sorted({seq[:j] for seq in ids for j in range(1, len(seq))})]


def limits(backend: Any, seqs: list[list[int]], tries: list[list[int]],
           full_too: bool = True) -> tuple[float, float, int]:
    """Seconds for (1) every sequence in full and (2) an ideal prefix-reuse loop that also runs the same
    label-trie positions (appended to the prompt's unshared tokens in the same call: the same tokens as the
    engine, without its tree mask), plain torch; and the tokens the reuse loop computed."""
    from transformers import DynamicCache

    model, kw = backend.model, backend._cache_kw
    with torch.inference_mode():
        t0 = time.perf_counter()
        for s in seqs if full_too else []:
            model(torch.tensor([s]), logits_to_keep=1)
        full = time.perf_counter() - t0
        t0 = time.perf_counter()
        prev: list[int] = []
        cache = None
        computed = 0
        for s, trie in sorted(zip(seqs, tries)):
            keep = 0
            if cache is not None:
                while keep < min(len(prev), len(s) - 1) and prev[keep] == s[keep]:
                    keep += 1
            if cache is None or keep == 0:
                cache, keep = DynamicCache(), 0
            elif cache.get_seq_length() > keep:
                cache.crop(keep - cache.get_seq_length())
            run = s[keep:] + trie
            computed += len(run)
            model(torch.tensor([run]), position_ids=torch.arange(keep, keep + len(run)).unsqueeze(0),
                  use_cache=True, logits_to_keep=len(trie) + 1, **{kw: cache})
            if trie:
                cache.crop(len(s) - cache.get_seq_length())
            prev = s
        reuse = time.perf_counter() - t0
    return full, reuse, computed


def llamacpp_limits(backend: Any, seqs: list[list[int]], tries: list[list[int]],
                    full_too: bool = True) -> tuple[float, float, int]:
    """The same two limits with plain llama-cpp-python on the backend's ``Llama`` (no engine): limit (2)
    evaluates each prompt's unshared tokens and the same label-trie positions (one sequence, causal mask),
    with logits at the last prompt token and at every trie position, as the torch limit keeps them
    (``Llama.eval`` would compute none there: an output layer fewer than reading labels needs)."""
    import llama_cpp

    llm = backend._llm
    backend.reset_cache()
    t0 = time.perf_counter()
    for s in seqs if full_too else []:
        llm.reset()
        llm.eval(s)
    full = time.perf_counter() - t0
    llm.reset()
    ctx, n_batch = llm._ctx.ctx, llm.n_batch
    mem = llama_cpp.llama_get_memory(ctx)
    batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
    try:
        t0 = time.perf_counter()
        prev: list[int] = []
        computed = 0
        for s, trie in sorted(zip(seqs, tries)):
            keep = 0
            while keep < min(len(prev), len(s) - 1) and prev[keep] == s[keep]:
                keep += 1
            llama_cpp.llama_memory_seq_rm(mem, -1, keep, -1)
            run = s[keep:] + trie
            first_read = len(s) - 1 - keep  # the last prompt token, then the trie
            for start in range(0, len(run), n_batch):
                chunk = run[start:start + n_batch]
                for i, token in enumerate(chunk):
                    batch.token[i] = token
                    batch.pos[i] = keep + start + i
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = 0
                    batch.logits[i] = start + i >= first_read
                batch.n_tokens = len(chunk)
                if llama_cpp.llama_decode(ctx, batch) != 0:
                    raise RuntimeError("llama_decode failed in the limit loop")
            llama_cpp.llama_memory_seq_rm(mem, -1, len(s), -1)  # drop the trie: the next prompt reuses s
            computed += len(run)
            prev = s
        reuse = time.perf_counter() - t0
    finally:
        llama_cpp.llama_batch_free(batch)
    llm.reset()
    backend.reset_cache()
    return full, reuse, computed


def engine_vs_limits(judge_name: str, rows: list[dict[str, Any]], kind: str, tmp: Path,
                     options: dict[str, Any], repeats: int = 1) -> dict[str, Any]:
    """Engine and both limits on one workload, ``repeats`` times interleaved (engine, limits, engine, ...):
    each side's best time counts. On a shared machine the speed drifts between minutes (the same llama.cpp
    workload took 35 s in one run and 55 s in another); interleaving exposes both sides to the same drift,
    and the best of each side is the least disturbed run. Every repeat's ratio is recorded too."""
    items = items_from_dicts(rows)
    judge = Judge(judge_name, store=tmp / f"{kind}.sqlite", scale=100, **options)
    backend = judge.backend
    task = judge.score_task() if kind == "pointwise" else judge.compare_task()
    jobs = [q for item in items for q in task.questions(item, backend.format_prompt) if isinstance(q, Question)]
    seqs = [backend._encode(job.prompt) for job in jobs]  # type: ignore[attr-defined]
    tries = [trie_tokens(backend, job.labels) for job in jobs]
    tokens = sum(map(len, seqs))
    warm = Judge(backend, store=tmp / "warm.sqlite")
    list(warm.score(items_from_dicts(synthetic_items(1, 2, 20, seed=7))))
    llama = judge_name.startswith("llamacpp/")
    engines: list[float] = []
    reuses: list[float] = []
    for rep in range(repeats):
        fresh = judge if rep == 0 else Judge(backend, store=tmp / f"{kind}-{rep}.sqlite", scale=100, **options)
        # Every run starts from an empty KV cache, as the limits do: otherwise a run would reuse the prefix
        # the previous run (or the warm-up) left cached (on Topical-Chat the shared dialogue: half the tokens).
        backend.reset_cache()
        before = getattr(backend, "computed_tokens", 0)
        t0 = time.perf_counter()
        records = list(fresh.score(items) if kind == "pointwise" else fresh.compare(items))
        engines.append(time.perf_counter() - t0)
        assert all(r.unscored is None for r in records)
        assert fresh.stats.model_calls > 0
        computed = backend.computed_tokens - before
        # limit (1) is far from the engine either way: measured on the first repeat only
        limit1, reuse, reuse_tokens = (llamacpp_limits if llama else limits)(backend, seqs, tries, rep == 0)
        reuses.append(reuse)
        if rep == 0:
            full, first = limit1, records
    records = first
    engine, reuse = min(engines), min(reuses)
    out: dict[str, Any] = {"engine_computed_tokens": computed, "repeats": repeats,
                           "repeat_vs_limit2": [b / a for a, b in zip(engines, reuses)],
                           "engine_s_each": engines, "limit2_s_each": reuses}
    if kind == "pointwise" and not llama:  # the opt-in closing="needed": fewer label reads, not exact; what it trades
        fast = Judge(backend, store=tmp / f"{kind}-needed.sqlite", scale=100, closing="needed", **options)
        before = backend.computed_tokens
        t0 = time.perf_counter()
        fast_records = list(fast.score(items))
        out.update(needed_s=time.perf_counter() - t0, needed_computed_tokens=backend.computed_tokens - before)
        a = [r.scores["trustjudge"] for r in records]
        b = [r.scores["trustjudge"] for r in fast_records]
        diffs = [abs(x - y) for x, y in zip(a, b)]
        out.update(needed_mean_abs_diff=sum(diffs) / len(diffs), needed_max_abs_diff=max(diffs),
                   needed_spearman=float(spearmanr(a, b)[0]))
    out.update(judgments=len(seqs), prompt_tokens=tokens, limit2_computed_tokens=reuse_tokens, engine_s=engine,
               limit1_s=full, limit2_s=reuse, engine_tok_s=tokens / engine, limit1_tok_s=tokens / full,
               limit2_tok_s=tokens / reuse, vs_limit1=full / engine, vs_limit2=reuse / engine)
    if "needed_s" in out:
        out.update(needed_vs_limit1=full / out["needed_s"], needed_vs_limit2=reuse / out["needed_s"])
    return out


def cot_vs_direct(judge_name: str, rows: list[dict[str, Any]], tmp: Path) -> dict[str, Any]:
    items = items_from_dicts(rows)
    out: dict[str, Any] = {}
    scores: dict[str, list[float]] = {}
    for protocol, temperature in (("direct", 0.0), ("cot", 1.0)):
        judge = Judge(judge_name, store=tmp / f"cot-{protocol}.sqlite", protocol=protocol,  # type: ignore[arg-type]
                      scale=100, temperature=temperature, seed=0, max_new_tokens=128)
        t0 = time.perf_counter()
        records = list(judge.score(items))
        elapsed = time.perf_counter() - t0
        out[f"{protocol}_s_per_judgment"] = elapsed / len(records)
        out[f"{protocol}_unscored"] = sum(r.unscored is not None for r in records)
        scores[protocol] = [r.scores["trustjudge"] if r.scores["trustjudge"] is not None else float("nan")
                            for r in records]
    pairs = [(a, b) for a, b in zip(scores["direct"], scores["cot"]) if a == a and b == b]
    out["spearman_direct_vs_cot"] = float(spearmanr([a for a, _ in pairs], [b for _, b in pairs])[0]) \
        if len(pairs) > 2 else float("nan")
    out["cot_over_direct"] = out["cot_s_per_judgment"] / out["direct_s_per_judgment"]
    out["judgments"] = len(scores["direct"])
    return out


def scale_part(tmp: Path, n: int) -> dict[str, Any]:
    res: dict[str, Any] = {"responses": n}
    rows = [{"id": f"q{i}", "question": f"Question {i}?",
             "responses": [{"id": f"r{k}", "text": f"answer {i}-{k}", "human_score": (i * 7 + k) % 5 + 1}
                           for k in range(5)]} for i in range(n // 5)]
    big, small = tmp / "big.jsonl", tmp / "small.jsonl"
    big.write_text("".join(json.dumps(r) + "\n" for r in rows))
    small.write_text("".join(json.dumps(r) + "\n" for r in rows[: 1000 // 5]))
    cli = [sys.executable, "-m", "trustjudge.cli"]
    store = tmp / "scale.sqlite"
    rss_small, _t_small = peak_rss_mb([*cli, "score", str(small), "--judge", "mock/hash", "--store",
                                      str(tmp / "small.sqlite"), "-q", "--out", str(tmp / "small.out")])
    rss_big, t_big = peak_rss_mb([*cli, "score", str(big), "--judge", "mock/hash", "--store", str(store), "-q",
                                  "--out", str(tmp / "big.out")])
    res.update(peak_rss_1k_mb=rss_small, peak_rss_100k_mb=rss_big, rss_ratio=rss_big / rss_small,
               first_run_100k_s=t_big)
    # Pairwise judgments to audit: 2 pairs per question in both orders on top of the pointwise ones.
    items = items_from_dicts(rows)
    judge = Judge("mock/hash", store=store, scale=100)
    t0 = time.perf_counter()
    scores = [r.to_dict() for r in judge.score(items)]
    res["reaggregate_100k_scores_s"] = time.perf_counter() - t0
    assert judge.stats.model_calls == 0
    pair_rows = [dict(r, pairs=[{"first": "r0", "second": "r1"}, {"first": "r1", "second": "r2"},
                                {"first": "r0", "second": "r2"}]) for r in rows]
    pitems = items_from_dicts(pair_rows)
    list(Judge("mock/hash", store=store).compare(pitems))  # store them (mock calls, not timed)
    j2 = Judge("mock/hash", store=store)
    t0 = time.perf_counter()
    pairs = [r.to_dict() for r in j2.compare(pitems)]
    res["reaggregate_pairs"] = len(pairs)
    res["reaggregate_pairs_s"] = time.perf_counter() - t0
    assert j2.stats.model_calls == 0
    t0 = time.perf_counter()
    audit({100: scores}, pairs, bootstrap=1000)
    res["audit_s"] = time.perf_counter() - t0
    res["stored_judgments"] = len(scores) + 2 * len(pairs)
    return res


TOPICAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "topical-chat-usr" / "topical_chat.json"
# workload: (kind, description, rows) for the small judges, and a smaller version for 1.5B judges (tens of
# prompt tokens/s here). Every workload runs under every judge of --judges.
WORKLOADS = {
    "pointwise": ("pointwise", "synthetic: {q} questions x 5 responses of ~190 words",
                  lambda big: synthetic_items(1 if big else 4, 5, 190)),
    "pairwise": ("pairwise", "synthetic: 1 question x {r} responses of ~90 words, all ordered pairs",
                 lambda big: synthetic_items(1, 3 if big else 6, 90, seed=3)),
    "topical-pointwise": ("pointwise", "Topical-Chat USR (real): {q} dialogues (~350-token context) x 6 responses "
                          "(~27 tokens)", lambda big: topical(1 if big else 4)),
    "topical-pairwise": ("pairwise", "Topical-Chat USR (real): 1 dialogue x {r} responses, all ordered pairs",
                         lambda big: topical(1, 3 if big else 6)),
}
JUDGES = ("llamacpp/qwen2.5-coder-1.5b", "hf/qwen2.5-coder-1.5b", "llamacpp/smollm2-135m", "hf/smollm2-135m")


def is_big(judge: str) -> bool:
    return "1.5b" in judge


def topical(n: int, responses: int = 6) -> list[dict[str, Any]]:
    """The first ``n`` Topical-Chat USR dialogues with their first responses (from ../shared/data)."""
    from trustjudge.io._adapters import iter_dataset

    items = [v for v in iter_dataset(TOPICAL) if not isinstance(v, Exception)][:n]
    return [{"id": i.id, "question": i.question, "context": i.context,
             "responses": [{"id": r.id, "text": r.text} for r in i.responses[:responses]]} for i in items]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--judge", default="llamacpp/qwen2.5-coder-1.5b", help="the judge of the cot part")
    ap.add_argument("--judges", default=",".join(JUDGES), help="the judges every workload runs under")
    ap.add_argument("--parts", default=",".join([*WORKLOADS, "cot", "scale"]))
    ap.add_argument("--scale-n", type=int, default=100_000)
    ap.add_argument("--batch-size", type=int, help="the engine's batch size (default: Judge's default)")
    ap.add_argument("--repeats", type=int, default=2,
                    help="engine and limits run this many times, interleaved; each side's best time counts")
    args = ap.parse_args()
    parts = args.parts.split(",")
    # A run of some parts keeps the other parts' earlier numbers (each part records when it was measured).
    previous = RESULTS / "throughput.json"
    results: dict[str, Any] = json.loads(previous.read_text()) if previous.exists() else {}
    for old in ("judge", "pointwise", "pairwise", "topical-pointwise", "topical-pairwise", "llamacpp-pointwise",
                "llamacpp-pairwise"):  # the layout before every workload ran under several judges
        results.pop(old, None)
    results.update(machine=machine())
    stamp = {"measured": time.strftime("%Y-%m-%d %H:%M"), "commit": results["machine"]["commit"],
             "load_1min_before": os.getloadavg()[0]}
    options = {} if args.batch_size is None else {"batch_size": args.batch_size}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for judge in args.judges.split(","):
            for part in (p for p in WORKLOADS if p in parts):
                kind, _, rows = WORKLOADS[part]
                items = rows(is_big(judge))
                key = f"{part} [{judge}]"
                results[key] = engine_vs_limits(judge, items, kind, tmp, options, args.repeats)
                results[key].update(part=part, judge=judge, questions=len(items),
                                    responses=len(items[0]["responses"]),
                                    run=dict(stamp, load_1min_after=os.getloadavg()[0]))
                print(key, results[key], flush=True)
                write_results("throughput", results, markdown(results))  # a killed run keeps what it measured
        if "cot" in parts:
            results["cot"] = cot_vs_direct(args.judge, synthetic_items(1 if is_big(args.judge) else 4, 5, 80, seed=5),
                                           tmp)
            results["cot"]["judge"] = args.judge
            results["cot"]["run"] = dict(stamp, load_1min_after=os.getloadavg()[0])
            print("cot", results["cot"], flush=True)
        if "scale" in parts:
            results["scale"] = scale_part(tmp, args.scale_n)
            results["scale"]["run"] = dict(stamp, load_1min_after=os.getloadavg()[0])
            print("scale", results["scale"], flush=True)
    write_results("throughput", results, markdown(results))
    print(markdown(results))


def when(p: dict[str, Any]) -> str:
    run = p.get("run")
    if not run:
        return ""
    return (f"_Measured {run['measured']} at commit {run['commit']}; 1-minute load average "
            f"{run['load_1min_before']:.1f} "
            f"before, {run['load_1min_after']:.1f} after (2 cores)._")


def repeats(p: dict[str, Any]) -> str:
    if p.get("repeats", 1) < 2:
        return "- one run of each side"
    each = ", ".join(f"{x:.2f}x" for x in p["repeat_vs_limit2"])
    engine = ", ".join(f"{x:.1f}" for x in p["engine_s_each"])
    limit = ", ".join(f"{x:.1f}" for x in p["limit2_s_each"])
    return (f"- best of {p['repeats']} interleaved runs of each side; each run's engine / limit (2): {each} "
            f"(engine {engine} s, limit (2) {limit} s)")


def markdown(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = ["# Throughput (bench/throughput.py)", "",
             f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']} ({m['torch_threads']} threads), "
             f"commit {m['commit']}. Ratios are measured in one run, same process; rows with repeats run the engine "
             "and "
             "both limits interleaved (engine, limits, engine, limits) and compare each side's best time, because "
             "this shared machine's speed drifts by up to 1.5x between minutes. Every engine run starts from an empty "
             "KV cache, as the limits do (since commit 68f06b2; before, the first run found up to 125 of its "
             "prompts' tokens left cached by the warm-up). Limit (2) is the ideal prefix-reuse "
             "loop that also runs the same label-trie positions (each prompt's unshared tokens plus the trie's "
             "tokens, with logits at the last prompt token and every trie position, in plain torch / plain "
             "llama-cpp-python: no engine, no store). llama.cpp judges run one thread per physical core "
             "(the backend's default since session 19; rows measured before it ran 1 thread).", ""]
    for p in r.values():
        if not isinstance(p, dict) or p.get("part") not in WORKLOADS:
            continue
        kind, workload, _ = WORKLOADS[p["part"]]
        workload = f"`{p['judge']}`, " + workload.format(q=p["questions"], r=p["responses"])
        target2 = 0.9
        computed = ""
        if "engine_computed_tokens" in p:
            computed = (f"- tokens run through the model: engine {p['engine_computed_tokens']:,} (label-trie nodes and "
                        f"padding included), ideal reuse loop {p['limit2_computed_tokens']:,} (the same trie "
                        "positions), "
                        f"every prompt in full {p['prompt_tokens']:,}")
        per = p['prompt_tokens'] / p['judgments']
        lines += [f"## Direct {kind}, {workload} ({p['judgments']} judgments, {per:.0f} "
                  "prompt tokens each)", "", when(p), "",
                  "| what | prompt tokens/s |", "|---|---|",
                  f"| engine (store + label trie + KV reuse) | {p['engine_tok_s']:,.0f} |",
                  f"| limit (1): every prompt in full | {p['limit1_tok_s']:,.0f} |",
                  f"| limit (2): ideal prefix reuse | {p['limit2_tok_s']:,.0f} |", "",
                  f"- engine / limit (1) = **{p['vs_limit1']:.2f}x**",
                  f"- engine / limit (2) = **{p['vs_limit2']:.2f}x** (target >= {target2}x: "
                  f"{'met' if p['vs_limit2'] >= target2 else 'not met'})", computed, repeats(p), ""]
        if "needed_s" in p:
            lines[-1:-1] = [
                f"- opt-in `closing=\"needed\"` (10 label-trie nodes instead of 100, not exact): "
                f"**{p['needed_vs_limit1']:.2f}x** limit (1), **{p['needed_vs_limit2']:.2f}x** limit (2), "
                f"{p['needed_computed_tokens']:,} tokens run; its trustjudge-100 scores differ from the exact ones "
                f"by {p['needed_mean_abs_diff']:.2f} points on average (max {p['needed_max_abs_diff']:.2f}; "
                f"Spearman {p['needed_spearman']:.3f})"]
    if "cot" in r:
        c = r["cot"]
        lines += [f"## Reference protocol (sampled critique, T = 1) vs direct (`{c.get('judge', '')}`)", "",
                  when(c), "",
                  f"- {c['judgments']} pointwise judgments: direct {c['direct_s_per_judgment']:.2f} s/judgment, "
                  f"cot {c['cot_s_per_judgment']:.2f} s/judgment: cot costs **{c['cot_over_direct']:.1f}x**",
                  f"- Spearman of trustjudge-100 scores, direct vs cot: {c['spearman_direct_vs_cot']:.2f}; "
                  f"unscored: direct {c['direct_unscored']}, cot {c['cot_unscored']}", ""]
    if "scale" in r:
        s = r["scale"]
        lines += ["## Scale (mock judge: the engine, store and methods without model time)", "", when(s), "",
                  f"- re-aggregating {s['responses']:,} stored pointwise judgments under every scoring method: "
                  f"{s['reaggregate_100k_scores_s']:.1f} s (target < 5 s: "
                  f"{'met' if s['reaggregate_100k_scores_s'] < 5 else 'not met'})",
                  f"- re-aggregating {s['reaggregate_pairs']:,} stored pairs (both orders) under every aggregation: "
                  f"{s['reaggregate_pairs_s']:.1f} s",
                  f"- audit over {s['stored_judgments']:,} stored judgments: {s['audit_s']:.1f} s (target < 30 s: "
                  f"{'met' if s['audit_s'] < 30 else 'not met'})",
                  f"- peak memory of `trustjudge score`: {s['peak_rss_1k_mb']:.0f} MB on 1k responses, "
                  f"{s['peak_rss_100k_mb']:.0f} MB on {s['responses']:,} (ratio {s['rss_ratio']:.2f}; target <= 1.2: "
                  f"{'met' if s['rss_ratio'] <= 1.2 else 'not met'})", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
