"""trustjudge against a peer judging library (DeepEval's GEval) on the same model, server and items.

Starts llama-cpp-python's OpenAI-compatible server on loopback with the bundled SmolLM2-135M GGUF
(``tests/_llama_server.running_server``), then judges the same N question/response items twice:

- trustjudge: ``Judge("llamacpp-server/smollm2@URL?labels=top_k&template=chatml", scale=10)``, direct protocol: one
  prompt ending in ``Score: [`` and the labels read from the top-20 log-probabilities (``labels=top_k``:
  llama-cpp-python's server formats echoed prompt log-probabilities in Python over the whole vocabulary,
  ~10 s per 300-token prompt, so the exact echo path is left out here).
- DeepEval's GEval (evaluation_params input + actual_output, async off), with DeepEval's own
  OpenAI-compatible ``LocalModel`` pointed at the same server (chat completions, temperature 0), a fresh
  GEval per item as ``deepeval.evaluate`` copies the metric per test case, in two variants: ``criteria``
  (each judgment generates its evaluation steps, then the JSON score and reason) and fixed
  ``evaluation_steps`` written from the same criteria (one generation per judgment). DeepEval is installed in a
  separate virtual environment in the temp folder (never in the project's) and run by a driver script written there,
  with telemetry off, update checks off, proxies pointing at a closed loopback port and a socket guard
  that refuses (and counts) any connection to a non-loopback address.

Reports seconds per judgment for each tool, their ratio, the fraction of judgments each could score
(DeepEval raising or returning None counts as not scored) and DeepEval's most common failure reasons.
Prints and writes bench/results/peer.{json,md}.

Run: .venv/bin/python bench/peer.py [--n 50] [--keep-temp]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests._llama_server

from tests._llama_server import running_server  # noqa: E402 (after the sys.path set-up)

from _common import machine, write_results  # noqa: E402 (after the sys.path set-up)
from trustjudge import Judge, items_from_dicts  # noqa: E402 (after the sys.path set-up)
from trustjudge.backends._models import smollm2_gguf  # noqa: E402 (after the sys.path set-up)

DEEPEVAL_VERSION = "4.3.1"
ALIAS = "smollm2"
N_CTX = 4096
SCALE = 10
MAX_TOKENS = 512  # DeepEval generation cap per call (the server's chat default is unlimited)
GUARD_PORT = 9  # proxies point here (nothing listens): any proxied request fails at once
CRITERIA = ("Judge how well the actual output answers the input question: whether it is correct, helpful, "
            "relevant, complete and clearly written.")
STEPS = ("Check whether the facts in the actual output are correct answers to the input question.",
         ("Check whether the actual output addresses the input question directly and is helpful, relevant and "
          "complete."),
         "Check whether the actual output is clearly written; wrong or misleading statements lower the score most.")
EXAMPLE_REASON = "your concise and informative reason here"  # the example in GEval's results prompt
VARIANTS = ({"name": "criteria", "criteria": CRITERIA, "evaluation_steps": None},
            {"name": "evaluation_steps", "criteria": None, "evaluation_steps": list(STEPS)})

# (question, a correct answer, a wrong or unhelpful answer)
QA: tuple[tuple[str, str, str], ...] = (
    ("Why does ice float on water?",
     ("Ice is less dense than liquid water: hydrogen bonds hold the molecules in an open hexagonal lattice, "
      "so a given mass of ice takes up more volume and floats."),
     "Ice floats because it is colder than the water around it, and cold things always rise."),
    ("What is the capital of Australia?",
     "The capital of Australia is Canberra, chosen as a compromise between Sydney and Melbourne.",
     "The capital of Australia is Sydney, its largest and best-known city."),
    ("How many bones are in the adult human body?",
     "An adult human skeleton usually has 206 bones; babies are born with more, some of which fuse.",
     "Adults have about 300 bones, the same number as newborn babies."),
    ("What causes the seasons on Earth?",
     ("The tilt of Earth's axis (about 23.5 degrees): each hemisphere gets more direct sunlight and longer "
      "days for part of the orbit, which makes summer there."),
     "Seasons happen because Earth is much closer to the Sun in summer and much farther away in winter."),
    ("How do I reverse a list in Python?",
     ("Use my_list.reverse() to reverse it in place, or my_list[::-1] (or reversed(my_list)) to get a "
      "reversed copy or iterator."),
     "Python lists cannot be reversed; you have to write them out again by hand in the other order."),
    ("What is photosynthesis?",
     ("Photosynthesis is how plants, algae and some bacteria use light energy to turn carbon dioxide and "
      "water into glucose, releasing oxygen as a by-product."),
     "Photosynthesis is the process by which animals digest food in their stomachs."),
    ("Who wrote 'Pride and Prejudice'?",
     "Jane Austen wrote 'Pride and Prejudice', first published in 1813.",
     "'Pride and Prejudice' was written by Charles Dickens in 1920."),
    ("What is the boiling point of water at sea level?",
     "At sea level (1 atmosphere), pure water boils at 100 degrees Celsius, or 212 degrees Fahrenheit.",
     "Water boils at 50 degrees Celsius at sea level."),
    ("Why is the sky blue?",
     ("Air molecules scatter short (blue) wavelengths of sunlight much more than long (red) ones "
      "(Rayleigh scattering), so blue light reaches our eyes from every direction of the sky."),
     "The sky is blue because it reflects the colour of the oceans."),
    ("What does HTTP status code 404 mean?",
     "404 Not Found: the server was reached but has nothing at the requested URL.",
     "404 means the server crashed and must be restarted."),
    ("How many continents are there?",
     ("By the most common convention there are seven: Africa, Antarctica, Asia, Australia (Oceania), "
      "Europe, North America and South America."),
     "There are three continents."),
    ("What is the difference between weather and climate?",
     ("Weather is the short-term state of the atmosphere (today's rain or heat); climate is the average "
      "pattern of weather in a region over decades."),
     "Weather and climate are the same thing; the words are interchangeable."),
    ("What is the speed of light in a vacuum?",
     "About 299,792 kilometres per second (exactly 299,792,458 metres per second).",
     "Light travels at roughly the speed of sound, about 340 metres per second."),
    ("What is the main function of red blood cells?",
     ("Red blood cells carry oxygen from the lungs to the body's tissues, bound to haemoglobin, and bring "
      "some carbon dioxide back."),
     "Red blood cells fight infections by producing antibodies."),
    ("How do vaccines work?",
     ("A vaccine exposes the immune system to a harmless form or part of a pathogen, so it makes antibodies "
      "and memory cells and can respond quickly to a real infection later."),
     "Vaccines work by killing every bacterium in the body for a year."),
    ("What is 15% of 200?",
     "15% of 200 is 30 (0.15 x 200).",
     "15% of 200 is 15."),
    ("What is the largest planet in our solar system?",
     "Jupiter is the largest planet, with more than 300 times Earth's mass.",
     "Mars is the largest planet in the solar system."),
    ("What is a prime number?",
     ("A prime is a whole number greater than 1 whose only divisors are 1 and itself, such as 2, 3, 5, 7 "
      "and 11."),
     "A prime number is any even number."),
    ("What does DNA stand for?",
     "DNA stands for deoxyribonucleic acid, the molecule that carries genetic instructions.",
     "DNA stands for Digital Nucleus Array."),
    ("How can I make my bread rise better?",
     ("Use fresh yeast, let the dough proof somewhere warm (about 25-30 C) until doubled, knead enough to "
      "develop gluten, and avoid adding salt directly onto the yeast."),
     "Bread rises better if you bake it straight away in a cold oven without letting it rest."),
    ("What is the freezing point of water in Fahrenheit?",
     "Water freezes at 32 degrees Fahrenheit (0 degrees Celsius) at standard pressure.",
     "Water freezes at 0 degrees Fahrenheit."),
    ("Who painted the Mona Lisa?",
     "Leonardo da Vinci painted the Mona Lisa in the early 16th century; it hangs in the Louvre.",
     "The Mona Lisa was painted by Vincent van Gogh."),
    ("What is the chemical symbol for gold?",
     "The chemical symbol for gold is Au, from the Latin 'aurum'.",
     "The chemical symbol for gold is Go."),
    ("How long does it take Earth to orbit the Sun?",
     "About 365.25 days, which is why a leap day is added every four years.",
     "Earth orbits the Sun once every 24 hours."),
    ("What is the purpose of a firewall?",
     ("A firewall filters network traffic by rules, allowing expected connections and blocking unwanted "
      "ones between networks or into a computer."),
     "A firewall is a physical wall that stops a building from catching fire, so computers do not need one."),
)

DRIVER = r'''
"""DeepEval GEval driver (runs in the peer venv): python driver.py config.json"""
import json
import math
import socket
import sys
import time

BLOCKED = []
_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex


def _allowed(address):
    if not isinstance(address, tuple):
        return True  # a unix socket path
    host = str(address[0])
    return host.startswith("127.") or host in ("::1", "localhost")


def _guarded(original):
    def connect(self, address):
        if not _allowed(address):
            BLOCKED.append(str(address[0]))
            raise ConnectionRefusedError(f"benchmark guard: no network beyond loopback ({address[0]})")
        return original(self, address)
    return connect


socket.socket.connect = _guarded(_connect)
socket.socket.connect_ex = _guarded(_connect_ex)

cfg = json.load(open(sys.argv[1]))
t_import = time.perf_counter()
try:
    import httpx2 as httpx  # what the openai SDK of this DeepEval uses
except ImportError:
    import httpx
import deepeval
from deepeval.metrics import GEval
from deepeval.models import LocalModel
from deepeval.test_case import LLMTestCase, SingleTurnParams

import_s = time.perf_counter() - t_import
calls = []


def on_response(response):
    if not response.request.url.path.endswith("/chat/completions"):
        return
    response.read()
    call = {"status": response.status_code}
    try:
        body = response.json()
        usage = body.get("usage") or {}
        call.update(prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"),
                    finish_reason=body["choices"][0].get("finish_reason"),
                    content=(body["choices"][0]["message"]["content"] or "")[:1500])
    except Exception as exc:  # noqa: BLE001
        call["unreadable"] = f"{type(exc).__name__}: {exc}"[:300]
    calls.append(call)


client = httpx.Client(timeout=cfg["timeout_s"], event_hooks={"response": [on_response]})
model = LocalModel(model=cfg["model"], base_url=cfg["base_url"], api_key="unused-local", temperature=0.0,
                   generation_kwargs={"max_tokens": cfg["max_tokens"]}, http_client=client)
results = {}
for variant in cfg["variants"]:
    records = results[variant["name"]] = []
    for item in cfg["items"]:
        calls.clear()
        record = {"id": item["id"], "score": None, "error": None}
        t0 = time.perf_counter()
        try:
            metric = GEval(name="Correctness", criteria=variant["criteria"],
                           evaluation_steps=variant["evaluation_steps"],
                           evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT],
                           model=model, async_mode=False, verbose_mode=False)
            score = metric.measure(LLMTestCase(input=item["question"], actual_output=item["response"]),
                                   _show_indicator=False)
            if score is None or not isinstance(score, (int, float)) or not math.isfinite(float(score)):
                record["error"] = f"measure returned {score!r}"
            else:
                record["score"] = float(score)
            record["reason"] = str(getattr(metric, "reason", "") or "")[:500]
            record["steps"] = getattr(metric, "evaluation_steps", None)
        except Exception as exc:  # noqa: BLE001 - every failure is a result here
            record["error"] = f"{type(exc).__name__}: {exc}"[:500]
        record["seconds"] = time.perf_counter() - t0
        record["calls"] = list(calls)
        records.append(record)
        mark = "error" if record["error"] else f"{record['score']:.2f}"
        print(f"deepeval {variant['name']} {len(records)}/{len(cfg['items'])} {record['seconds']:.1f}s {mark}",
              file=sys.stderr, flush=True)
        json.dump({"deepeval": deepeval.__version__, "import_s": import_s, "blocked": BLOCKED, "variants": results},
                  open(cfg["out"], "w"), indent=1)
'''


def make_items(n: int) -> list[dict[str, Any]]:
    """``n`` single-response items drawn without repetition from QA (a correct and a wrong answer each)."""
    pool = [(q, a, kind) for q, good, bad in QA for a, kind in ((good, "correct"), (bad, "wrong"))]
    if not 1 <= n <= len(pool):
        raise SystemExit(f"--n must be between 1 and {len(pool)}")
    random.Random(0).shuffle(pool)
    return [{"id": f"q{i:02d}", "question": q, "kind": kind, "response": a} for i, (q, a, kind) in enumerate(pool[:n])]


def child_commands() -> list[str]:
    """Command lines of this process's children (the server)."""
    pid = os.getpid()
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [" ".join(Path(f"/proc/{k}/cmdline").read_bytes().decode().split("\0")).strip() for k in kids]
    except OSError:
        return []


