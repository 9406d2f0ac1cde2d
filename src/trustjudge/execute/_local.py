"""Running a model's script in a separate, confined process on this machine (the local executor)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, Protocol

from ._results import ExecutionResult, OutputFile

Isolation = Literal["auto", "namespace", "hooks"]
CHILD = Path(__file__).with_name("_child.py")
NOBODY = 65534


@dataclass(frozen=True)
class ExecutionLimits:
    """What a script may use. All of it is part of the stored key: other limits are another run."""

    wall_s: float = 30.0          # wall clock; the process tree is killed past it
    cpu_s: int = 20               # CPU seconds (RLIMIT_CPU)
    memory_mb: int = 2048         # address space (RLIMIT_AS)
    processes: int = 64           # processes of the sandbox's user (RLIMIT_NPROC, namespace isolation)
    file_mb: int = 64             # largest file it may write (RLIMIT_FSIZE)
    output_kb: int = 256          # stdout and stderr kept, each
    files_mb: int = 32            # files written that come back, together


class Executor(Protocol):
    """Runs a script and returns what it did. ``settings`` names everything that can change the result
    (the runner, its isolation and limits): it goes into the stored key."""

    def settings(self) -> dict[str, object]: ...

    def run(self, code: str, files: dict[str, bytes] | None = None) -> ExecutionResult: ...


@functools.cache
def namespaces_work() -> bool:
    """Whether ``unshare`` can give a child its own network, mount and process namespaces here (root on
    Linux, or a kernel allowing it): tried once per process with a child that does nothing."""
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux") or os.geteuid() != 0:
        return False
    try:
        done = subprocess.run([unshare, "--net", "--mount", "--pid", "--fork", "--kill-child", "true"],
                              capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _kind(returncode: int, timed_out: bool, stderr: str, cpu_s: float, limits: ExecutionLimits) -> str:
    if timed_out:
        return "timeout"
    if returncode == 0:
        return "ok"
    # unshare cannot pass a child's signal on (it exits 1): the CPU time it used tells instead.
    if returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU) or cpu_s >= limits.cpu_s:
        return "cpu"
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr or "std::bad_alloc" in stderr:
        return "memory"
    if ("BlockingIOError" in stderr and "Resource temporarily unavailable" in stderr) or (
            "sandbox: process creation" in stderr):
        return "processes"
    if "sandbox: network" in stderr or "Network is unreachable" in stderr or "gaierror" in stderr:
        return "network"
    if "Read-only file system" in stderr or "sandbox: writing outside" in stderr or (
            "PermissionError" in stderr and "Permission denied" in stderr):
        return "write_refused"
    if returncode < 0 or returncode > 128:
        return "signal"
    return "error"


def _tail(data: bytes, limit_kb: int) -> tuple[str, bool]:
    limit = limit_kb * 1024
    cut = len(data) > limit
    return data[-limit:].decode("utf-8", errors="replace"), cut


class LocalExecutor:
    """Each script in a fresh temporary folder, in a child process with limits and no network; the
    folder (and anything else the script made) is removed afterwards.

    ``isolation``: ``namespace`` (own network, mount and process namespaces via ``unshare``, the file
    system read-only but for the script's folder, an unprivileged user), ``hooks`` (Python audit hooks:
    a fallback that code going through ctypes can get around) or ``auto`` (namespace where it works here).
    """

    name = "local"

    def __init__(self, limits: ExecutionLimits | None = None, isolation: Isolation = "auto",
                 python: str | None = None) -> None:
        self.limits = limits or ExecutionLimits()
        if isolation == "auto":
            isolation = "namespace" if namespaces_work() else "hooks"
        if isolation == "namespace" and not namespaces_work():
            raise RuntimeError("namespace isolation needs root on Linux and a working `unshare`; use "
                               "isolation='hooks' (weaker) or a container runner")
        self.isolation: Isolation = isolation
        self.python = python or sys.executable

    def settings(self) -> dict[str, object]:
        return {"runner": self.name, "isolation": self.isolation, "limits": asdict(self.limits),
                "python": f"{sys.version_info.major}.{sys.version_info.minor}"}

    def run(self, code: str, files: dict[str, bytes] | None = None) -> ExecutionResult:
        limits = self.limits
        root = Path(tempfile.mkdtemp(prefix="trustjudge-exec-"))
        try:
            work, home = root / "work", root / "home"
            work.mkdir()
            home.mkdir()
            inputs = dict(files or {})
            for rel, data in inputs.items():
                target = (work / rel).resolve()
                if not target.is_relative_to(work.resolve()):
                    raise ValueError(f"an input file's name leaves the script's folder: {rel}")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            script = "main.py"
            (work / script).write_text(code, encoding="utf-8")
            root.chmod(0o755)
            if self.isolation == "namespace":
                for path in [work, home, *work.rglob("*")]:
                    os.chown(path, NOBODY, NOBODY)
            (root / "stage").mkdir()
            settings = {"work": str(work), "home": str(home), "stage": str(root / "stage"), "script": script,
                        "isolation": self.isolation,
                        "uid": NOBODY, "gid": NOBODY, "cpu_s": limits.cpu_s, "memory_mb": limits.memory_mb,
                        "processes": limits.processes, "file_mb": limits.file_mb}
            argv = [self.python, "-I", "-B", str(CHILD), json.dumps(settings)]
            if self.isolation == "namespace":
                argv = [shutil.which("unshare") or "unshare", "--net", "--mount", "--pid", "--fork",
                        "--kill-child", *argv]
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "MPLBACKEND": "Agg",
                   "MPLCONFIGDIR": str(home / "matplotlib"), "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
                   "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TMPDIR": str(home)}
            for passed in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # see the machine notes: needed here
                if passed in os.environ:
                    env[passed] = os.environ[passed]
            started = time.perf_counter()
            before = os.times()
            proc = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
            timed_out = False
            try:
                out, err = proc.communicate(timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_tree(proc)
                out, err = proc.communicate()
            _kill_tree(proc)  # anything it left behind in its session
            wall = time.perf_counter() - started
            after = os.times()
            cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
            stdout, out_cut = _tail(out, limits.output_kb)
            stderr, err_cut = _tail(err, limits.output_kb)
            written, files_cut = self._collect(work, inputs, script)
            kind = _kind(proc.returncode, timed_out, stderr, cpu, limits)
            return ExecutionResult(status=kind, returncode=proc.returncode, stdout=stdout, stderr=stderr,
                                   files=written, wall_s=round(wall, 4), cpu_s=round(cpu, 4),
                                   truncated=out_cut or err_cut or files_cut, isolation=self.isolation)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _collect(self, work: Path, inputs: dict[str, bytes], script: str) -> tuple[tuple[OutputFile, ...], bool]:
        budget = self.limits.files_mb * 1024 * 1024
        found: list[OutputFile] = []
        cut = False
        for path in sorted(work.rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            rel = path.relative_to(work).as_posix()
            if rel == script:
                continue
            data = path.read_bytes()
            if inputs.get(rel) == data:
                continue
            if len(data) > budget:
                cut = True
                continue
            budget -= len(data)
            found.append(OutputFile(rel, data, hashlib.sha256(data).hexdigest()))
        return tuple(found), cut
