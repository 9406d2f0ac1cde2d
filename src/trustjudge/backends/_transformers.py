"""The embedded default backend: a causal LM run in-process with transformers and torch.

Label scoring is exact. For a batch of prompts the backend

1. reuses the KV cache of the longest common token prefix with the previous prompt (the engine orders
   prompts so that the rubric, question and first response are shared), and
2. scores every label continuation at once with *tree attention*: the label token trie is flattened
   into one sequence whose attention mask lets each node see the prompt and its own ancestors only,
   so a 100-point scale costs ~100 extra tokens instead of 100 full passes. The nodes ride in the
   same forward pass as the prompt's uncached tokens: one model call per judgment.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import PrerequisiteError
from ._base import Backend, GenerateRequest, Generation, LabelRequest, LabelResult
from ._models import ModelSpec, converted_folder, file_sha256

try:
    import torch
except ImportError as exc:  # pragma: no cover - torch is a core dependency
    raise PrerequisiteError("The transformers backend needs torch: `pip install torch==2.13.0`.") from exc


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


class TransformersBackend(Backend):
    """A causal LM on the CPU (fp32) or a GPU (bf16) through transformers."""

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto") -> None:
        self.spec = spec
        self._sha = file_sha256(spec.path)
        self._device_name = device
        self._dtype_name = dtype
        from transformers import AutoConfig, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        self._folder = converted_folder(spec, self._sha)

        self.tokenizer = AutoTokenizer.from_pretrained(str(self._folder))
        self.config = AutoConfig.from_pretrained(str(self._folder))
        self._model: Any = None
        self._cache: Any = None
        self._cached_ids: list[int] = []
        self._label_cache: dict[str, tuple[int, ...]] = {}
        self._tree_blocks: dict[_Trie, Any] = {}
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
            messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
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
            self._model = model.to(self.device).eval()
            # transformers 5.x renames `past_key_values` to `cache`; accept both.
            params = inspect.signature(self._model.forward).parameters
            self._cache_kw = "cache" if "cache" in params else "past_key_values"
        return self._model

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=True).input_ids)

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
            limit = min(len(ids) - 1, len(self._cached_ids))
            while keep < limit and ids[keep] == self._cached_ids[keep]:
                keep += 1
        if keep == 0 or self._cache is None:
            # A plain DynamicCache keeps every layer whole (no sliding-window eviction), so the cache
            # can be cropped back to any prefix; sliding windows are applied by the attention masks.
            self._cache = DynamicCache()
            keep = 0
        else:
            have = self._cache.get_seq_length()
            if have > keep:
                self._cache.crop(keep - have)
        return keep

    def _prefill(self, ids: list[int]) -> Any:
        """Run the prompt, reusing the cached common prefix; return the last position's logits."""
        model = self.model
        keep = self._reuse(ids)
        new = torch.tensor([ids[keep:]], device=self.device)
        pos = torch.arange(keep, len(ids), device=self.device).unsqueeze(0)
        out = model(input_ids=new, position_ids=pos, **{self._cache_kw: self._cache}, use_cache=True, logits_to_keep=1)
        self._cached_ids = list(ids)
        return out.logits[0, -1].float()

    def _prompt_and_tree_mask(self, trie: _Trie, keep: int, prompt_len: int) -> Any:
        """Additive mask of one forward pass over the uncached prompt tokens and the trie nodes.

        Prompt rows are causal over the cached prefix and the prompt; node rows see the whole prompt and
        their own ancestors (itself included). Sliding-window layers (Gemma 3) get the window applied
        to every row.
        """
        n = len(trie.node_tokens)
        s = prompt_len - keep
        neg = torch.finfo(self.dtype).min
        tree = self._tree_blocks.get(trie)
        if tree is None:
            tree = torch.full((n, n), neg, dtype=self.dtype)
            for i, anc in enumerate(trie.node_ancestors):
                tree[i, list(anc)] = 0.0
            tree = tree.to(self.device)
            self._tree_blocks[trie] = tree
        full = torch.full((s + n, prompt_len + n), neg, dtype=self.dtype, device=self.device)
        cols = torch.arange(prompt_len, device=self.device)
        rows = torch.arange(keep, prompt_len, device=self.device)
        full[:s, :prompt_len] = torch.where(cols[None, :] <= rows[:, None], 0.0, neg)
        full[s:, :prompt_len] = 0.0
        full[s:, prompt_len:] = tree
        full = full[None, None]
        text_config = self.config.get_text_config()
        window = getattr(text_config, "sliding_window", None)
        if not window or "sliding_attention" not in (getattr(text_config, "layer_types", None) or []):
            return full
        positions = torch.cat([rows, torch.tensor([prompt_len + d - 1 for d in trie.node_depth],
                                                  dtype=rows.dtype, device=self.device)])
        too_far = (positions[:, None] - cols[None, :]) >= window
        slide = full.clone()
        slide[0, 0, :, :prompt_len] = slide[0, 0, :, :prompt_len].masked_fill(too_far, neg)
        return {"full_attention": full, "sliding_attention": slide}

    @torch.inference_mode()
    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        results = []
        for req in requests:
            start = time.perf_counter()
            ids = self._encode(req.prompt)
            trie = self._trie(req.labels)
            model = self.model
            keep = self._reuse(ids)
            # One forward pass: the uncached prompt tokens, then the trie nodes (tree attention).
            n = len(trie.node_tokens)
            positions = list(range(keep, len(ids))) + [len(ids) + d - 1 for d in trie.node_depth]
            out = model(
                input_ids=torch.tensor([ids[keep:] + list(trie.node_tokens)], device=self.device),
                position_ids=torch.tensor([positions], device=self.device),
                attention_mask=self._prompt_and_tree_mask(trie, keep, len(ids)),
                **{self._cache_kw: self._cache},
                use_cache=True,
                logits_to_keep=n + 1,  # the prompt's last position and every node
            )
            logits = out.logits[0].float()
            root = torch.log_softmax(logits[0], dim=-1)
            node_lp = torch.log_softmax(logits[1:], dim=-1) if n else None
            if n:
                self._cache.crop(-n)
            self._cached_ids = list(ids)
            values = []
            for seq, nodes in zip(trie.label_tokens, trie.label_nodes):
                total = root[seq[0]]
                for tok, node in zip(seq[1:], nodes[1:]):
                    assert node_lp is not None
                    total = total + node_lp[node, tok]
                values.append(float(total))
            results.append(LabelResult(tuple(values), len(ids), time.perf_counter() - start))
        return results

    @torch.inference_mode()
    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        results = []
        for req in requests:
            start = time.perf_counter()
            ids = self._encode(req.prompt)
            logits = self._prefill(ids)
            gen = torch.Generator().manual_seed(req.seed)
            out: list[int] = []
            lps: list[float] = []
            finish = "length"
            text = ""
            for _ in range(req.max_new_tokens):
                logp = torch.log_softmax(logits, dim=-1)
                if req.temperature <= 0:
                    tok = int(torch.argmax(logp))
                else:
                    probs = torch.softmax(logits / req.temperature, dim=-1).cpu()
                    tok = int(torch.multinomial(probs, 1, generator=gen))
                out.append(tok)
                lps.append(float(logp[tok]))
                if tok in self._eos:
                    finish = "eos"
                    text = self.tokenizer.decode(out[:-1], skip_special_tokens=True)
                    break
                text = self.tokenizer.decode(out, skip_special_tokens=True)
                hits = [text.find(s) for s in req.stop if s in text]
                if hits:
                    text = text[: min(hits)]
                    finish = "stop"
                    break
                step = self.model(
                    input_ids=torch.tensor([[tok]], device=self.device),
                    position_ids=torch.tensor([[len(ids) + len(out) - 1]], device=self.device),
                    **{self._cache_kw: self._cache},
                    use_cache=True,
                )
                logits = step.logits[0, -1].float()
            # The cache holds the prompt and every token fed back (all but a final stop/EOS token).
            self._cached_ids = list(ids) + (out if finish == "length" else out[:-1])
            have = self._cache.get_seq_length()
            if have > len(self._cached_ids):
                self._cache.crop(len(self._cached_ids) - have)
            results.append(Generation(text, tuple(lps), finish, len(ids), time.perf_counter() - start))  # type: ignore[arg-type]
        return results