def peer_env(tmp: Path, url: str) -> dict[str, str]:
    """The driver's environment: telemetry and update checks off, nothing but loopback reachable."""
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith(("CONFIDENT_", "DEEPEVAL_", "OPENAI_", "LOCAL_MODEL_", "USE_"))}
    proxy = f"http://127.0.0.1:{GUARD_PORT}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "GRPC_PROXY"):
        env[name] = env[name.lower()] = proxy
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    (tmp / "home").mkdir(exist_ok=True)
    env.update(HOME=str(tmp / "home"), DEEPEVAL_HOME=str(tmp / "home" / ".deepeval"),
               DEEPEVAL_TELEMETRY_OPT_OUT="YES", DEEPEVAL_UPDATE_WARNING_OPT_IN="0", DEEPEVAL_DISABLE_DOTENV="1",
               DEEPEVAL_GRPC_LOGGING="0", ERROR_REPORTING="NO", OPENAI_API_KEY="unused-local",
               OPENAI_BASE_URL=url + "/v1", PYTHONDONTWRITEBYTECODE="1")
    return env


def install_peer(tmp: Path, version: str) -> tuple[Path, float, dict[str, str]]:
    """A fresh venv in the temp folder with deepeval==version; its python, install seconds, versions."""
    venv = tmp / "peer-venv"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    log = tmp / "pip.log"
    with log.open("w") as out:
        rc = subprocess.run([str(py), "-m", "pip", "install", "--quiet", f"deepeval=={version}"], check=False,
                            stdout=out, stderr=subprocess.STDOUT, timeout=1800).returncode
    if rc:
        raise SystemExit(f"installing deepeval=={version} failed:\n{log.read_text()[-3000:]}")
    seconds = time.perf_counter() - t0
    probe = ("import importlib.metadata as m, json; names = ('deepeval', 'openai', 'httpx', 'httpx2', 'pydantic'); "
             "print(json.dumps({p: m.version(p) for p in names if any(m.distributions(name=p))}))")
    got = subprocess.run([str(py), "-c", probe],
                         capture_output=True, text=True, check=True)
    return py, seconds, json.loads(got.stdout)


