"""Time estimates against real times, for every bundled judge (issue: honest `--dry-run` estimates).

Two phases per judge, each in its own child process (one model in memory at a time):

- fit: judge synthetic items of three prompt lengths (score, direct) in an empty store, and fit
  ``seconds = seconds_per_call * calls + prompt_tokens / prompt_tokens_per_s`` to the three timed runs by
  non-negative least squares (scipy). The fitted figures are written into
  ``src/trustjudge/backends/_speeds.py`` (the table the package ships).
- check: in a fresh child (which reads the table just written), for each workload of the README and a
  long-prompt dataset (QAGS CNN/DM articles as checklists), in an empty store: the plan's estimate
  (``Judge.plan``, what ``--dry-run`` prints) from the shipped figure, then the real wall time of the run.
  A second estimate from the store's own measurement (what a user's next command sees) is kept beside it.

Model loading is excluded from both sides (each child loads the judge first and warms it on a few batches
in a throwaway store): the estimate is of judging time. Each timed run is repeated (``REPEATS``) and the
fastest counts, on both sides.

    .venv/bin/python bench/estimates.py                 # all six bundled judges (~20 min here)
    .venv/bin/python bench/estimates.py --judges llamacpp/smollm2-135m,hf/smollm2-135m

Writes bench/results/estimates.{json,md}. Target: every ratio real / estimate within [1/1.5, 1.5].
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import fmt, machine, synthetic_items, write_results

ROOT = Path(__file__).resolve().parents[1]
SPEEDS = ROOT / "src" / "trustjudge" / "backends" / "_speeds.py"
DATA = ROOT.parent / "shared" / "data"
JUDGES = ("llamacpp/qwen2.5-coder-1.5b", "hf/qwen2.5-coder-1.5b", "llamacpp/smollm2-135m", "hf/smollm2-135m",
          "llamacpp/gemma3-270m", "hf/gemma3-270m")
FIT = (("short", 2, 3, 20), ("medium", 2, 2, 150), ("long", 1, 3, 450))
"""(name, questions, responses per question, words per response) of the synthetic fit workloads."""
TARGET = 1.5
REPEATS = 2
"""Each timed workload runs this many times (each in an empty store); the fastest counts: this machine is
shared, and a burst of other work inflates one run, never all of them."""


def _items(rows: list[dict[str, Any]]) -> list[Any]:
    from trustjudge.io._items import parse_record

    return [parse_record(r, "synthetic", i + 1) for i, r in enumerate(rows)]


def _warm(judge_name: str) -> tuple[Any, float]:
    """The backend, loaded and warmed on batches like the timed ones (scores and pairs, short and long) in a
    throwaway store: a fresh process's first batches run slower (buffers sized, shapes seen), which would
    otherwise count against whichever workload runs first. Also the seconds that took."""
    from trustjudge import Judge

    t0 = time.perf_counter()
    j = Judge(judge_name, store=":memory:")
    for words in (10, 200):
        items = _items(synthetic_items(1, 3, words, seed=99 + words))
        list(j.score(items))
        list(j.compare(items[:1]))
    return j.backend, time.perf_counter() - t0


def _evict(backend: Any) -> None:
    """One judgment of an unrelated text in a throwaway store (see :func:`_timed`)."""
    from trustjudge import Judge

    j = Judge(backend, store=":memory:")
    list(j.score(_items([{"id": "evict", "question": "Name a colour of the sky at noon.",
                          "responses": [{"id": "e", "text": "Blue, mostly, on a clear day."}]}])))
    j.store.close()


def _timed(judge_name: str, backend: Any, store: Path, task_of: Any, items: list[Any]) -> dict[str, Any]:
    """Plan then run one workload in ``store``; the plan's estimate and the real seconds."""
    from trustjudge import Judge
    from trustjudge.backends._speeds import shipped

    reals = []
    for repeat in range(REPEATS):
        # The backend keeps the last prompt's KV cache: a repeat would reuse what the run before it left
        # there (a whole article, for QAGS). An unrelated judgment first puts the cache where a fresh
        # command's would be: holding nothing of these prompts.
        _evict(backend)
        # Each repeat in an empty store of its own (the first one's is ``store``): the same calls each time.
        j = Judge(backend, store=store if repeat == 0 else store.with_name(f"{store.stem}-{repeat}.sqlite"))
        j.engine.speed_hint = shipped(judge_name)
        task = task_of(j)
        plan = j.plan(items, task)
        t0 = time.perf_counter()
        n = sum(1 for _ in j.run(task, items))
        reals.append(time.perf_counter() - t0)
        stats = j.stats
        j.store.close()  # not j.close(): that would close the shared backend
    out = {"records": n, "model_calls": stats.model_calls, "plan_calls": plan.model_calls,
           "tokens_read": plan.tokens_read_to_run, "estimate_s": plan.estimated_seconds, "real_s": min(reals),
           "real_runs_s": reals, "speed_from": plan.speed.source, "load_avg": os.getloadavg()[0]}
    return out


