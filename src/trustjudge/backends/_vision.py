"""A vision judge in process: an image-text-to-text model (transformers' ``AutoModelForImageTextToText`` with
its ``AutoProcessor``) from a local folder, ``hf//path/to/folder`` (a folder with a processor config).

Prompts are rendered with the processor's chat template, each image a content part where its template field
put it; the rendered string keeps each image as its marker (``trustjudge._images.marker``: the digest), so
store keys cover the image bytes. A call swaps the markers for the processor's image token and hands the
images to the processor, which expands each into the model's image tokens.

Labels are exact, as on the text backends: one forward pass over the prompt (and its images) gives the first
label token's log-probabilities and a KV cache; the labels' further tokens run as rows of one more pass over
that cache (teacher forcing), so a 0-100 scale costs one prompt pass and one short batched pass.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .._images import MARKER, Image, lookup
from ..errors import BackendError, ConfigError, PrerequisiteError
from ._base import Backend, GenerateRequest, Generation, LabelRequest, LabelResult, neutralise
from ._models import ModelSpec, file_sha256

try:
    import torch
    import transformers  # noqa: F401 - checked here so that a missing extra is one clear error
except ImportError as exc:
    raise PrerequisiteError(
        f"The transformers backend (hf/...) needs the `hf` extra ({exc.name} is missing): "
        "`pip install torch==2.13.0 && pip install 'trustjudge[hf]'`."
    ) from exc

PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")
"""A model folder holding one of these is an image-text-to-text model (``hf/`` builds this backend)."""


def is_vision_folder(spec: ModelSpec) -> bool:
    return spec.path.is_dir() and any((spec.path / name).exists() for name in PROCESSOR_FILES)


class VisionTransformersBackend(Backend):
    """An image-text-to-text model through transformers (CPU fp32, or a GPU in bf16)."""

    accepts_images = True
    default_tokens_per_s = 300.0

    def __init__(self, spec: ModelSpec, *, device: str = "auto") -> None:
        from transformers import AutoConfig, AutoProcessor
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        self.spec = spec
        self._folder = spec.path
        self._sha = file_sha256(spec.path)
        self.processor: Any = AutoProcessor.from_pretrained(str(spec.path))  # type: ignore[no-untyped-call]
        self.tokenizer: Any = getattr(self.processor, "tokenizer", None)
        if self.tokenizer is None:
            raise ConfigError(f"{spec.path}: the processor has no tokenizer (not an image-text-to-text model)")
        self.image_token: str = str(getattr(self.processor, "image_token", None) or "<image>")
        self.config = AutoConfig.from_pretrained(str(spec.path))
        fmt = spec.prompt_format
        if fmt == "auto":
            fmt = "chat" if getattr(self.processor, "chat_template", None) else "plain"
        self.prompt_format = fmt
        self._device_name = device
        self._model: Any = None
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._labels: dict[str, tuple[int, ...]] = {}
        eos = self.tokenizer.eos_token_id
        self._eos = {eos} if isinstance(eos, int) else set()
        self.images_seen = 0
        """Images passed to the model so far (the bench's count)."""

    # -- identity ---------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        return f"hf-vision:{self._sha}:{self.prompt_format}"

    @property
    def context_length(self) -> int:
        text = self.config.get_text_config() if hasattr(self.config, "get_text_config") else self.config
        return int(getattr(text, "max_position_embeddings", 2048))

    @functools.cached_property
    def _specials(self) -> tuple[str, ...]:
        tok = self.tokenizer
        found = set(tok.all_special_tokens)
        found.update(t.content for t in getattr(tok, "added_tokens_decoder", {}).values())
        found.add(self.image_token)
        return tuple(sorted(t for t in found if t))

    def format_prompt(self, system: str, user: str, assistant_prefix: str) -> str:
        """The chat-rendered prompt, each image kept as its marker where its content part was rendered."""
        digests = [m.group(1) for m in MARKER.finditer(user)]
        pieces = MARKER.split(user)[::2]  # the texts between the markers (split also returns the digests)
        system = neutralise(system, self._specials)
        texts = [neutralise(p, self._specials) for p in pieces]
        if self.prompt_format != "chat":
            body = "".join(t + (self.image_token if k < len(digests) else "") for k, t in enumerate(texts))
            rendered = f"{system}\n\n{body}\n\n"
        else:
            content: list[dict[str, str]] = []
            for k, text in enumerate(texts):
                if text:
                    content.append({"type": "text", "text": text})
                if k < len(digests):
                    content.append({"type": "image"})
            messages = [{"role": "system", "content": [{"type": "text", "text": system}]},
                        {"role": "user", "content": content}]
            rendered = str(self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
        if rendered.count(self.image_token) != len(digests):
            raise ConfigError(f"{self.spec.path}: the chat template rendered {rendered.count(self.image_token)} "
                              f"image tokens ({self.image_token!r}) for {len(digests)} images")
        out, rest = [], rendered
        for digest in digests:
            head, _, rest = rest.partition(self.image_token)
            out.append(head + f"\ue000image {digest}\ue001")
        return "".join(out) + rest + assistant_prefix

    # -- inputs ---------------------------------------------------------------------------------
    def _inputs(self, prompt: str) -> tuple[Any, int]:
        """The processor's tensors for ``prompt`` (markers as image tokens, their images attached) and the
        number of images."""
        images: list[Image] = []
        for m in MARKER.finditer(prompt):
            try:
                images.append(lookup(m.group(1)))
            except KeyError:
                raise BackendError(f"the prompt shows image {m.group(1)}, which is not loaded in this process") \
                    from None
        text = MARKER.sub(self.image_token, prompt)
        urls = [im.source for im in images if im.data is None]
        if urls:
            raise BackendError(f"the in-process judge {self.spec.name} cannot fetch {urls[0]}: give the image as a "
                               "file or a data: URI (a URL goes to an OpenAI-compatible server only)")
        if images:
            enc = self.processor(text=text, images=[im.pil() for im in images], return_tensors="pt")
        else:
            enc = self.processor(text=text, return_tensors="pt")
        return enc, len(images)

    def count_tokens(self, text: str) -> int:
        if text in self._counts:
            return self._counts[text]
        if MARKER.search(text):
            enc, _ = self._inputs(text)
            count = int(enc["input_ids"].shape[1])
        else:
            count = len(self.tokenizer(text, add_special_tokens=False).input_ids)
        self._counts[text] = count
        while len(self._counts) > 4096:
            self._counts.popitem(last=False)
        return count

    def _label_ids(self, label: str) -> tuple[int, ...]:
        ids = self._labels.get(label)
        if ids is None:
            ids = self._labels[label] = tuple(self.tokenizer(label, add_special_tokens=False).input_ids)
        return ids

    def max_label_tokens(self, labels: Sequence[str]) -> int:
        return max(len(self._label_ids(label)) for label in labels)

    # -- model ------------------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        if self._model is None:
            from transformers import AutoModelForImageTextToText

            device = self._device_name
            if device == "auto":
                device = "cuda" if torch.cuda.is_available() else "cpu"
            self.device = torch.device(device)
            self.dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
            model = AutoModelForImageTextToText.from_pretrained(str(self._folder), dtype=self.dtype)
            self._model = model.to(self.device).eval()  # type: ignore[arg-type]
            params = inspect.signature(self._model.forward).parameters
            self._cache_kw = "cache" if "cache" in params else "past_key_values"
        return self._model

    def _prompt_pass(self, prompt: str) -> tuple[Any, Any, int]:
        """One pass over the prompt and its images: the log-probabilities after it, its KV cache, its length."""
        enc, n = self._inputs(prompt)
        self.images_seen += n
        enc = {k: (v.to(self.device, self.dtype) if v.is_floating_point() else v.to(self.device))
               for k, v in enc.items()}
        out = self.model(**enc, use_cache=True)
        cache = getattr(out, "past_key_values", None) or getattr(out, "cache", None)
        return torch.log_softmax(out.logits[0, -1].float(), dim=-1), cache, int(enc["input_ids"].shape[1])

    @torch.inference_mode()
    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        _ = self.model
        results = []
        for req in requests:
            start = time.perf_counter()
            first, cache, length = self._prompt_pass(req.prompt)
            seqs = [self._label_ids(label) for label in req.labels]
            sums = [float(first[s[0]]) if s else 0.0 for s in seqs]
            longer = [k for k, s in enumerate(seqs) if len(s) > 1]
            if longer:
                width = max(len(seqs[k]) - 1 for k in longer)
                pad = next(iter(self._eos), 0)
                rows = [list(seqs[k][:-1]) + [pad] * (width - len(seqs[k]) + 1) for k in longer]
                cache.batch_repeat_interleave(len(rows))
                ids = torch.tensor(rows, device=self.device)
                positions = (length + torch.arange(width, device=self.device))[None, :].expand(len(rows), -1)
                mask = torch.ones((len(rows), length + width), dtype=torch.long, device=self.device)
                out = self.model(input_ids=ids, position_ids=positions, attention_mask=mask, use_cache=True,
                                 **{self._cache_kw: cache})
                logp = torch.log_softmax(out.logits.float(), dim=-1)
                for row, k in enumerate(longer):  # right padding: a row's real tokens never see its padding
                    for j, tok in enumerate(seqs[k][1:]):
                        sums[k] += float(logp[row, j, tok])
            results.append(LabelResult(tuple(sums), length, time.perf_counter() - start))
        return results

    @torch.inference_mode()
    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        _ = self.model
        out = []
        for req in requests:
            start = time.perf_counter()
            logp, cache, length = self._prompt_pass(req.prompt)
            gen = torch.Generator().manual_seed(req.seed)
            tokens: list[int] = []
            lps: list[float] = []
            text, finish = "", "length"
            while len(tokens) < req.max_new_tokens:
                if req.temperature <= 0:
                    tok = int(torch.argmax(logp))
                else:
                    probs = torch.softmax(logp / req.temperature, dim=-1).cpu()
                    tok = int(torch.multinomial(probs, 1, generator=gen))
                if tok in self._eos:
                    finish = "eos"
                    break
                tokens.append(tok)
                lps.append(float(logp[tok]))
                text = str(self.tokenizer.decode(tokens, skip_special_tokens=True))
                hits = [text.find(s) for s in req.stop if s and s in text]
                if hits:
                    text, finish = text[: min(hits)], "stop"
                    break
                step = self.model(input_ids=torch.tensor([[tok]], device=self.device),
                                  position_ids=torch.tensor([[length + len(tokens) - 1]], device=self.device),
                                  use_cache=True, **{self._cache_kw: cache})
                logp = torch.log_softmax(step.logits[0, -1].float(), dim=-1)
            out.append(Generation(text, tuple(lps), finish, length, time.perf_counter() - start))  # type: ignore[arg-type]
        return out


__all__ = ["PROCESSOR_FILES", "VisionTransformersBackend", "is_vision_folder"]