def run_trustjudge(items: list[dict[str, Any]], url: str, tmp: Path) -> dict[str, Any]:
    judge_name = f"llamacpp-server/{ALIAS}@{url}?labels=top_k&template=chatml"
    tj_items = items_from_dicts([{"id": it["id"], "question": it["question"],
                                  "responses": [{"id": "a", "text": it["response"]}]} for it in items])
    judge = Judge(judge_name, store=tmp / "trustjudge.sqlite", scale=SCALE)
    t0 = time.perf_counter()
    records = list(judge.score(tj_items))
    seconds = time.perf_counter() - t0
    judge.close()
    unscored = Counter(r.unscored for r in records if r.unscored is not None)
    masses = [r.label_mass for r in records if r.label_mass is not None]
    return {"judge": judge_name, "seconds": seconds, "n": len(records),
            "scored": sum(r.unscored is None for r in records), "unscored_reasons": dict(unscored),
            "mean_label_mass": sum(masses) / len(masses) if masses else None,
            "scores": {r.item_id: r.scores.get("trustjudge") for r in records}}


def failure_reason(error: str) -> str:
    """An error string reduced to its kind, for counting."""
    lines = error.splitlines()
    head = lines[0] if lines else error
    if "validation error" in head and len(lines) >= 3:  # pydantic: "N validation errors for Model", loc, message
        model = head.rsplit(" for ", 1)[-1]
        loc = re.sub(r"\.\d+", ".N", lines[1].strip())
        return f"{head.split(':', 1)[0]} ({model}): {loc}: {lines[2].split('[', 1)[0].strip()}"
    return re.sub(r"\d+(\.\d+)?s\b", "Ns", head)[:200]