def child_fit(judge_name: str) -> dict[str, Any]:
    backend, load_s = _warm(judge_name)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, q, r, words in FIT:
            run = _timed(judge_name, backend, Path(tmp) / f"{name}.sqlite", lambda j: j.score_task(),
                         _items(synthetic_items(q, r, words, seed=7)))
            run["workload"] = name
            runs.append(run)
            print(f"  fit {judge_name} {name}: {run['model_calls']} calls, {run['tokens_read']} tokens, "
                  f"{run['real_s']:.1f} s", flush=True)
    import numpy as np
    from scipy.optimize import nnls

    a = np.array([[r["model_calls"], r["tokens_read"]] for r in runs], dtype=float)
    b = np.array([r["real_s"] for r in runs])
    (per_call, per_token), _ = nnls(a, b)
    if per_token <= 0:  # every cost fixed per call: fall back to the overall rate
        per_token, per_call = float(b.sum() / a[:, 1].sum()), 0.0
    return {"judge": judge_name, "load_s": load_s, "runs": runs, "seconds_per_call": float(per_call),
            "prompt_tokens_per_s": float(1 / per_token)}


def _qags_items(articles: int) -> list[Any]:
    from trustjudge import InputError
    from trustjudge.io._adapters import iter_dataset

    out = []
    for v in iter_dataset(DATA / "qags-cnndm" / "mturk_cnndm.jsonl", "qags"):
        if isinstance(v, InputError):
            continue
        out.append(v)
        if len(out) == articles:
            break
    return out


def child_check(judge_name: str) -> dict[str, Any]:
    from trustjudge import load_items

    backend, load_s = _warm(judge_name)
    examples = load_items(ROOT / "examples" / "items.jsonl")
    workloads: list[tuple[str, Any, list[Any]]] = [
        ("README: score examples/items.jsonl", lambda j: j.score_task(), examples),
        ("README: compare examples/items.jsonl", lambda j: j.compare_task(), examples),
    ]
    if (DATA / "qags-cnndm").exists():
        workloads.append(("QAGS CNN/DM, 1 article (checklist, long prompts)", lambda j: j.checklist_task(),
                          _qags_items(1)))
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        shared = Path(tmp) / "shared.sqlite"  # accumulates: the next workload's estimate is "measured"
        for i, (name, task_of, items) in enumerate(workloads):
            run = _timed(judge_name, backend, Path(tmp) / f"w{i}.sqlite", task_of, items)
            run["workload"] = name
            if i > 0:
                from trustjudge import Judge

                j = Judge(backend, store=shared)
                plan = j.plan(items, task_of(j))
                run["estimate_measured_s"] = plan.estimated_seconds
                run["measured_from"] = plan.speed.source
                j.store.close()
            # Copy this workload's timing into the shared store (as the user's earlier command would leave it).
            from trustjudge.engine._store import Store

            src, dst = Store(Path(tmp) / f"w{i}.sqlite"), Store(shared)
            got = src.measured_speed(backend.fingerprint)
            if got:
                dst.record_speed(backend.fingerprint, got[0], got[1])
            src.close()
            dst.close()
            run["ratio"] = run["real_s"] / run["estimate_s"] if run["estimate_s"] else None
            if "estimate_measured_s" in run:
                run["ratio_measured"] = run["real_s"] / run["estimate_measured_s"]
            runs.append(run)
            print(f"  check {judge_name} {name}: estimate {run['estimate_s']:.1f} s, real {run['real_s']:.1f} s, "
                  f"ratio {run['ratio']:.2f}", flush=True)
    return {"judge": judge_name, "load_s": load_s, "runs": runs}


