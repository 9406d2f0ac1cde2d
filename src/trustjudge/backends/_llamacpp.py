"""A GGUF judge run in-process with llama-cpp-python (``llamacpp/<model>``).

Label scoring is exact and takes one ``llama_decode`` per group of prompts:

1. the prompts of a batch are cut into groups that fit one decode; sequence 0 of the KV cache holds the
   group's shared token prefix, reusing what the previous group left there (the longest common prefix);
2. one decode then evaluates every prompt's own tokens *and* its whole label trie. The prompts' own tokens
   form a prefix trie too (a token two prompts share after the group's common prefix, such as a pair's
   first response, runs once). Each label-trie leaf gets
   its own llama.cpp sequence over one unified KV cache (a sequence copy only tags cells): a prompt's
   tokens belong to all its sequences and a trie node to the leaves below it, so every token attends to
   exactly its prompt and its trie ancestors, as if each label were evaluated alone after its prompt.

Before, the trie was walked depth first, one decode per node: on a 1.5B model each decode reads every
weight, so a 100-point judgment took 100 weight passes (10-15 s here); now it takes one.

The result equals scoring each label by its own evaluation of prompt + label within floating-point
reduction order (the test states the tolerance), because of two choices: the KV cache is float32, and no
decode while scoring is a lone token. llama.cpp's CPU kernels round a one-token batch differently from
larger ones, and with a float16 KV cache the logits also depend on how tokens were split into batches;
with llama.cpp's defaults the trie differed from brute force by up to 0.0055 in probability.

Logits are read straight from the llama.cpp context (``llama_get_logits_ith``), so the model is loaded
without ``logits_all`` (which would allocate ``n_ctx x n_vocab`` floats).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import BackendError, ConfigError, pip_dependency_error
from ._base import Backend, GenerateRequest, Generation, LabelRequest, LabelResult, neutralise
from ._llamacpp_tries import _Entry, _LabelTree, _prompt_trie, log_softmax
from ._models import ModelSpec, file_sha256
from ._threads import env_threads, physical_cores


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise pip_dependency_error("The llamacpp/ judges", ["llama-cpp-python"], "llamacpp") from exc
    return llama_cpp


class LlamaCppBackend(Backend):
    """A GGUF model on the CPU (or a GPU build) through llama-cpp-python.

    Args:
        spec: the model file and prompt format (from :func:`trustjudge.backends._models.resolve`).
        n_ctx: context size; ``None`` takes the smaller of the model's training context and 4096 (a
            larger context only costs KV-cache memory: judge prompts are short).
        n_threads: CPU threads for single tokens and batches alike (``None``: ``TRUSTJUDGE_THREADS`` if set,
            else :func:`physical_cores`).
        n_batch: tokens per decode call when evaluating a prompt.
        n_gpu_layers: layers to offload on GPU builds (0 on CPU builds).
        kv_f32: keep the KV cache in float32 (twice the memory of llama.cpp's float16 default). With
            float16, a label's probability depends on how tokens were batched (prompt + label in one
            decode vs the label on a cached prompt) by up to 0.008 here; with float32 the two agree bit
            for bit, so the trie equals brute force exactly.
    """

    default_tokens_per_s = 900.0

    def __init__(self, spec: ModelSpec, *, n_ctx: int | None = None, n_threads: int | None = None,
                 n_batch: int = 512, n_ubatch: int = 32, n_gpu_layers: int = 0, kv_f32: bool = True,
                 n_seq_max: int = 256) -> None:
        llama_cpp = _import_llama_cpp()
        if not spec.path.is_file() or spec.path.suffix != ".gguf":
            raise ConfigError(f"llamacpp/ judges need a .gguf file, got {spec.path}")
        self.spec = spec
        self._sha = file_sha256(spec.path)
        self._version = str(getattr(llama_cpp, "__version__", "unknown"))
        self.kv_f32 = kv_f32
        # One thread count for single tokens and batches, one per physical core this process may use (as
        # llama.cpp's own default): on 2 idle cores, 2 threads judged 1.77x (Qwen) and 1.81x (SmolLM2) faster
        # than 1. ggml's threads spin at barriers, so where other work holds a core they lose time (1.2x and
        # 1.34x slower than 1 thread with one of 2 cores busy; bench/results/threads.md): TRUSTJUDGE_THREADS.
        threads = n_threads or env_threads() or physical_cores()
        self.threads = threads
        kv_type = llama_cpp.GGML_TYPE_F32 if kv_f32 else None

        def load(size: int) -> Any:
            return llama_cpp.Llama(
                str(spec.path), n_ctx=size, n_batch=n_batch, n_ubatch=n_ubatch, n_threads=threads,
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
        self._use_sequences(n_seq_max)
        self._n_batch = n_batch
        self._n_seq_max = n_seq_max
        self._batch: Any = llama_cpp.llama_batch_init(n_batch, 0, n_seq_max)
        self._cached: list[int] = []
        self.computed_tokens = 0
        """Tokens evaluated so far (prompts, trie nodes and generated tokens; benchmarks read it)."""
        self._n_vocab = int(self._llm.n_vocab())
        self._label_cache: dict[str, tuple[int, ...]] = {}
        self._tree_cache: dict[tuple[str, ...], _LabelTree] = {}
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

    def _use_sequences(self, n_seq_max: int) -> None:
        """Give the model a context with ``n_seq_max`` sequences over one unified KV cache.

        llama-cpp-python's ``Llama`` builds its context with one sequence; the label trie needs one per
        branch, all sharing the prompt's KV cells (``kv_unified``: one buffer, so a sequence copy only tags
        cells). The replacement context has the same parameters otherwise.
        """
        from llama_cpp import _internals  # type: ignore[import-not-found,unused-ignore]

        lib = self._llama_cpp
        params = lib.llama_context_params.from_buffer_copy(self._llm.context_params)
        params.n_seq_max = n_seq_max
        params.kv_unified = True
        # Flash attention on: llama.cpp's other attention path gave a trie node a different result (up to
        # 0.5 in a logit on SmolLM2) depending on how many other sequences' cells sat between it and its
        # prompt in the KV cache; with flash attention the result did not depend on the batch's layout.
        params.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_ENABLED
        old = self._llm._ctx
        self._llm._ctx = _internals.LlamaContext(model=self._llm._model, params=params, verbose=False)
        self._llm.context_params = params
        old.close()

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
        # The texts are the judge's (system) and quoted user data: control-token strings in them are
        # broken so that they tokenize as plain text (see neutralise); plain prompts parse none at all.
        if self._chat is not None:
            messages = [{"role": "system", "content": neutralise(system, self._specials)},
                        {"role": "user", "content": neutralise(user, self._specials)}]
            return str(self._chat(messages=messages).prompt) + assistant_prefix
        return f"{system}\n\n{user}\n\n{assistant_prefix}"

    @functools.cached_property
    def _specials(self) -> tuple[str, ...]:
        """The text of every control or user-defined token of the vocabulary (``<|im_end|>``, ...)."""
        lib, model = self._llama_cpp, self._llm._model
        vocab = model.vocab
        kinds = lib.LLAMA_TOKEN_ATTR_CONTROL | lib.LLAMA_TOKEN_ATTR_USER_DEFINED
        found = set()
        for token in range(self._n_vocab):
            if lib.llama_vocab_get_attr(vocab, token) & kinds:
                text = model.token_get_text(token)
                if text:
                    found.add(text)
        return tuple(sorted(found))

    # -- tokens -----------------------------------------------------------------------------------
    def _encode(self, text: str) -> list[int]:
        # Same call as llama-cpp-python's completion endpoint: BOS if the model asks for it, and special
        # tokens written in the text (chat markers) parsed as such; quoted texts cannot hold any (they are
        # neutralised by format_prompt). A plain-format prompt has no markers: nothing in it is parsed.
        chat = self.prompt_format == "chat"
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=chat))

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
        self._forget()

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
        self.computed_tokens += len(tokens)
        try:
            llm.eval(tokens)
        except RuntimeError as exc:  # llama_decode failed: the state after `keep` is unknown
            self._forget()
            raise BackendError(f"llama.cpp decode failed: {exc}") from exc
        self._cached = list(llm.input_ids[: llm.n_tokens])
        return np.copy(np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(self._n_vocab,)))

    def _prefill(self, ids: list[int]) -> np.ndarray:
        """Evaluate a prompt, reusing the common prefix with what the context holds; return last logits."""
        cached = self._cached
        limit = min(len(ids) - 1, len(cached))  # at least one token is evaluated, to get its logits
        keep = 0
        while keep < limit and ids[keep] == cached[keep]:
            keep += 1
        return self._eval_from(keep, ids[keep:], min_batch=2)

    # -- batched label tries ------------------------------------------------------------------------
    def _label_tree(self, labels: tuple[str, ...]) -> _LabelTree:
        tree = self._tree_cache.get(labels)
        if tree is None:
            tree = _LabelTree([self._encode_label(label) for label in labels])
            self._tree_cache[labels] = tree
        return tree

    def _memory(self) -> Any:
        return self._llama_cpp.llama_get_memory(self._llm._ctx.ctx)

    def _decode(self, entries: list[_Entry]) -> None:
        """One ``llama_decode`` of tokens with explicit positions and sequence sets."""
        lib = self._llama_cpp
        batch = self._batch
        if len(entries) > self._n_batch:
            raise BackendError(f"internal: {len(entries)} tokens in one decode (limit {self._n_batch})")
        for i, (token, pos, seqs, logits) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = len(seqs)
            for j, seq in enumerate(seqs):
                batch.seq_id[i][j] = seq
            batch.logits[i] = logits
        batch.n_tokens = len(entries)
        self.computed_tokens += len(entries)
        code = lib.llama_decode(self._llm._ctx.ctx, batch)
        if code != 0:
            self._forget()
            raise BackendError(f"llama.cpp decode failed (code {code})")

    def _logits(self, index: int) -> np.ndarray:
        ptr = self._llama_cpp.llama_get_logits_ith(self._llm._ctx.ctx, index)
        return np.copy(np.ctypeslib.as_array(ptr, shape=(self._n_vocab,)))

    def _forget(self) -> None:
        """Drop the whole KV cache (after a failure, the cells' state is unknown)."""
        self._llm.reset()
        self._llama_cpp.llama_memory_clear(self._memory(), True)
        self._cached = []

    def _set_cached(self, ids: list[int]) -> None:
        """Record that sequence 0 holds exactly ``ids`` (also in llama-cpp-python's own bookkeeping)."""
        self._cached = list(ids)
        llm = self._llm
        llm.input_ids[: len(ids)] = ids
        llm.n_tokens = len(ids)

    def _extend_cache(self, ids: list[int], upto: int) -> None:
        """Make sequence 0 hold ``ids[:upto]``: keep the common prefix, decode the rest in chunks."""
        keep = 0
        cached = self._cached
        limit = min(upto, len(cached))
        while keep < limit and ids[keep] == cached[keep]:
            keep += 1
        mem = self._memory()
        self._llama_cpp.llama_memory_seq_rm(mem, -1, keep, -1)
        self._set_cached(ids[:keep])
        pos = keep
        while pos < upto:
            chunk = ids[pos: min(upto, pos + self._n_batch)]
            self._decode([(t, pos + j, (0,), False) for j, t in enumerate(chunk)])
            pos += len(chunk)
            self._set_cached(ids[:pos])

    def _plan_groups(self, prompts: list[list[int]], trees: list[_LabelTree]) -> list[list[int]]:
        """Cut the requests (in order) into groups that fit one decode: tokens, sequences, context."""
        groups: list[list[int]] = []
        current: list[int] = []
        for i in range(len(prompts)):
            trial = [*current, i]
            if current and not self._fits(trial, prompts, trees):
                groups.append(current)
                trial = [i]
            current = trial
        if current:
            groups.append(current)
        return groups

    def _shared(self, group: list[int], prompts: list[list[int]]) -> int:
        """Tokens the group's prompts all start with, leaving each prompt at least its last token."""
        first = prompts[group[0]]
        common = min(len(prompts[i]) for i in group) - 1
        for i in group[1:]:
            other = prompts[i]
            j = 0
            while j < common and first[j] == other[j]:
                j += 1
            common = j
        if len(group) == 1:
            # Alone, a prompt's own tokens are evaluated into the cache first; only its last token rides
            # with the trie (so a long prompt never needs one oversized decode).
            common = len(first) - 1
        return common

    def _fits(self, group: list[int], prompts: list[list[int]], trees: list[_LabelTree]) -> bool:
        shared = self._shared(group, prompts)
        nodes, _ = _prompt_trie(group, prompts, shared)
        tokens = len(nodes) + sum(len(trees[i].nodes) for i in group)
        seqs = sum(trees[i].n_seqs for i in group) + 1
        return tokens <= self._n_batch and seqs <= self._n_seq_max and shared + tokens <= self._llm.n_ctx()

    def _score_group(self, group: list[int], prompts: list[list[int]],
                     trees: list[_LabelTree]) -> list[tuple[np.ndarray, dict[tuple[int, ...], np.ndarray]]]:
        """Every prompt's next-token and trie-node log-probabilities from one decode.

        Sequence 0 holds the group's shared prefix (and, after the call, the last prompt: the next
        group may share more of it). Each prompt gets one sequence per leaf of its label trie: its own
        tokens belong to all of them, a trie node to the leaves below it, so each token attends exactly
        to its prompt and its ancestors in the trie, as if it had been evaluated alone.
        """
        lib = self._llama_cpp
        shared = self._shared(group, prompts)
        self._extend_cache(prompts[group[-1]], shared)
        mem = self._memory()
        # Order: the last prompt's own tokens first, so that sequence 0 (the shared prefix and the last
        # prompt, kept for the next group) sits in consecutive KV cells in position order; then the other
        # prompts' tokens; then the label tries, the last prompt's at the end. Every token comes after
        # the tokens it attends to (llama.cpp runs a decode's tokens in micro-batches, in order).
        order = [group[-1], *group[:-1]]
        seq_of: dict[int, tuple[int, ...]] = {}
        next_seq = 1
        for i in group:
            seq_of[i] = tuple(range(next_seq, next_seq + trees[i].n_seqs))
            next_seq += trees[i].n_seqs
        used = [seq for i in group for seq in seq_of[i]]
        for seq in used:
            lib.llama_memory_seq_cp(mem, 0, seq, -1, -1)
        # The prompts' own tokens as a trie: a token two prompts share (a pair's first response, say) is
        # evaluated once and belongs to both prompts' sequences, so no token of the group runs twice.
        prompt_nodes, paths = _prompt_trie(order, prompts, shared)
        members: list[set[int]] = [set() for _ in prompt_nodes]
        read = [False] * len(prompt_nodes)
        for i, path in zip(order, paths):
            own = seq_of[i] if i != order[0] else (0, *seq_of[i])
            for node in path:
                members[node].update(own)
            read[path[-1]] = True
        entries: list[_Entry] = [(token, pos, tuple(sorted(members[k])), read[k])
                                 for k, (token, pos) in enumerate(prompt_nodes)]
        roots = {i: path[-1] for i, path in zip(order, paths)}
        nodes_at: dict[int, list[tuple[tuple[int, ...], int]]] = {}

        def add_trie(i: int) -> None:
            ids, tree, seqs = prompts[i], trees[i], seq_of[i]
            nodes_at[i] = []
            for node, leaves in zip(tree.nodes, tree.node_leaves):
                nodes_at[i].append((node, len(entries)))
                entries.append((node[-1], len(ids) + len(node) - 1, tuple(seqs[k] for k in leaves), True))

        for i in order[1:]:
            add_trie(i)
        add_trie(order[0])
        wanted = [(roots[i], nodes_at[i]) for i in group]
        if len(entries) < 2:
            # llama.cpp's CPU kernels round a one-token batch differently from larger ones (every size
            # from 2 up gives bit-identical logits with a float32 KV cache): re-evaluate the token before.
            for seq in used:
                lib.llama_memory_seq_rm(mem, seq, -1, -1)
            last = prompts[group[-1]]
            self._extend_cache(last, len(last) - 2)
            seqs = tuple(used)
            for seq in seqs:
                lib.llama_memory_seq_cp(mem, 0, seq, -1, -1)
            entries = [(last[-2], len(last) - 2, (0, *seqs), False), entries[0]]
            wanted = [(1, [])]
        try:
            self._decode(entries)
            out = []
            for root_index, nodes in wanted:
                root = log_softmax(self._logits(root_index))
                out.append((root, {node: log_softmax(self._logits(k)) for node, k in nodes}))
        finally:
            for seq in used:
                lib.llama_memory_seq_rm(mem, seq, -1, -1)
        self._set_cached(prompts[group[-1]])
        return out

    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        start = time.perf_counter()
        prompts = [self._encode(req.prompt) for req in requests]
        if any(not ids for ids in prompts):
            raise BackendError("empty prompt")
        trees = [self._label_tree(req.labels) for req in requests]
        for ids, tree in zip(prompts, trees):
            if tree.n_seqs + 1 > self._n_seq_max:
                raise BackendError(f"{tree.n_seqs} label trie branches exceed llama.cpp's {self._n_seq_max} sequences")
            if len(ids) + len(tree.nodes) > self._llm.n_ctx():
                raise BackendError(f"{len(ids)} prompt tokens + {len(tree.nodes)} label trie nodes exceed the context")
        values: list[tuple[float, ...]] = [()] * len(requests)
        for group in self._plan_groups(prompts, trees):
            for i, (root, node_lp) in zip(group, self._score_group(group, prompts, trees)):
                row = []
                for seq in trees[i].label_ids:
                    total = float(root[seq[0]])
                    for j in range(1, len(seq)):
                        total += float(node_lp[seq[:j]][seq[j]])
                    row.append(total)
                values[i] = tuple(row)
        latency = (time.perf_counter() - start) / len(requests)
        return [LabelResult(v, len(ids), latency) for v, ids in zip(values, prompts)]

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
            self._llama_cpp.llama_batch_free(self._batch)
            llm._ctx.close()
            llm.close()


def load(rest: str) -> LlamaCppBackend:
    """Build the backend for the part of a judge name after ``llamacpp/``."""
    from ._models import resolve

    spec = resolve(rest)
    if spec.path.is_dir():
        raise ConfigError(f"llamacpp/ judges need a .gguf file; {spec.path} is a folder (use hf/ for it)")
    return LlamaCppBackend(spec)


__all__ = ["LlamaCppBackend", "env_threads", "load", "log_softmax", "physical_cores"]