def summarise(name: str, recs: list[dict[str, Any]], items: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts, times and failure reasons of one GEval variant's per-item records."""
    calls = [c for r in recs for c in r["calls"]]
    scores = {r["id"]: r["score"] for r in recs}
    n = len(recs)
    seconds = sum(r["seconds"] for r in recs)
    return {"variant": name, "n": n, "seconds": seconds, "seconds_per_judgment": seconds / max(1, n),
            "scored": sum(r["score"] is not None for r in recs),
            "scored_fraction": sum(r["score"] is not None for r in recs) / max(1, n),
            "scored_in_range": sum(r["score"] is not None and 0.0 <= r["score"] <= 1.0 for r in recs),
            "failure_reasons": Counter(failure_reason(r["error"]) for r in recs if r["error"]).most_common(),
            "chat_calls": len(calls), "completion_tokens": sum(c.get("completion_tokens") or 0 for c in calls),
            "calls_hitting_max_tokens": sum(c.get("finish_reason") == "length" for c in calls),
            "example_copies": sum(r["score"] is not None and EXAMPLE_REASON in (r.get("reason") or "").lower()
                                  for r in recs),
            "mean_score": separation(items, scores), "scores": scores,
            "examples": distinct_failures(recs)}


def distinct_failures(recs: list[dict[str, Any]], limit: int = 2) -> list[dict[str, Any]]:
    """Up to ``limit`` failed records with distinct last model outputs."""
    seen: dict[str, dict[str, Any]] = {}
    for r in recs:
        last = (r["calls"] or [{}])[-1].get("content") or ""
        if r["error"] and last not in seen and len(seen) < limit:
            seen[last] = {"id": r["id"], "error": r["error"], "last_output": last}
    return list(seen.values())


def run_deepeval(items: list[dict[str, Any]], url: str, tmp: Path, py: Path) -> dict[str, Any]:
    out_path = tmp / "deepeval_out.json"
    config = {"items": items, "base_url": url + "/v1", "model": ALIAS, "variants": VARIANTS,
              "max_tokens": MAX_TOKENS, "timeout_s": 600, "out": str(out_path)}
    (tmp / "config.json").write_text(json.dumps(config))
    (tmp / "driver.py").write_text(DRIVER)
    t0 = time.perf_counter()
    proc = subprocess.run([str(py), str(tmp / "driver.py"), str(tmp / "config.json")], check=False, cwd=tmp,
                          env=peer_env(tmp, url), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    (tmp / "driver.log").write_text(proc.stdout)
    if not out_path.exists():
        raise SystemExit(f"the DeepEval driver wrote no results (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    out = json.loads(out_path.read_text())
    done = {name: len(recs) for name, recs in out["variants"].items()}
    if proc.returncode or any(done.get(v["name"]) != len(items) for v in VARIANTS):
        print(f"warning: DeepEval driver exit {proc.returncode}, items done {done}\n{proc.stdout[-2000:]}",
              file=sys.stderr)
    return {"deepeval_version": out["deepeval"], "wall_s": wall, "import_s": out["import_s"],
            "blocked_connections": out["blocked"],
            "variants": {name: summarise(name, recs, items) for name, recs in out["variants"].items()},
            "records": out["variants"]}


def separation(items: list[dict[str, Any]], scores: dict[str, float | None]) -> dict[str, float | None]:
    """Mean score on the correct and on the wrong answers (scored judgments only)."""
    out: dict[str, float | None] = {}
    for kind in ("correct", "wrong"):
        vals = [s for it in items
                if it["kind"] == kind and (s := scores.get(it["id"])) is not None and math.isfinite(s)]
        out[kind] = sum(vals) / len(vals) if vals else None
    return out


def fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50, help=f"items (judgments) per tool, at most {2 * len(QA)}")
    ap.add_argument("--keep-temp", action="store_true", help="keep the temp folder (venv, driver, logs)")
    ap.add_argument("--deepeval-version", default=DEEPEVAL_VERSION)
    args = ap.parse_args()
    items = make_items(args.n)
    tmp = Path(tempfile.mkdtemp(prefix="trustjudge-peer-"))
    try:
        print(f"temp folder {tmp}; installing deepeval=={args.deepeval_version} there", flush=True)
        py, install_s, peer_versions = install_peer(tmp, args.deepeval_version)
        print(f"installed in {install_s:.0f} s: {peer_versions}", flush=True)
        gguf = smollm2_gguf()
        with running_server(gguf, alias=ALIAS, n_ctx=N_CTX) as url:
            server_cmd = next((c for c in child_commands() if "llama_cpp.server" in c), "")
            print(f"server at {url}; trustjudge on {len(items)} items", flush=True)
            load = {"before_trustjudge": os.getloadavg()[0]}
            tj = run_trustjudge(items, url, tmp)
            load["after_trustjudge"] = os.getloadavg()[0]
            print(f"trustjudge: {tj['seconds'] / tj['n']:.2f} s/judgment, scored {tj['scored']}/{tj['n']}", flush=True)
            print(f"DeepEval GEval on {len(items)} items, variants {[v['name'] for v in VARIANTS]}", flush=True)
            de = run_deepeval(items, url, tmp, py)
            load["after_deepeval"] = os.getloadavg()[0]
        de["load_average_1min"] = load
        report(items, tj, de, peer_versions, install_s, server_cmd, gguf)
    finally:
        if args.keep_temp:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def report(items: list[dict[str, Any]], tj: dict[str, Any], de: dict[str, Any], peer_versions: dict[str, str],
           install_s: float, server_cmd: str, gguf: Path) -> None:
    import llama_cpp

    import trustjudge

    n = len(items)
    tj_spj = tj["seconds"] / tj["n"]
    tj_sep = separation(items, tj["scores"])
    variants = de["variants"]
    for v in variants.values():
        v["over_trustjudge_seconds"] = v["seconds_per_judgment"] / tj_spj if tj_spj else math.nan
    versions = {"trustjudge": getattr(trustjudge, "__version__", None) or _dist_version("trustjudge"),
                "llama_cpp_python": llama_cpp.__version__, **{f"peer_{k}": v for k, v in peer_versions.items()}}
    payload = {
        "n": n, "machine": machine(), "versions": versions, "model": gguf.name, "server_command": server_cmd,
        "n_ctx": N_CTX,
        "items": "2 x 25 hand-written questions (one correct, one wrong answer each), shuffled with seed 0, first n",
        "trustjudge": {k: v for k, v in tj.items() if k != "scores"} | {
            "seconds_per_judgment": tj_spj, "scored_fraction": tj["scored"] / tj["n"], "mean_score": tj_sep,
            "scale": SCALE, "labels": "top_k (top-20 log-probabilities)"},
        "deepeval": {
            "version": de["deepeval_version"], "install_s": install_s, "driver_wall_s": de["wall_s"],
            "import_s": de["import_s"], "blocked_connections": de["blocked_connections"],
            "load_average_1min": de["load_average_1min"],
            "metric": "GEval, fresh per item (as deepeval.evaluate copies metrics), async_mode=False",
            "model": "deepeval.models.LocalModel (chat completions, temperature 0)", "max_tokens": MAX_TOKENS,
            "variants": {name: {k: v for k, v in s.items() if k != "scores"} | {"config": cfg}
                         for cfg in VARIANTS for name, s in variants.items() if name == cfg["name"]}},
        "deepeval_records": de["records"],
    }
    print(f"\nn = {n} judgments per tool (SmolLM2-135M Q4_1, llama-cpp-python server, loopback)")
    print(f"trustjudge: {tj_spj:.2f} s/judgment, scored {tj['scored']}/{tj['n']} ({tj['scored'] / tj['n']:.0%})")
    for name, v in variants.items():
        print(f"DeepEval {de['deepeval_version']} GEval ({name}): {v['seconds_per_judgment']:.2f} s/judgment "
              f"({v['over_trustjudge_seconds']:.1f}x trustjudge), scored {v['scored']}/{v['n']} "
              f"({v['scored_fraction']:.0%})")
        for reason, count in v["failure_reasons"][:4]:
            print(f"    failure x{count}: {reason}")
    print(f"non-loopback connections refused in the DeepEval driver: {len(de['blocked_connections'])}")

    md = render(n, tj, tj_spj, tj_sep, de, variants, versions, peer_versions, install_s, server_cmd, gguf,
                payload["machine"])
    write_results("peer", payload, md)
    print("wrote bench/results/peer.json and bench/results/peer.md")


def render(n: int, tj: dict[str, Any], tj_spj: float, tj_sep: dict[str, float | None], de: dict[str, Any],
           variants: dict[str, dict[str, Any]], versions: dict[str, Any], peer_versions: dict[str, str],
           install_s: float, server_cmd: str, gguf: Path, m: dict[str, Any]) -> str:
    names = [v["name"] for v in VARIANTS if v["name"] in variants]
    load = de["load_average_1min"]
    vs = [variants[k] for k in names]

    def row(label: str, tj_cell: str, cell: Any) -> str:
        return f"| {label} | {tj_cell} | " + " | ".join(cell(v) for v in vs) + " |"

    table = "\n".join([
        "| | trustjudge | " + " | ".join(f"DeepEval GEval ({k})" for k in names) + " |",
        "|---|---|" + "---|" * len(names),
        row("seconds per judgment", f"{tj_spj:.2f}", lambda v: f"{v['seconds_per_judgment']:.2f}"),
        row("time vs trustjudge", "1.0x", lambda v: f"{v['over_trustjudge_seconds']:.1f}x"),
        row("scored", f"{tj['scored']}/{tj['n']} ({tj['scored'] / tj['n']:.0%})",
            lambda v: f"{v['scored']}/{v['n']} ({v['scored_fraction']:.0%})"),
        row("model calls", "completions, top-20 log-probabilities at the label (label trie)",
            lambda v: f"{v['chat_calls']} chat completions, {v['completion_tokens']} generated tokens "
                      f"({v['calls_hitting_max_tokens']} hit max_tokens)"),
        row("scored, but the reason is the prompt's example copied", "-", lambda v: str(v["example_copies"])),
        row("mean score, correct answers", f"{fmt(tj_sep['correct'], '.2f')} (1-10)",
            lambda v: f"{fmt(v['mean_score']['correct'], '.2f')} (0-1)"),
        row("mean score, wrong answers", f"{fmt(tj_sep['wrong'], '.2f')} (1-10)",
            lambda v: f"{fmt(v['mean_score']['wrong'], '.2f')} (0-1)"),
    ])
    failures = []
    for k, v in zip(names, vs):
        rows = "\n".join(f"| {count} | `{reason}` |" for reason, count in v["failure_reasons"][:8]) or "| 0 | - |"
        examples = "\n".join(
            f"- `{e['id']}`: the model's last output began `{(e['last_output'] or '')[:240]!r}`" for e in v["examples"])
        failures.append(f"### GEval ({k})\n\n| count | reason |\n|---|---|\n{rows}\n\n{examples or '- none'}\n")
    steps = "\n".join(f"    {i}. {s}" for i, s in enumerate(STEPS, 1))
    return f"""# trustjudge vs DeepEval GEval on the same model (`bench/peer.py`)

Same model (SmolLM2-135M-Instruct, `{gguf.name}`, bundled), same llama-cpp-python OpenAI-compatible server on
loopback, same {n} question/response items (hand-written questions, about half answered correctly and half
wrongly), judged one tool after the other. Run: `nice -n 5 .venv/bin/python bench/peer.py --n {n}`.

Machine: {m['cpu']}, {m['cores']} cores, busy with another benchmark during the run, so absolute times are
inflated (1-minute load average {load['before_trustjudge']:.1f} before trustjudge, {load['after_trustjudge']:.1f}
after it, {load['after_deepeval']:.1f} after DeepEval). Commit {m['commit']}, Python {m['python']}.

{table}

- **trustjudge**: `Judge("llamacpp-server/{ALIAS}@URL?labels=top_k&template=chatml", store=<temp sqlite>,
  scale={SCALE})`,
  direct protocol; `list(judge.score(items))` timed whole ({tj['seconds']:.1f} s, including the backend's
  one-time server detection). `labels=top_k` because llama-cpp-python's server computes echoed prompt
  log-probabilities in Python over the whole 49k vocabulary (~10 s per 300-token prompt), so the exact echo
  path was left out: labels come from the top-20 log-probabilities at the label position (mean label mass
  {fmt(tj['mean_label_mass'])}). Unscored reasons: {tj['unscored_reasons'] or 'none'}.
- **DeepEval {de['deepeval_version']}**: `GEval(evaluation_params=[INPUT, ACTUAL_OUTPUT], async_mode=False)` with
  DeepEval's OpenAI-compatible `LocalModel` (chat completions through the server's chat template,
  temperature 0, `max_tokens={MAX_TOKENS}`). A fresh metric per item, as `deepeval.evaluate` copies metrics
  per test case. Seconds per judgment are the sum of per-item `measure()` times; the driver process took
  {de['wall_s']:.1f} s in all ({de['import_s']:.1f} s importing DeepEval). A judgment is scored when `measure()`
  returned a finite number; an exception or None is not scored. `LocalModel` has no log-probability path,
  so GEval's probability-weighted score is not used: the score is the generated integer / 10.
  GEval's results prompt ends with an example JSON (`"reason": "your concise and informative reason
  here", "score": 0`); judgments whose reason is that example copied are counted in the table.
  - `criteria` (what the task asked): "{CRITERIA}" GEval first asks the model for evaluation steps as JSON,
    then for the JSON score and reason: two generations per judgment. The steps prompt does not depend on
    the item, so at temperature 0 every item gets the same steps output.
  - `evaluation_steps` (GEval's documented alternative, added so the scoring call itself is measured):
    fixed steps written from the same criteria, one generation per judgment:
{steps}
- trustjudge's default pointwise template asks for the same qualities (correct, helpful, relevant,
  complete, clearly written) on a 1-10 scale.
- DeepEval ran in its own virtual environment in the temp folder (`pip install deepeval=={de['deepeval_version']}`,
  {install_s:.0f} s; openai {peer_versions.get('openai')}, pydantic {peer_versions.get('pydantic')}), never in the
  project's. `DEEPEVAL_TELEMETRY_OPT_OUT=YES`, update checks off, `OPENAI_BASE_URL` set to the local server,
  HTTP(S) proxies set to a closed loopback port, and a socket guard in the driver refusing non-loopback
  connections: {len(de['blocked_connections'])} were attempted.

## DeepEval's failures

{chr(10).join(failures)}
## Setup

- Server: `{server_cmd or 'python -m llama_cpp.server (tests/_llama_server.running_server)'}`
- Versions: {', '.join(f'{k} {v}' for k, v in versions.items())}

Per-item DeepEval records (score or error, seconds, each call's generated text) are in `peer.json`.
"""


def _dist_version(name: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
