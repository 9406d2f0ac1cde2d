# Evidence script for docs/judges.md "A prebuilt llama.cpp for the first run?" (paths as run on 2026-12-02).
# brute force label log-probs + prompt decode timing, low-level API of either binding (argv[1]: sync|compiled)
import json
import math
import sys
import time

import numpy as np

GGUF = "/root/.cache/trustjudge/gguf/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
which = sys.argv[1]; reps = int(sys.argv[2]) if len(sys.argv) > 2 else 0
cases = json.load(open("/tmp/pscmp/cases.json"))
if which == "sync":
    from llama_cpp_py_sync._cffi_bindings import get_ffi, get_lib
    ffi, L = get_ffi(), get_lib()
    L.llama_backend_init()
    mp = L.llama_model_default_params(); mp.n_gpu_layers = 0
    model = L.llama_model_load_from_file(GGUF.encode(), mp)
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch = 1024, 512, 32, 2, 2
    cp.type_k = cp.type_v = 0  # GGML_TYPE_F32
    cp.swa_full = True
    ctx = L.llama_init_from_model(model, cp)
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    logits_row = lambda i: np.frombuffer(ffi.buffer(L.llama_get_logits_ith(ctx, i), 4 * n_vocab), dtype=np.float32)
    version = "py-sync " + __import__("llama_cpp_py_sync").__version__
else:
    import llama_cpp as L
    llm = L.Llama(GGUF, n_ctx=1024, n_batch=512, n_ubatch=32, n_threads=2, n_threads_batch=2, logits_all=False,
                  verbose=False, type_k=L.GGML_TYPE_F32, type_v=L.GGML_TYPE_F32, swa_full=True)
    ctx = llm._ctx.ctx; n_vocab = llm.n_vocab()
    logits_row = lambda i: np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(n_vocab,))
    version = "llama-cpp-python " + L.__version__
batch = L.llama_batch_init(512, 0, 1)
def decode(ids, want):  # one sequence from position 0, logits for the last `want` tokens
    L.llama_memory_clear(L.llama_get_memory(ctx), True)
    batch.n_tokens = len(ids)
    for i, t in enumerate(ids):
        batch.token[i] = t; batch.pos[i] = i; batch.n_seq_id[i] = 1; batch.seq_id[i][0] = 0
        batch.logits[i] = 1 if i >= len(ids) - want else 0
    assert L.llama_decode(ctx, batch) == 0
def lse(x): m = x.max(); return m + math.log(np.exp((x - m).astype(np.float64)).sum())
worst = 0.0
res = []
for c in (cases if not __import__('os').environ.get('SKIP_BRUTE') else []):
    got = []
    for lab in c["labels"]:
        ids = c["ids"] + lab
        decode(ids, len(lab) + 1)
        lp = 0.0
        for k, t in enumerate(lab):
            row = logits_row(len(ids) - len(lab) - 1 + k).astype(np.float64)
            lp += row[t] - lse(row)
        got.append(lp)
    res.append(got)
    worst = max(worst, max(abs(math.exp(a) - math.exp(b)) for a, b in zip(got, c["trie"])))
json.dump(res, open(f"/tmp/pscmp/brute-{which}.json", "w"))
print(version, "max|p_brute - p_compiled_trie| =", f"{worst:.5f}")
if reps:
    ids = cases[0]["ids"]
    t = time.perf_counter()
    for _ in range(reps): decode(ids, 1)
    dt = time.perf_counter() - t
    print(f"{version}: {reps} x {len(ids)}-token prompt decode: {dt:.2f} s, {reps*len(ids)/dt:.1f} prompt tokens/s")
