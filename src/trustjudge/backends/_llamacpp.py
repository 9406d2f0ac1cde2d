"""A GGUF judge run in-process with llama-cpp-python (``llamacpp/<model>``).

Label scoring is exact and reuses the KV cache twice:

1. the prompt is evaluated once, reusing the longest common token prefix with the previous prompt
   (``Llama.n_tokens`` is rewound to the shared prefix; ``Llama.eval`` drops the KV cells after it);
2. the label token trie is walked depth first: each trie node that predicts a further label token is
   decoded on top of its parent, after rewinding ``n_tokens`` to the parent.

The result equals scoring each label by its own evaluation of prompt + label *bit for bit* (SmolLM2,
5-, 10- and 100-point scales), because of two choices: the KV cache is float32, and no decode while
scoring is a lone token (a one-token branch is decoded together with the token before it). llama.cpp's
CPU kernels round a one-token batch differently from larger ones, and with a float16 KV cache the
logits also depend on how tokens were split into batches; with llama.cpp's defaults the trie differed
from brute force by up to 0.0055 in probability.

Rewinding vs the alternatives, measured back to back on SmolLM2-135M Q4_1 (2 shared CPU cores,
100-point scale, 143-token prompt): rewinding 6.4 s per prompt vs ``save_state``/``load_state`` per
branch 87 s (llama-cpp-python copies the context state and scans its whole logits buffer on every
load; probabilities equal within 2e-4). One batched decode of the whole trie, one llama.cpp sequence
per trie leaf over a unified KV cache, took 6.9 s vs 2.5 s for rewinding, but that run still used
llama-cpp-python's default of every core for batches (see ``n_threads``), which penalised the batch;
it may be worth measuring again. With the settings here a 10-point label set takes 0.65 s and a
100-point one 3.0 s per ~60-token prompt from an empty cache.

Logits are read straight from the llama.cpp context (``llama_get_logits_ith``), so the model is loaded
without ``logits_all`` (which would allocate ``n_ctx x n_vocab`` floats).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import BackendError, ConfigError, pip_dependency_error
from ._base import Backend, GenerateRequest, Generation, LabelRequest, LabelResult
from ._models import ModelSpec, file_sha256


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise pip_dependency_error("The llamacpp/ judges", ["llama-cpp-python"], "llamacpp") from exc
    return llama_cpp


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-softmax of one row of logits, in float64 (the sums of label log-probabilities stay exact)."""
    x: np.ndarray = logits.astype(np.float64)
    x -= x.max()
    out: np.ndarray = x - np.log(np.exp(x).sum())
    return out


