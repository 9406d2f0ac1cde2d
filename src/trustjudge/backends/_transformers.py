"""The embedded default backend: a causal LM run in-process with transformers and torch.

Label scoring is exact. For a batch of prompts the backend

1. reuses the KV cache of the longest common token prefix with the previous prompt (the engine orders
   prompts so that the rubric, question and first response are shared), and
2. scores every label continuation at once with *tree attention*: the label token trie is flattened
   into one sequence whose attention mask lets each node see the prompt and its own ancestors only,
   so a 100-point scale costs ~100 extra tokens instead of 100 full passes. The nodes ride in the
   same forward pass as the prompt's uncached tokens, and
3. batches consecutive prompts that share a prefix (the responses to one question; the pairs with one
   first response): the shared part is computed once, then every prompt's remaining tokens and label
   nodes run as left-padded rows of one forward pass. On a CPU a small model's call costs a fixed
   ~30 ms of weight reads on top of its tokens, so five 120-token rows in one call run 1.2-1.4x faster
   than five calls (`bench/call_cost.py`).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import PrerequisiteError
from ._base import Backend, GenerateRequest, Generation, LabelRequest, LabelResult, neutralise
from ._models import ModelSpec, converted_folder, file_sha256

try:
    import torch
    import transformers  # noqa: F401 - checked here so that a missing extra is one clear error
except ImportError as exc:
    raise PrerequisiteError(
        f"The transformers backend (hf/...) needs the `hf` extra ({exc.name} is missing): "
        "`pip install torch==2.13.0 && pip install 'trustjudge[hf]'` (the pinned CPU torch first: an unpinned "
        "one pulls a multi-GB CUDA build)."
    ) from exc


@dataclass(frozen=True)
class _Trie:
    """Label token sequences flattened into tree-attention nodes."""

    label_tokens: tuple[tuple[int, ...], ...]
    node_tokens: tuple[int, ...]
    node_depth: tuple[int, ...]  # 1 for the first label token
    node_ancestors: tuple[tuple[int, ...], ...]  # node indices, self included
    # For each label, the node whose output predicts each token after the first (-1 = prompt end).
    label_nodes: tuple[tuple[int, ...], ...]


def build_trie(label_tokens: Sequence[Sequence[int]]) -> _Trie:
    """Flatten label token sequences into the trie nodes whose outputs are needed."""
    index: dict[tuple[int, ...], int] = {}
    tokens: list[int] = []
    depth: list[int] = []
    ancestors: list[tuple[int, ...]] = []
    for seq in label_tokens:
        for j in range(1, len(seq)):  # prefixes seq[:j] that predict seq[j]
            prefix = tuple(seq[:j])
            if prefix in index:
                continue
            parent = index.get(prefix[:-1])
            index[prefix] = len(tokens)
            tokens.append(prefix[-1])
            depth.append(j)
            ancestors.append((ancestors[parent] if parent is not None else ()) + (index[prefix],))
    label_nodes = tuple(
        tuple([-1] + [index[tuple(seq[:j])] for j in range(1, len(seq))]) for seq in label_tokens
    )
    return _Trie(tuple(tuple(s) for s in label_tokens), tuple(tokens), tuple(depth), tuple(ancestors), label_nodes)


def _common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = 0
    while n < limit and a[n] == b[n]:
        n += 1
    return n


_EMPTY = build_trie([])
# Batched label scoring: how many rows and tokens one forward pass takes, and how many shared tokens
# (summed over a group's rows) may be recomputed to let one more request join the group.
_MAX_ROWS = 16
_MAX_LOGITS = 2**25  # rows x (trie nodes + 1) x vocabulary: float32 logits held at once (128 MB)
_MAX_TOKENS = 4096
_MAX_KV_TOKENS = 32768  # rows x prompt length: the shared prefix is copied into every row's KV cache
_MAX_LOST = 32


class TransformersBackend(Backend):
    """A causal LM on the CPU (fp32) or a GPU (bf16) through transformers."""

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto") -> None:
        self.spec = spec
        self._sha = file_sha256(spec.path)
        self._device_name = device
        self._dtype_name = dtype
        from transformers import AutoConfig, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        self._folder = converted_folder(spec, self._sha)

        self.tokenizer = AutoTokenizer.from_pretrained(str(self._folder))
        self.config = AutoConfig.from_pretrained(str(self._folder))
        self._model: Any = None
        self._cache: Any = None
        self._cached_ids: list[int] = []
        self._label_cache: dict[str, tuple[int, ...]] = {}
        self._tree_blocks: dict[_Trie, Any] = {}
        self._gather: dict[_Trie, tuple[Any, Any, Any]] = {}
        self.computed_tokens = 0
        self._vocab = len(self.tokenizer)
        """Token positions run through the model by label scoring (padding and label nodes included)."""
        fmt = spec.prompt_format
        if fmt == "auto":
            fmt = "chat" if getattr(self.tokenizer, "chat_template", None) else "plain"
        self.prompt_format = fmt
        eos = {self.tokenizer.eos_token_id}
        gen_eos = getattr(getattr(self, "config", None), "eos_token_id", None)
        if isinstance(gen_eos, int):
            eos.add(gen_eos)
        elif isinstance(gen_eos, list):
            eos.update(gen_eos)
        self._eos = {e for e in eos if e is not None}
        pad = self.tokenizer.pad_token_id
        self._eos_pad = int(pad if pad is not None else min(self._eos, default=0))

    # -- identity -------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        return f"hf:{self._sha}:{self.prompt_format}"

    @property
    def context_length(self) -> int:
        text = self.config.get_text_config() if hasattr(self.config, "get_text_config") else self.config
        return int(getattr(text, "max_position_embeddings", 2048))

    def count_tokens(self, text: str) -> int:
        return len(self._encode(text))

    def format_prompt(self, system: str, user: str, assistant_prefix: str) -> str:
        if self.prompt_format == "chat":
            # Control-token strings in the quoted texts are broken so that they stay plain text.
            specials = self._specials
            messages = [{"role": "system", "content": neutralise(system, specials)},
                        {"role": "user", "content": neutralise(user, specials)}]
            rendered = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return str(rendered) + assistant_prefix
        return f"{system}\n\n{user}\n\n{assistant_prefix}"

    # -- model ------------------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        if self._model is None:
            from transformers import AutoModelForCausalLM

            device = self._device_name
            if device == "auto":
                device = "cuda" if torch.cuda.is_available() else "cpu"
            dtype_name = self._dtype_name
            if dtype_name == "auto":
                dtype_name = "bfloat16" if device.startswith("cuda") else "float32"
            self.device = torch.device(device)
            self.dtype = getattr(torch, dtype_name)
            model = AutoModelForCausalLM.from_pretrained(str(self._folder), dtype=self.dtype)
            self._model = model.to(self.device).eval()  # type: ignore[arg-type]
            # transformers 5.x renames `past_key_values` to `cache`; accept both.
            params = inspect.signature(self._model.forward).parameters
            self._cache_kw = "cache" if "cache" in params else "past_key_values"
        return self._model

    def _encode(self, text: str) -> list[int]:
        # Chat prompts parse the template's markers (quoted texts hold none: format_prompt neutralised
        # them); a plain-format prompt has no markers, so nothing in it becomes a control token.
        plain = self.prompt_format != "chat"
        return list(self.tokenizer(text, add_special_tokens=True, split_special_tokens=plain).input_ids)

    @functools.cached_property
    def _specials(self) -> tuple[str, ...]:
        """The text of every special or added token (``<|im_end|>``, ...)."""
        tok = self.tokenizer
        found = set(tok.all_special_tokens)
        found.update(t.content for t in getattr(tok, "added_tokens_decoder", {}).values())
        return tuple(sorted(t for t in found if t))

    def _encode_label(self, label: str) -> tuple[int, ...]:
        ids = self._label_cache.get(label)
        if ids is None:
            ids = tuple(self.tokenizer(label, add_special_tokens=False).input_ids)
            self._label_cache[label] = ids
        return ids

    def max_label_tokens(self, labels: Sequence[str]) -> int:
        return max(len(self._encode_label(label)) for label in labels)

    @lru_cache(maxsize=16)  # noqa: B019 - one backend per process; labels are few
    def _trie(self, labels: tuple[str, ...]) -> _Trie:
        return build_trie([self._encode_label(label) for label in labels])

    def reset_cache(self) -> None:
        """Forget the reused KV state (tests use it to compare with and without reuse)."""
        self._cache = None
        self._cached_ids = []

    def _reuse(self, ids: list[int]) -> int:
        """Crop the cached KV state to its longest prefix shared with ``ids`` (at most all but the last
        token); return that prefix's length (0: a fresh cache)."""
        from transformers import DynamicCache

        keep = 0
        if self._cache is not None:
            keep = _common_prefix(ids, self._cached_ids, min(len(ids) - 1, len(self._cached_ids)))
        if keep == 0 or self._cache is None:
            # A plain DynamicCache keeps every layer whole (no sliding-window eviction), so the cache
            # can be cropped back to any prefix; sliding windows are applied by the attention masks.
            self._cache = DynamicCache()
            keep = 0
        else:
            self._crop(keep)
        return keep

    def _crop(self, end: int) -> None:
        """Drop the cached KV state after its first ``end`` positions."""
        have = self._cache.get_seq_length()
        if have > end:
            self._cache.crop(end - have)

    def _keep_row(self, end: int, row: int, rows: int) -> None:
        """After a batched call over ``rows`` rows: keep row ``row``'s first ``end`` cached positions."""
        self._crop(end)
        if rows > 1:
            self._cache.batch_select_indices(torch.tensor([row], device=self.device))

    def _start_group(self, first: list[int], shared: int, rows: int) -> int:
        """Reuse the cache for a group whose ``rows`` prompts share ``first[:shared]``; with several
        rows, compute the rest of the shared part once (one row). Returns the cached prefix length."""
        keep = self._reuse(first[: shared + 1])  # at most `shared` tokens
        if rows > 1 and keep < shared:
            self._forward([first[keep:shared]], _EMPTY, keep)
            self._cached_ids = first[:shared]
            keep = shared
        return keep

    @property
    def _sliding_window(self) -> int | None:
        """Gemma 3's sliding window where the model has sliding-window layers, else None."""
        text_config = self.config.get_text_config()
        window = getattr(text_config, "sliding_window", None)
        if not window or "sliding_attention" not in (getattr(text_config, "layer_types", None) or []):
            return None
        return int(window)

    # -- label scoring ----------------------------------------------------------------------------
    def _groups(self, encoded: list[list[int]], tries: list[_Trie]) -> list[tuple[list[int], int]]:
        """Split consecutive requests into groups, each scored in one batched forward pass.

        A group shares its label trie and a token prefix (computed once). A request joins the group
        unless that would shorten the shared prefix by more than ``_MAX_LOST`` tokens summed over the
        group's rows (recomputing them costs more than one more call) or exceed the batch limits.
        Returns (members, shared prefix length); a lone request's prefix is all but its last token.
        """
        groups: list[tuple[list[int], int]] = []
        for i, ids in enumerate(encoded):
            if groups:
                members, shared = groups[-1]
                first = encoded[members[0]]
                common = _common_prefix(first, ids, min(shared, len(ids) - 1))
                rows = len(members) + 1
                width = max(len(encoded[m]) for m in [*members, i]) - common
                if (tries[members[0]] is tries[i] and rows <= _MAX_ROWS
                        and rows * (len(tries[i].node_tokens) + 1) * self._vocab <= _MAX_LOGITS
                        and rows * width <= _MAX_TOKENS
                        and rows * (width + common) <= _MAX_KV_TOKENS
                        and (len(members) == 1 or (shared - common) * len(members) <= _MAX_LOST)):
                    groups[-1] = ([*members, i], common)
                    continue
            groups.append(([i], len(ids) - 1))
        return groups

    def _batch_mask(self, trie: _Trie, prefix: int, lengths: list[int]) -> tuple[Any, Any]:
        """Position ids and additive attention mask(s) of one batched pass after a cached prefix.

        Row ``b`` holds left padding, its ``lengths[b]`` uncached prompt tokens, then the trie nodes.
        Prompt tokens are causal (and see the whole prefix); nodes see the prefix, their row's prompt
        tokens and their own ancestors; padding is seen by nobody. Sliding-window layers (Gemma 3) get
        the window applied to every row.
        """
        dev = self.device
        n = len(trie.node_tokens)
        width = max(lengths)
        q = width + n
        pad = torch.tensor([width - s for s in lengths], device=dev)[:, None]  # (B, 1)
        col = torch.arange(q, device=dev)[None, :]
        is_tok = (col >= pad) & (col < width)  # (B, Q)
        is_node = (col >= width).expand_as(is_tok)
        depth = torch.tensor(trie.node_depth, device=dev, dtype=torch.long)
        pos = torch.where(is_tok, prefix + col - pad, prefix)
        if n:
            pos[:, width:] = prefix + torch.tensor(lengths, device=dev)[:, None] + depth[None, :] - 1
        tree = self._tree_blocks.get(trie)
        if tree is None:
            tree = torch.zeros((n, n), dtype=torch.bool)
            for i, anc in enumerate(trie.node_ancestors):
                tree[i, list(anc)] = True
            tree = self._tree_blocks[trie] = tree.to(dev)
        causal = col[0][:, None] >= col[0][None, :]  # (Q, Q)
        new = (is_tok[:, :, None] & is_tok[:, None, :] & causal) | (is_node[:, :, None] & is_tok[:, None, :])
        new[:, width:, width:] = tree
        allowed = torch.cat([torch.ones((len(lengths), q, prefix), dtype=torch.bool, device=dev), new], dim=2)
        neg = torch.finfo(self.dtype).min
        full = torch.where(allowed, 0.0, neg).to(self.dtype)[:, None]
        window = self._sliding_window
        if window is None:
            return pos, full
        keys = torch.cat([torch.arange(prefix, device=dev).expand(len(lengths), -1), pos], dim=1)
        near = (pos[:, :, None] - keys[:, None, :]) < window
        slide = torch.where(allowed & near, 0.0, neg).to(self.dtype)[:, None]
        return pos, {"full_attention": full, "sliding_attention": slide}

    def _forward(self, rows: list[list[int]], trie: _Trie, prefix: int) -> tuple[Any, bool]:
        """One model call over ``rows`` (each: its tokens after the cached ``prefix``) and their trie
        nodes. Returns the logits at each row's last token and its nodes, (B, nodes + 1, V),
        and whether the cache now holds the prefix and the last row's tokens (True) or the prefix only
        (False: the last row was padded)."""
        logits = self._run_rows(rows, trie, prefix)
        lengths = [len(r) for r in rows]
        width = max(lengths)
        # Keep one row for the next call to reuse: the last one if it has no padding, else the prefix.
        whole = lengths[-1] == width
        self._keep_row(prefix + width if whole else prefix, len(rows) - 1, len(rows))
        return logits, whole

    def _run_rows(self, rows: list[list[int]], trie: _Trie, prefix: int) -> Any:
        """The model call of :meth:`_forward`, leaving the cache with one row per prompt (padding and
        nodes included); returns the logits (B, nodes + 1, V)."""
        n = len(trie.node_tokens)
        lengths = [len(r) for r in rows]
        width = max(lengths)
        pad = self._eos_pad
        ids = torch.tensor([[pad] * (width - len(r)) + r + list(trie.node_tokens) for r in rows], device=self.device)
        pos, mask = self._batch_mask(trie, prefix, lengths)
        self.computed_tokens += ids.numel()
        if len(rows) > 1 and prefix > 0:
            self._cache.batch_repeat_interleave(len(rows))
        out = self.model(input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=True,
                         logits_to_keep=n + 1, **{self._cache_kw: self._cache})
        return out.logits.float()

    @torch.inference_mode()
    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        _ = self.model  # loaded (sets the device) before any tensor is made
        results: list[LabelResult | None] = [None] * len(requests)
        encoded = [self._encode(req.prompt) for req in requests]
        tries = [self._trie(req.labels) for req in requests]
        for members, shared in self._groups(encoded, tries):
            start = time.perf_counter()
            first = encoded[members[0]]
            trie = tries[members[0]]
            keep = self._start_group(first, shared, len(members))
            logits, whole = self._forward([encoded[i][keep:] for i in members], trie, keep)
            self._cached_ids = list(encoded[members[-1]]) if whole else first[:keep]
            sums = self._label_sums(trie, logits)
            each = (time.perf_counter() - start) / len(members)
            for row, i in enumerate(members):
                results[i] = LabelResult(tuple(sums[row].tolist()), len(encoded[i]), each)
        return [r for r in results if r is not None]

    def _label_sums(self, trie: _Trie, logits: Any) -> Any:
        """(B, labels) log-probabilities: each label's tokens read from the root or its trie nodes
        (log-softmax of the few entries needed, not of the whole vocabulary)."""
        index = self._gather.get(trie)
        if index is None:
            rows, toks, owner = [], [], []
            for k, (seq, nodes) in enumerate(zip(trie.label_tokens, trie.label_nodes)):
                for tok, node in zip(seq, nodes):
                    rows.append(node + 1)  # row 0 is the prompt's last token (node -1)
                    toks.append(tok)
                    owner.append(k)
            index = (torch.tensor(rows, device=self.device), torch.tensor(toks, device=self.device),
                     torch.tensor(owner, device=self.device))
            self._gather[trie] = index
        rows_t, toks_t, owner_t = index
        norm = torch.logsumexp(logits, dim=-1)  # (B, nodes + 1)
        picked = logits[:, rows_t, toks_t] - norm[:, rows_t]  # (B, label tokens)
        sums = torch.zeros((logits.shape[0], len(trie.label_tokens)), dtype=picked.dtype, device=picked.device)
        return sums.index_add_(1, owner_t, picked)

    def _step_mask(self, seen: Any, positions: Any, keys: Any) -> Any:
        """Additive mask(s) of one decoding step: row ``b`` sees the columns ``seen[b]``; sliding-window
        layers also drop keys at least a window behind the row's position."""
        neg = torch.finfo(self.dtype).min
        full = torch.where(seen, 0.0, neg).to(self.dtype)[:, None, None, :]
        window = self._sliding_window
        if window is None:
            return full
        near = (positions[:, None] - keys) < window
        slide = torch.where(seen & near, 0.0, neg).to(self.dtype)[:, None, None, :]
        return {"full_attention": full, "sliding_attention": slide}

    @torch.inference_mode()
    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """Decode prompts that share a prefix together, one batched step per token (the shared part is
        computed once); each row samples with its own seeded generator and stops on its own."""
        _ = self.model
        results: list[Generation | None] = [None] * len(requests)
        encoded = [self._encode(req.prompt) for req in requests]
        for members, shared in self._groups(encoded, [_EMPTY] * len(requests)):
            start = time.perf_counter()
            first = encoded[members[0]]
            keep = self._start_group(first, shared, len(members))
            rows = [encoded[i][keep:] for i in members]
            logits = self._run_rows(rows, _EMPTY, keep)[:, -1]
            for i, gen in zip(members, self._decode(rows, keep, logits, [requests[i] for i in members])):
                results[i] = Generation(gen[0], gen[1], gen[2], len(encoded[i]),  # type: ignore[arg-type]
                                        (time.perf_counter() - start) / len(members))
            self._keep_row(keep, 0, len(members))  # back to the shared prefix, one row
            self._cached_ids = first[:keep]
        return [r for r in results if r is not None]

    def _decode(self, rows: list[list[int]], prefix: int, logits: Any,
                reqs: list[GenerateRequest]) -> list[tuple[str, tuple[float, ...], str]]:
        """The decoding loop after :meth:`_run_rows`: (text, token log-probabilities, finish reason) per row."""
        dev = self.device
        b = len(rows)
        width = max(len(r) for r in rows)
        lengths = torch.tensor([prefix + len(r) for r in rows], device=dev)
        col = torch.arange(prefix + width, device=dev)[None, :]
        pad = (width - torch.tensor([len(r) for r in rows], device=dev))[:, None]
        seen = (col < prefix) | (col >= prefix + pad)  # (B, prefix + width): padding is never seen
        keys = torch.where(col < prefix, col, lengths[:, None] - (prefix + width) + col)
        gens = [torch.Generator().manual_seed(req.seed) for req in reqs]
        outs: list[list[int]] = [[] for _ in rows]
        lps: list[list[float]] = [[] for _ in rows]
        done: list[tuple[str, str] | None] = [("", "length") if req.max_new_tokens <= 0 else None for req in reqs]
        step = 0
        while any(d is None for d in done):
            logp = torch.log_softmax(logits, dim=-1)
            feed = []
            for r, req in enumerate(reqs):
                if done[r] is not None:
                    feed.append(self._eos_pad)
                    continue
                if req.temperature <= 0:
                    tok = int(torch.argmax(logp[r]))
                else:
                    probs = torch.softmax(logits[r] / req.temperature, dim=-1).cpu()
                    tok = int(torch.multinomial(probs, 1, generator=gens[r]))
                outs[r].append(tok)
                lps[r].append(float(logp[r, tok]))
                feed.append(tok)
                if tok in self._eos:
                    done[r] = (str(self.tokenizer.decode(outs[r][:-1], skip_special_tokens=True)), "eos")
                    continue
                text = str(self.tokenizer.decode(outs[r], skip_special_tokens=True))
                hits = [text.find(x) for x in req.stop if x in text]
                if hits:
                    done[r] = (text[: min(hits)], "stop")
                elif len(outs[r]) >= req.max_new_tokens:
                    done[r] = (text, "length")
            if all(d is not None for d in done):
                break
            positions = lengths + step
            seen = torch.cat([seen, torch.ones((b, 1), dtype=torch.bool, device=dev)], dim=1)
            keys = torch.cat([keys, positions[:, None]], dim=1)
            out = self.model(input_ids=torch.tensor(feed, device=dev)[:, None], position_ids=positions[:, None],
                             attention_mask=self._step_mask(seen, positions, keys),
                             **{self._cache_kw: self._cache}, use_cache=True)
            self.computed_tokens += b
            logits = out.logits[:, -1].float()
            step += 1
        return [(d[0], tuple(lp), d[1]) for d, lp in zip(done, lps) if d is not None]
