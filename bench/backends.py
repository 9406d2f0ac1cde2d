"""Which in-process backend should run the default judge here: llama.cpp or transformers?

The default judge, Qwen2.5-Coder-1.5B-Instruct, runs under ``llamacpp/`` (its Q4_K_M GGUF as shipped) and
``hf/`` (the same weights de-quantized once to fp32 safetensors). This benchmark measures what a user of the
default pays under each, on the README's main job (``scripts/demo``'s commands on examples/items.jsonl):

- cold: the one-time cost before the first judgment (``hf/``: de-quantizing into an empty cache, with the
  process's peak memory; ``llamacpp/``: nothing beyond loading) -- both need the GGUF joined first, which
  is the same for both and left out;
- demo: ``trustjudge score`` and ``trustjudge compare`` on examples/items.jsonl, each a fresh process and a
  fresh store (so model load included), the two backends interleaved ``--repeats`` times (this machine's
  speed drifts between minutes); each backend's best run counts;
- score100: ``trustjudge score --scale 100`` on the same file (long label tries), the same way.

Writes bench/results/backends.{md,json}.

Run: .venv/bin/python bench/backends.py [--parts cold,demo,score100] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import RESULTS, machine, peak_rss_mb, write_results

ROOT = Path(__file__).resolve().parents[1]
ITEMS = ROOT / "examples" / "items.jsonl"
BACKENDS = ("llamacpp/qwen2.5-coder-1.5b", "hf/qwen2.5-coder-1.5b")


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "trustjudge.cli", *args]


def cold(tmp: Path) -> dict[str, Any]:
    """De-quantizing the default judge into an empty cache (the joined GGUF is linked in: both backends
    need it, and joining it is the same for both)."""
    from trustjudge.backends._models import cache_dir

    cache = tmp / "cache"
    (cache / "gguf").mkdir(parents=True)
    for f in (cache_dir() / "gguf").iterdir():
        (cache / "gguf" / f.name).symlink_to(f)
    env = dict(os.environ, TRUSTJUDGE_CACHE=str(cache))
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); from backends import warm_hf; warm_hf()"
    convert_rss, convert_s = peak_rss_mb([sys.executable, "-c", code], env)
    size = sum(p.stat().st_size for p in (cache / "models").rglob("*") if p.is_file())
    out = {"hf_convert_s": convert_s, "hf_convert_peak_rss_mb": convert_rss, "hf_converted_bytes": size}
    # Keep the converted weights for the timed parts (converting again would cost the same minutes).
    for folder in (cache / "models").iterdir():
        target = cache_dir() / "models" / folder.name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(folder), str(target))
    shutil.rmtree(cache)
    return out


def job(part: str, judge: str, store: Path, out: Path) -> list[list[str]]:
    if part == "demo":
        common = ["--judge", judge, "--store", str(store), "-q"]
        return [cli("score", str(ITEMS), *common, "--out", str(out / "s.jsonl")),
                cli("compare", str(ITEMS), *common, "--out", str(out / "v.jsonl"))]
    return [cli("score", str(ITEMS), "--judge", judge, "--scale", "100", "--store", str(store),
                "--out", str(out / "s100.jsonl"), "-q")]


def judged(store: Path) -> int:
    import sqlite3

    with sqlite3.connect(store) as db:
        return int(db.execute("select count(*) from outputs").fetchone()[0])


def warm_hf() -> None:
    """Convert the default judge for ``hf/`` into the cache (``TRUSTJUDGE_CACHE``) if it is not there yet."""
    from trustjudge.backends._models import converted_folder, file_sha256, resolve

    spec = resolve("qwen2.5-coder-1.5b")
    converted_folder(spec, file_sha256(spec.path))


def run_part(part: str, tmp: Path, repeats: int) -> dict[str, Any]:
    warm_hf()
    runs: dict[str, list[dict[str, float]]] = {b: [] for b in BACKENDS}
    for rep in range(repeats):
        for judge in BACKENDS:
            d = tmp / f"{part}-{judge.replace('/', '_')}-{rep}"
            d.mkdir()
            wall, rss = 0.0, 0.0
            for args in job(part, judge, d / "store.sqlite", d):
                m, s = peak_rss_mb(args)
                wall, rss = wall + s, max(rss, m)
            runs[judge].append({"wall_s": wall, "peak_rss_mb": rss, "judgments": judged(d / "store.sqlite")})
            print(part, judge, runs[judge][-1], flush=True)
    best = {b: min(r["wall_s"] for r in rs) for b, rs in runs.items()}
    llama, hf = (best[b] for b in BACKENDS)
    return {"runs": runs, "best_s": best, "hf_over_llamacpp": hf / llama,
            "faster": BACKENDS[0] if llama <= hf else BACKENDS[1]}


def markdown(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = ["# The default judge under llama.cpp and transformers (bench/backends.py)", "",
             f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']}, commit {m['commit']}; measured "
             f"{r.get('measured', '')}. Each run is a fresh process and a fresh store (model load included); the "
             "backends are interleaved and each one's best run counts.", ""]
    if "cold" in r:
        c = r["cold"]
        lines += ["## One-time cost before the first judgment", "",
                  f"- `hf/`: de-quantizing the GGUF into an empty cache took {c['hf_convert_s']:.0f} s, peak memory "
                  f"{c['hf_convert_peak_rss_mb']:,.0f} MB, and writes {c['hf_converted_bytes'] / 1e9:.1f} GB",
                  "- `llamacpp/`: none (it reads the GGUF as shipped)", ""]
    for part, title in (("demo", "`scripts/demo`'s commands (10-point scores, then pairs in both orders)"),
                        ("score100", "`trustjudge score --scale 100` on the same file")):
        if part not in r:
            continue
        p = r[part]
        lines += [f"## {title}", "", "| backend | runs: wall s (peak MB) | judgments stored | best s |",
                  "|---|---|---|---|"]
        for b, rs in p["runs"].items():
            each = ", ".join(f"{x['wall_s']:.0f} ({x['peak_rss_mb']:,.0f})" for x in rs)
            lines.append(f"| `{b}` | {each} | {rs[0]['judgments']} | {p['best_s'][b]:.0f} |")
        lines += ["", f"hf / llamacpp time: **{p['hf_over_llamacpp']:.2f}**; faster: `{p['faster']}`", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="cold,demo,score100")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    previous = RESULTS / "backends.json"
    results: dict[str, Any] = json.loads(previous.read_text()) if previous.exists() else {}
    results.update(machine=machine(), measured=time.strftime("%Y-%m-%d %H:%M"), load_1min_before=os.getloadavg()[0])
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for part in args.parts.split(","):
            results[part] = cold(tmp) if part == "cold" else run_part(part, tmp, args.repeats)
            print(part, results[part], flush=True)
            write_results("backends", results, markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