class LlamaCppBackend(Backend):
    """A GGUF model on the CPU (or a GPU build) through llama-cpp-python.

    Args:
        spec: the model file and prompt format (from :func:`trustjudge.backends._models.resolve`).
        n_ctx: context size; ``None`` takes the smaller of the model's training context and 4096 (a
            larger context only costs KV-cache memory: judge prompts are short).
        n_threads: CPU threads for single tokens and batches alike (``None``: half the cores).
        n_batch: tokens per decode call when evaluating a prompt.
        n_gpu_layers: layers to offload on GPU builds (0 on CPU builds).
        kv_f32: keep the KV cache in float32 (twice the memory of llama.cpp's float16 default). With
            float16, a label's probability depends on how tokens were batched (prompt + label in one
            decode vs the label on a cached prompt) by up to 0.008 here; with float32 the two agree bit
            for bit, so the trie equals brute force exactly.
    """

    default_tokens_per_s = 900.0

    def __init__(self, spec: ModelSpec, *, n_ctx: int | None = None, n_threads: int | None = None,
                 n_batch: int = 512, n_gpu_layers: int = 0, kv_f32: bool = True) -> None:
        llama_cpp = _import_llama_cpp()
        if not spec.path.is_file() or spec.path.suffix != ".gguf":
            raise ConfigError(f"llamacpp/ judges need a .gguf file, got {spec.path}")
        self.spec = spec
        self._sha = file_sha256(spec.path)
        self._version = str(getattr(llama_cpp, "__version__", "unknown"))
        self.kv_f32 = kv_f32
        # One thread count for single tokens and batches: llama-cpp-python's batch default (every core)
        # spins OpenMP barriers, and on a machine whose cores are busy a two-token batch then took
        # 3.5-6 s instead of 26 ms (2 cores, 1 busy).
        threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        kv_type = llama_cpp.GGML_TYPE_F32 if kv_f32 else None

        def load(size: int) -> Any:
            return llama_cpp.Llama(
                str(spec.path), n_ctx=size, n_batch=n_batch, n_ubatch=n_batch, n_threads=threads,
                n_threads_batch=threads,
                n_gpu_layers=n_gpu_layers, logits_all=False, verbose=False, type_k=kv_type, type_v=kv_type,
                # Sliding-window models (Gemma 3) prune KV cells outside the window unless the full cache
                # is kept, and a pruned cache cannot be rewound to an earlier prefix.
                swa_full=True,
            )

        self._llm: Any = load(n_ctx or 4096)
        trained = int(llama_cpp.llama_model_n_ctx_train(self._llm.model))
        if n_ctx is None and 0 < trained < 4096:
            self._llm.close()
            self._llm = load(trained)
        self._llama_cpp = llama_cpp
        self._n_vocab = int(self._llm.n_vocab())
        self._label_cache: dict[str, tuple[int, ...]] = {}
        fmt = spec.prompt_format
        template = self._llm.metadata.get("tokenizer.chat_template")
        if fmt == "auto":
            fmt = "chat" if template else "plain"
        if fmt == "chat" and not template:
            raise ConfigError(f"{spec.path.name} has no chat template: use the ':plain' prompt format")
        self.prompt_format = fmt
        self._chat: Any = None
        if fmt == "chat":
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # type: ignore[import-not-found,unused-ignore]

            model = self._llm._model
            bos, eos = self._llm.token_bos(), self._llm.token_eos()
            self._chat = Jinja2ChatFormatter(
                template=template,
                eos_token=model.token_get_text(eos) if eos != -1 else "",
                bos_token=model.token_get_text(bos) if bos != -1 else "",
                add_generation_prompt=True,
            )

    # -- identity -------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        # The library version is part of it: llama.cpp kernels change numerics between releases.
        kv = "kv-f32" if self.kv_f32 else "kv-f16"
        return f"llamacpp:{self._sha}:{self.prompt_format}:{kv}:llama-cpp-python-{self._version}"

    @property
    def context_length(self) -> int:
        return int(self._llm.n_ctx())

    def count_tokens(self, text: str) -> int:
        return len(self._encode(text))

    def max_label_tokens(self, labels: Sequence[str]) -> int:
        return max(len(self._encode_label(label)) for label in labels)

    def format_prompt(self, system: str, user: str, assistant_prefix: str) -> str:
        if self._chat is not None:
            messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
            return str(self._chat(messages=messages).prompt) + assistant_prefix
        return f"{system}\n\n{user}\n\n{assistant_prefix}"

    # -- tokens -----------------------------------------------------------------------------------
    def _encode(self, text: str) -> list[int]:
        # Same call as llama-cpp-python's completion endpoint: BOS if the model asks for it, and special
        # tokens written in the text (chat markers) parsed as such.
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=True))

    def _encode_label(self, label: str) -> tuple[int, ...]:
        ids = self._label_cache.get(label)
        if ids is None:
            ids = tuple(self._llm.tokenize(label.encode("utf-8"), add_bos=False, special=False))
            if not ids:
                raise ConfigError(f"label {label!r} has no tokens")
            self._label_cache[label] = ids
        return ids

    def _is_eog(self, token: int) -> bool:
        fn = getattr(self._llama_cpp, "llama_vocab_is_eog", None)
        if fn is not None:
            return bool(fn(self._llm._model.vocab, token))
        return bool(token == self._llm.token_eos())

    # -- evaluation -------------------------------------------------------------------------------
    def reset_cache(self) -> None:
        """Forget the reused KV state (tests compare results with and without reuse)."""
        self._llm.reset()

    def _eval_from(self, keep: int, tokens: Sequence[int], *, min_batch: int = 1) -> np.ndarray:
        """Rewind the context to its first ``keep`` tokens, evaluate ``tokens``; return the last logits.

        ``min_batch=2`` re-evaluates the token before ``tokens`` when only one is new: llama.cpp's CPU
        kernels for a one-token batch round differently from those for larger batches (every batch size
        from 2 up gives bit-identical logits with a float32 KV cache; a lone token moved one label's
        probability by 0.018 on SmolLM2), and a prompt + label is normally evaluated as one batch.
        """
        llm = self._llm
        if len(tokens) < min_batch and keep > 0:
            keep -= 1
            tokens = [int(llm.input_ids[keep]), *tokens]
        if keep + len(tokens) > llm.n_ctx():
            raise BackendError(f"{keep + len(tokens)} tokens exceed the context of {llm.n_ctx()}")
        llm.n_tokens = keep
        try:
            llm.eval(tokens)
        except RuntimeError as exc:  # llama_decode failed: the state after `keep` is unknown
            llm.reset()
            raise BackendError(f"llama.cpp decode failed: {exc}") from exc
        row = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(self._n_vocab,))
        return row.copy()

    def _prefill(self, ids: list[int]) -> np.ndarray:
        """Evaluate a prompt, reusing the common prefix with what the context holds; return last logits."""
        llm = self._llm
        cached = llm.input_ids[: llm.n_tokens]
        limit = min(len(ids) - 1, len(cached))  # at least one token is evaluated, to get its logits
        keep = 0
        while keep < limit and ids[keep] == cached[keep]:
            keep += 1
        return self._eval_from(keep, ids[keep:], min_batch=2)

    def _depth_first(self, n: int, prefixes: list[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
        """Score trie nodes one decode each; sorted prefixes come depth first, parents just before."""
        node_lp: dict[tuple[int, ...], np.ndarray] = {}
        path: tuple[int, ...] = ()
        for prefix in prefixes:
            common = 0
            while common < min(len(path), len(prefix)) and path[common] == prefix[common]:
                common += 1
            node_lp[prefix] = log_softmax(self._eval_from(n + common, prefix[common:], min_batch=2))
            path = prefix
        self._llm.n_tokens = n  # keep only the prompt: the next prompt may share its prefix
        return node_lp

    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        results = []
        for req in requests:
            start = time.perf_counter()
            ids = self._encode(req.prompt)
            if not ids:
                raise BackendError("empty prompt")
            label_ids = [self._encode_label(label) for label in req.labels]
            root = log_softmax(self._prefill(ids))
            n = len(ids)
            # Trie nodes whose output is needed: every proper prefix of a label.
            prefixes = sorted({seq[:j] for seq in label_ids for j in range(1, len(seq))})
            if prefixes and n + len(prefixes) > self._llm.n_ctx():
                raise BackendError(f"{n} prompt tokens + {len(prefixes)} label trie nodes exceed the context")
            node_lp = self._depth_first(n, prefixes)
            values = []
            for seq in label_ids:
                total = float(root[seq[0]])
                for j in range(1, len(seq)):
                    total += float(node_lp[seq[:j]][seq[j]])
                values.append(total)
            results.append(LabelResult(tuple(values), n, time.perf_counter() - start))
        return results

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        results = []
        for req in requests:
            start = time.perf_counter()
            ids = self._encode(req.prompt)
            logits = self._prefill(ids)
            rng = np.random.default_rng(req.seed)
            out: list[int] = []
            lps: list[float] = []
            finish = "length"
            text = ""
            for _ in range(req.max_new_tokens):
                logp = log_softmax(logits)
                if req.temperature <= 0:
                    tok = int(np.argmax(logp))
                else:
                    scaled = logp / req.temperature
                    probs = np.exp(scaled - scaled.max())
                    tok = int(rng.choice(len(probs), p=probs / probs.sum()))
                out.append(tok)
                lps.append(float(logp[tok]))
                if self._is_eog(tok):
                    finish = "eos"
                    text = self._detok(out[:-1])
                    break
                text = self._detok(out)
                hits = [text.find(s) for s in req.stop if s in text]
                if hits:
                    text = text[: min(hits)]
                    finish = "stop"
                    break
                if len(ids) + len(out) >= self._llm.n_ctx():
                    break
                logits = self._eval_from(self._llm.n_tokens, [tok])
            results.append(Generation(text, tuple(lps), finish, len(ids), time.perf_counter() - start))  # type: ignore[arg-type]
        return results

    def _detok(self, tokens: list[int]) -> str:
        return bytes(self._llm.detokenize(tokens)).decode("utf-8", errors="ignore")

    def close(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            llm.close()


def load(rest: str) -> LlamaCppBackend:
    """Build the backend for the part of a judge name after ``llamacpp/``."""
    from ._models import resolve

    spec = resolve(rest)
    if spec.path.is_dir():
        raise ConfigError(f"llamacpp/ judges need a .gguf file; {spec.path} is a folder (use hf/ for it)")
    return LlamaCppBackend(spec)


__all__ = ["LlamaCppBackend", "load", "log_softmax"]
