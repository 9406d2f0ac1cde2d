"""Any local model folder works as a judge (``hf//path``), on the CPU and, where present, on a GPU in bf16."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from trustjudge import Judge, items_from_dicts
from trustjudge.backends import LabelRequest, get_backend
from trustjudge.backends._transformers import TransformersBackend
from trustjudge.modes._prompts import SCORE_MARKER, SYSTEM

from .conftest import small_items
from .test_backend_transformers import brute_force


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, smollm: Any) -> Path:
    """A 2-layer random Llama with SmolLM2's tokenizer, saved as a plain transformers folder."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(smollm.tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         tie_word_embeddings=True)
    folder = tmp_path_factory.mktemp("tiny") / "tiny-llama"
    LlamaForCausalLM(config).save_pretrained(folder)
    smollm.tokenizer.save_pretrained(folder)
    return folder


def _exactness(backend: TransformersBackend, tol: float) -> None:
    labels = tuple(f"{i}]" for i in range(1, 101))
    prompt = backend.format_prompt(SYSTEM, "Rate: 2 + 2 = 4.", SCORE_MARKER)
    got = backend.label_logprobs([LabelRequest(prompt, labels)])[0].logprobs
    want = brute_force(backend, prompt, labels)
    assert max(abs(math.exp(a) - math.exp(b)) for a, b in zip(got, want)) < tol


@pytest.mark.model
def test_local_folder_judge_on_cpu(tiny_model: Path, tmp_path: Path) -> None:
    backend = get_backend(f"hf/{tiny_model}")
    assert isinstance(backend, TransformersBackend) and backend.prompt_format == "chat"
    _exactness(backend, 1e-5)
    # A random model spreads its probability over the whole vocabulary: almost none lands on the labels,
    # so the default --min-label-mass would (rightly) leave these unscored.
    judge = Judge(backend, store=tmp_path / "s.sqlite", scale=10, min_label_mass=0.0)
    records = list(judge.score(items_from_dicts(small_items())))
    assert all(r.unscored is None and 1 <= r.scores["expected"] <= 10 for r in records)  # type: ignore[operator]
    assert all(0 < r.label_mass < 1e-2 for r in records)  # type: ignore[operator]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device on this machine (the GPU path runs where one is)")
def test_gpu_bf16_path(tiny_model: Path) -> None:
    from trustjudge.backends._models import resolve

    backend = TransformersBackend(resolve(str(tiny_model)), device="cuda")
    assert backend.model.dtype == torch.bfloat16
    # bf16 carries ~3 significant digits: the trie and brute force agree to bf16 precision, not 1e-4.
    _exactness(backend, 2e-2)
