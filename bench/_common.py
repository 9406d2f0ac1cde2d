"""Helpers shared by the benchmarks: synthetic judge prompts of a chosen length, machine facts."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"

WORDS = ["the", "model", "answer", "explains", "why", "water", "expands", "when", "it", "freezes", "because",
         "hydrogen", "bonds", "hold", "molecules", "in", "an", "open", "hexagonal", "lattice", "which", "is", "less",
         "dense", "than", "liquid", "water", "so", "ice", "floats", "and", "lakes", "freeze", "from", "the",
         "top", "down", "protecting", "fish", "during", "winter", "this", "property", "is", "unusual", "among",
         "common", "substances", "most", "of", "which", "are", "denser", "as", "solids", "than", "as", "liquids"]


def synthetic_items(n_questions: int, per_question: int, response_words: int, seed: int = 0) -> list[dict[str, Any]]:
    """Items whose responses are ~``response_words`` words of shuffled text (deterministic)."""
    rng = random.Random(seed)
    rows = []
    for q in range(n_questions):
        responses = []
        for r in range(per_question):
            words = [rng.choice(WORDS) for _ in range(response_words)]
            responses.append({"id": f"r{r}", "text": " ".join(words).capitalize() + "."})
        rows.append({"id": f"q{q}", "question": f"Question {q}: why does ice float on water? Explain the physics "
                     "in a short paragraph suitable for a curious high-school student.", "responses": responses})
    return rows


def machine() -> dict[str, Any]:
    import torch

    cpu = ""
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    return {"cpu": cpu or platform.processor(), "cores": os.cpu_count(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "python": platform.python_version(),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                     check=False, cwd=Path(__file__).parent).stdout.strip()}


def peak_rss_mb(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Peak RSS (MB) and wall seconds of a child process; raise with its stderr's tail if it fails."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, time.perf_counter() - t, "
            "r.returncode); sys.stderr.write(r.stderr[-2000:])")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False)
    out = proc.stdout.split()
    if proc.returncode != 0 or len(out) != 3 or out[2] != "0":
        raise RuntimeError(f"{' '.join(args)} failed: {proc.stderr[-2000:]}")
    return float(out[0]), float(out[1])


def write_results(name: str, payload: dict[str, Any], markdown: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown)


def fmt(x: Any, digits: int = 2) -> str:
    """A number for a results table; ``-`` for a missing or NaN one."""
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    return f"{x:.{digits}f}"


def corr(kind: str, x: Any, y: Any) -> float:
    """Spearman / Kendall tau-b / Pearson; NaN when fewer than 3 points or either side is constant."""
    from scipy.stats import kendalltau, pearsonr, spearmanr

    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    fn = {"spearman": spearmanr, "kendall": kendalltau, "pearson": pearsonr}[kind]
    return float(fn(x, y)[0])


def replace_section(text: str, heading: str, block: list[str], before: str = "## Transfer") -> str:
    """``text`` (a results page) with the section whose heading line starts with ``heading`` replaced by ``block``
    (its first line a blank, then the heading), or ``block`` inserted before the section ``before`` (or at the end)."""
    lines = text.splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith(heading)]
    if found:
        start = found[0] - 1
        end = next((i for i in range(start + 2, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines[start:end] = [*block, ""]
    else:
        at = next((i for i, line in enumerate(lines) if line.startswith(before)), len(lines))
        lines[at:at] = [*block[1:], ""]
    return "\n".join(lines) + "\n"
