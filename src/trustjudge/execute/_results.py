"""What one execution of a script gave back, as data (and as the JSON the store keeps)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

# Why a run did not end well: the failure kinds a recipe counts ("ok" is a run that exited 0).
STATUSES = ("ok", "error", "timeout", "cpu", "memory", "processes", "network", "write_refused", "signal")


@dataclass(frozen=True)
class OutputFile:
    """A file the script wrote in its folder (its path relative to the folder)."""

    path: str
    data: bytes = field(repr=False)
    sha256: str


@dataclass(frozen=True)
class ExecutionResult:
    """stdout, stderr, exit status and written files of one run, and why it ended (``status``)."""

    status: str
    returncode: int
    stdout: str
    stderr: str
    files: tuple[OutputFile, ...]
    wall_s: float
    cpu_s: float
    truncated: bool = False
    isolation: str = ""
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def file(self, suffix: str) -> OutputFile | None:
        """The first written file whose name ends with ``suffix`` (``".png"``), if any."""
        return next((f for f in self.files if f.path.lower().endswith(suffix.lower())), None)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "returncode": self.returncode, "stdout": self.stdout, "stderr": self.stderr,
                "files": [{"path": f.path, "sha256": f.sha256, "data": base64.b64encode(f.data).decode("ascii")}
                          for f in self.files],
                "wall_s": self.wall_s, "cpu_s": self.cpu_s, "truncated": self.truncated, "isolation": self.isolation}

    @classmethod
    def from_json(cls, data: dict[str, Any], cached: bool = False) -> ExecutionResult:
        files = tuple(OutputFile(f["path"], base64.b64decode(f["data"]), f["sha256"]) for f in data["files"])
        return cls(status=data["status"], returncode=data["returncode"], stdout=data["stdout"],
                   stderr=data["stderr"], files=files, wall_s=data["wall_s"], cpu_s=data["cpu_s"],
                   truncated=data["truncated"], isolation=data["isolation"], cached=cached)