def _child(judge: str, phase: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    with tempfile.NamedTemporaryFile(suffix=".json") as fh:
        subprocess.run([sys.executable, __file__, "--child", judge, "--phase", phase, "--out", fh.name],
                       check=True, env=env, cwd=Path(__file__).parent)
        return json.loads(Path(fh.name).read_text())


def write_table(fits: dict[str, dict[str, Any]], when: str) -> None:
    lines = ["MEASURED: dict[str, Speed] = {"]
    for judge, f in fits.items():
        lines.append(f'    "{judge}": Speed(prompt_tokens_per_s={f["prompt_tokens_per_s"]:.1f}, '
                     f'seconds_per_call={f["seconds_per_call"]:.3f}),')
    lines += ["}", f'MEASURED_ON = "{when}"']
    text = SPEEDS.read_text()
    body = "\n".join(lines) + "\n"
    new = re.sub(r"(# BEGIN MEASURED\n).*?(# END MEASURED)", lambda m: m.group(1) + body + m.group(2), text, flags=re.S)
    SPEEDS.write_text(new)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--judges", default=",".join(JUDGES))
    ap.add_argument("--child")
    ap.add_argument("--phase", choices=("fit", "check"))
    ap.add_argument("--out")
    ap.add_argument("--check-only", action="store_true", help="keep the shipped table; only check it")
    args = ap.parse_args()
    if args.child:
        result = child_fit(args.child) if args.phase == "fit" else child_check(args.child)
        Path(args.out).write_text(json.dumps(result))
        return
    judges = [j for j in args.judges.split(",") if j]
    when = time.strftime("%Y-%m-%d") + ", 2 cores"
    fits: dict[str, dict[str, Any]] = {}
    if not args.check_only:
        from trustjudge.backends._speeds import MEASURED

        for judge in judges:
            print(f"fit {judge}", flush=True)
            fits[judge] = _child(judge, "fit")
        keep = {k: {"prompt_tokens_per_s": v.prompt_tokens_per_s, "seconds_per_call": v.seconds_per_call}
                for k, v in MEASURED.items() if k not in fits}
        write_table({**keep, **fits}, when)
    checks = {}
    for judge in judges:
        print(f"check {judge}", flush=True)
        checks[judge] = _child(judge, "check")
    ratios = [r["ratio"] for c in checks.values() for r in c["runs"] if r.get("ratio")]
    within = all(1 / TARGET <= r <= TARGET for r in ratios)
    md = ["# Time estimates against real times", "",
          "`bench/estimates.py`: for each bundled judge, the `--dry-run` estimate (`Judge.plan`) from the shipped "
          "figure (fitted on synthetic prompts of three lengths, in an empty store) against the real wall time "
          "of the README's examples and a long-prompt dataset, each in an empty store; model loading excluded "
          f"on both sides; each run repeated {REPEATS} times, the fastest counted (fit and check alike). "
          "`measured` is the estimate from the speed the store measured on the previous workload "
          "(what a user's next command sees). Target: real / estimate within 1/1.5 .. 1.5.", "",
          f"Machine: {machine()['cpu']}, {os.cpu_count()} cores; {when}. All within target: **{within}** "
          f"(ratios {min(ratios):.2f}-{max(ratios):.2f}).", "",
          "| judge | shipped speed | workload | calls | estimate s | real s | real / estimate "
          "| real / measured estimate |",
          "|---|---|---|---:|---:|---:|---:|---:|"]
    for judge, c in checks.items():
        f = fits.get(judge)
        speed = (f"{f['prompt_tokens_per_s']:.0f} tok/s + {f['seconds_per_call']:.2f} s/call" if f else "(table)")
        for r in c["runs"]:
            md.append(f"| {judge} | {speed} | {r['workload']} | {r['model_calls']} | {fmt(r['estimate_s'], 1)} | "
                      f"{fmt(r['real_s'], 1)} | {fmt(r.get('ratio'))} | {fmt(r.get('ratio_measured'))} |")
    md.append("")
    write_results("estimates", {"machine": machine(), "fits": fits, "checks": checks, "target": TARGET,
                                "within_target": within}, "\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
