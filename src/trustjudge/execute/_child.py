"""The sandboxed child's first code: confine the process, then run the model's script in it.

Run as ``python -I -S _child.py SETTINGS_JSON`` by the local executor (never imported by the package).
It imports nothing from trustjudge, so nothing of the caller's package is needed inside the sandbox.

``isolation == "namespace"`` (started under ``unshare --net --mount --pid``, as root): every mount but the
script's folders is remounted read-only, then the process drops to an unprivileged user (which cannot
remount), so writes outside its folder fail with EROFS/EACCES and there is no network device but a
down loopback. ``isolation == "hooks"`` (the fallback where namespaces cannot be made): Python audit hooks
refuse sockets other than AF_UNIX, process creation and opening files for writing outside the folders.
Hooks stop code that goes through Python's own I/O only (ctypes can reach around them): a weaker
fallback, said in the run's result. Both set the resource limits (CPU seconds, address space, processes,
file size, open files).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384


def _mounts() -> list[str]:
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            point = line.split()[4].encode().decode("unicode_escape")
            points.append(point)
    return points


def _closed_ancestor(path: str) -> str | None:
    """The highest folder above ``path`` that other users cannot enter (``/root`` for a pyenv Python)."""
    parts = path.strip("/").split("/")
    for end in range(1, len(parts)):
        folder = "/" + "/".join(parts[:end])
        if not os.stat(folder).st_mode & 0o001:
            return folder
    return None


def _confine_mounts(writable: list[str], stage: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

    def mount(src: str, target: str, flags: int, fstype: str | None = None, data: str | None = None) -> int:
        return int(libc.mount(src.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                              data.encode() if data else None))

    def must(done: int, what: str) -> None:
        if done != 0:
            raise OSError(ctypes.get_errno(), what)

    # The interpreter and its packages may sit under a folder the unprivileged user cannot enter (/root):
    # cover that folder with an empty tmpfs holding only them, so nothing else of it is even visible.
    needed = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix, *sys.path)
              if p and os.path.isdir(p)}
    by_closed: dict[str, list[str]] = {}
    for path in sorted(needed):
        closed = _closed_ancestor(path)
        if closed is not None:
            by_closed.setdefault(closed, []).append(path)
    for n, (closed, paths) in enumerate(sorted(by_closed.items())):
        staged = []
        for m, path in enumerate(paths):
            if any(path.startswith(other + "/") for other in paths if other != path):
                continue
            target = os.path.join(stage, f"{n}-{m}")
            os.mkdir(target)
            must(mount(path, target, MS_BIND | MS_REC), f"bind-mount {path}")
            staged.append((path, target))
        must(mount("tmpfs", closed, MS_NOSUID | MS_NODEV, "tmpfs", "mode=0755,size=1m"), f"tmpfs on {closed}")
        for path, target in staged:
            os.makedirs(path, mode=0o755, exist_ok=True)
            must(mount(target, path, MS_BIND | MS_REC), f"bind-mount {path}")
    for folder in writable:  # each writable folder its own mount, so remounting its parent leaves it writable
        must(mount(folder, folder, MS_BIND | MS_REC), f"bind-mount {folder}")
    keep = set(writable)
    for point in sorted(set(_mounts()), key=len, reverse=True):
        if point in keep:
            continue
        # Some mounts (proc's own submounts, say) refuse a remount: they are not the caller's files.
        mount("none", point, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    probe = os.path.join("/", ".trustjudge-sandbox-probe")
    try:
        with open(probe, "w", encoding="utf-8"):
            pass
    except OSError:
        return
    os.remove(probe)
    raise OSError("the root folder is still writable after remounting read-only")


def _drop_privileges(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def _install_hooks(writable: list[str]) -> None:
    import socket

    roots = [os.path.realpath(w) for w in writable] + ["/dev/null"]
    allowed_families = {socket.AF_UNIX}

    def inside(path: object) -> bool:
        if isinstance(path, int):
            return True
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return False
        real = os.path.realpath(path)
        return any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)

    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags)
            if writes and not inside(path):
                raise PermissionError(f"sandbox: writing outside the script's folder is refused: {path}")
        elif event in ("os.remove", "os.rmdir", "os.mkdir", "os.rename", "os.symlink", "os.link", "os.chmod",
                       "os.chown", "os.truncate", "shutil.rmtree", "os.utime"):
            paths = [a for a in args if isinstance(a, (str, bytes))]
            if any(not inside(p) for p in paths):
                raise PermissionError(f"sandbox: writing outside the script's folder is refused ({event}): {paths}")
        elif event == "socket.__new__":
            family = args[1]
            if family not in allowed_families and family != -1:
                raise PermissionError("sandbox: network sockets are refused")
        elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo"):
            raise PermissionError("sandbox: network access is refused")
        elif event in ("os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
                       "subprocess.Popen", "ctypes.dlopen"):
            raise PermissionError(f"sandbox: process creation is refused ({event})")

    sys.addaudithook(hook)


def _limits(settings: dict[str, object]) -> None:
    def cap(which: int, value: object) -> None:
        if isinstance(value, int) and value > 0:
            resource.setrlimit(which, (value, value))

    cpu = settings["cpu_s"]
    if isinstance(cpu, int):  # the soft limit sends SIGXCPU, the hard one a second later SIGKILL
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = settings["memory_mb"]
    cap(resource.RLIMIT_AS, memory * 1024 * 1024 if isinstance(memory, int) else None)
    file_mb = settings["file_mb"]
    cap(resource.RLIMIT_FSIZE, file_mb * 1024 * 1024 if isinstance(file_mb, int) else None)
    cap(resource.RLIMIT_NPROC, settings["processes"])
    cap(resource.RLIMIT_NOFILE, 256)
    cap(resource.RLIMIT_CORE, None)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main() -> None:
    settings = json.loads(sys.argv[1])
    writable = [settings["work"], settings["home"]]
    if settings["isolation"] == "namespace":
        _confine_mounts(writable, settings["stage"])
        _drop_privileges(int(settings["uid"]), int(settings["gid"]))
    _limits(settings)
    os.chdir(settings["work"])
    script = os.path.join(settings["work"], settings["script"])
    with open(script, encoding="utf-8") as fh:
        source = fh.read()
    sys.argv = [script]
    sys.path.insert(0, settings["work"])
    if settings["isolation"] == "hooks":
        _install_hooks(writable)
    code = compile(source, script, "exec")
    exec(code, {"__name__": "__main__", "__file__": script})  # running it is the point of the sandbox


if __name__ == "__main__":
    main()
