"""The sandbox worker: serves the pool, preparing one fresh, confined process tree per run ahead of its request.

Started by the pool as ``python -I -S worker.py TIMEOUT_S MEMORY_MB CPU_S SOCKET_FD LIB_DIR IN_VIEW LAYERS``,
inside the view of :mod:`bugfix_gym.sandbox.view` where bubblewrap runs. Imports only the standard library
and pyseccomp (from ``LIB_DIR``). Per run, before the request arrives::

    worker ── init: cloned as PID 1 of new user, PID, mount and IPC namespaces, with a private empty /tmp;
                    holds the candidate to the wall clock and reports how it ended
                 └─ candidate: rlimits, no new privileges, seccomp; then receives the request

The worker hands the pool the prepared candidate's channel; the pool sends the request straight to it. The
candidate gets the case arguments only, never the expected values, and writes one JSON record per case to a
memfd of the pool's: its return value as plain data (:func:`encode`), or the exception it raised. The pool,
not the candidate, compares. The run's init holds the candidate to the wall clock; when init ends, the
kernel kills whatever is left in the run's PID namespace, and its IPC namespace (SysV shared memory,
semaphores and message queues, POSIX message queues) goes with its last process: nothing outlives a run, and
no run can name, let alone signal, another's processes or read what another left.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import pickle
import resource
import select
import signal
import socket
import sys
import time
from typing import Callable, Iterable, NamedTuple, NoReturn

PRELOAD = (
    "array", "bisect", "cmath", "collections", "copy", "datetime", "decimal", "fractions",
    "functools", "hashlib", "heapq", "itertools", "math", "operator", "random", "re",
    "statistics", "string", "textwrap", "typing", "unicodedata",
)  # imported up front: a candidate's first import of them costs nothing
UNPRIVILEGED_ID = 65534  # nobody / nogroup
MAX_THREADS = 16  # RLIMIT_NPROC in the run's own user namespace: threads of one run only
OPEN_FILES = 256
FILE_BYTES = 8 << 20  # RLIMIT_FSIZE: a file in the private /tmp grows to at most this
TMP_BYTES = 16 << 20  # size of the run's private /tmp (and /dev/shm)
INLINE_REQUEST_BYTES = 32768  # a larger request travels in a memfd
REPR_LIMIT = 1000  # characters of repr kept per exception
MAX_DEPTH = 100  # nesting of a return value
RUN_LAYERS = frozenset({"run_namespaces", "private_tmp", "seccomp"})
READY_S = 10.0  # how long the worker waits for a prepared run to report ready
BACKSTOP_S = 0.5  # past the wall clock, how long the worker waits for a run's init before killing it
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38
_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = (
    0x20000, 0x8000000, 0x10000000, 0x20000000, 0x40000000)
_CLONE_THREAD = 0x10000
_NAMESPACE_FLAGS = (0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000, 0x80)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV = 1, 2, 4
_LIBC = ctypes.CDLL(None, use_errno=True)
_PYLIBC = ctypes.PyDLL(None, use_errno=True)  # the same C library, called with the GIL held (for clone)
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)

# Denied to candidates with EPERM (clone3 with ENOSYS, so the C library falls back to clone, whose flags
# the filter can read): new processes and programs, namespaces and mounts, other processes' memory, and
# kernel interfaces with a history of sandbox escapes.
DENIED_SYSCALLS = (
    "fork", "vfork", "execve", "execveat",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "name_to_handle_at", "open_by_handle_at", "personality",
)


class Limits(NamedTuple):
    """What every run may use: wall-clock seconds, address space in MiB, CPU seconds."""

    timeout_s: float
    memory_mb: int
    cpu_s: int


# ---- the cases: shared with the pool's unsandboxed baseline -------------------------------------------


def encode(value: object, depth: int = 0) -> object:
    """``value`` as tagged JSON if it is plain data of exact built-in types; TypeError otherwise.

    Subclasses (an ``int`` with its own ``__eq__``...) are not plain data, so no candidate code runs here."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return {"int": int.__repr__(value)}  # ValueError past the int digit limit
    if kind is float:
        return {"float": float.__repr__(value)}
    if kind is complex:
        number = complex.__complex__(value)  # type: ignore[arg-type]
        return {"complex": [float.__repr__(number.real), float.__repr__(number.imag)]}
    if kind is bytes:
        return {"bytes": bytes.hex(value)}  # type: ignore[arg-type]
    if kind in (list, tuple, set, frozenset):
        return {kind.__name__: [encode(item, depth + 1) for item in value]}  # type: ignore[attr-defined]
    if kind is dict:
        pairs: Iterable[tuple[object, object]] = dict.items(value)  # type: ignore[arg-type]
        return {"dict": [[encode(key, depth + 1), encode(item, depth + 1)] for key, item in pairs]}
    raise TypeError("not plain data (None, bool, int, float, complex, str, bytes, list, tuple, set, dict)")


def short_repr(value: object) -> str:
    """repr(value) cut to REPR_LIMIT characters; never raises."""
    try:
        text = repr(value)
    except BaseException as exc:  # a hostile __repr__ must not abort the run
        text = f"<repr failed: {type(exc).__name__}>"
    return text if len(text) <= REPR_LIMIT else text[:REPR_LIMIT] + "..."


def _load(source: str, function: str) -> Callable:
    namespace: dict = {"__name__": "__candidate__"}
    exec(compile(source, "<candidate>", "exec"), namespace)
    candidate = namespace.get(function)
    if not callable(candidate):
        raise NameError(f"source does not define a callable {function!r}")
    return candidate


def _call(candidate: Callable, args: tuple) -> tuple[dict, bool]:
    """One case as a record (its value, or what it raised) and whether it ran out of memory."""
    try:
        got = candidate(*args)
    except MemoryError as exc:
        return {"raised": short_repr(exc)}, True
    except BaseException as exc:  # SystemExit, RecursionError... are failures, not escapes
        return {"raised": short_repr(exc)}, False
    try:
        return {"value": encode(got)}, False
    except MemoryError as exc:
        return {"raised": short_repr(exc)}, True
    except BaseException as exc:
        return {"unplain": f"{type(got).__qualname__}: {exc}"[:REPR_LIMIT]}, False


def run_cases(source: str, function: str, arguments: list[tuple], emit: Callable[[dict], None]) -> None:
    """Load the source, emit one record per argument tuple in order, then one 'end' record."""
    try:
        candidate = _load(source, function)
    except BaseException as exc:  # SyntaxError, SystemExit at import time... all mean load_error
        emit({"end": "load_error", "error": short_repr(exc)})
        return
    for index, args in enumerate(arguments):
        record, out_of_memory = _call(candidate, args)
        emit({"case": index, **record})
        if out_of_memory:
            emit({"end": "memory"})
            return
    emit({"end": "ok"})


# ---- the worker ----------------------------------------------------------------------------------------


def main(timeout_s: str, memory_mb: str, cpu_s: str, fd: str, lib_dir: str, in_view: str, layers: str) -> None:
    """Serve requests from the pool until its socket closes; the first message says which layers failed.

    ``layers`` lists, comma-separated, the run layers to set up (``run_namespaces``, ``private_tmp``,
    ``seccomp``); one is left out only to measure what it costs."""
    limits = Limits(float(timeout_s), int(memory_mb), int(cpu_s))
    wanted = frozenset(layers.split(","))
    for name in PRELOAD:
        importlib.import_module(name)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # a run's processes come back to the worker if their parent dies
    problems: dict[str, str] = {}
    if in_view != "1" and os.geteuid() == 0 and _LIBC.unshare(_CLONE_NEWNET) != 0:  # bubblewrap has its own
        problems["network"] = _errno_text("unshare(CLONE_NEWNET)")
    seccomp_filter = _seccomp_filter(lib_dir, problems) if "seccomp" in wanted else None
    problems.update({name: "left out on request" for name in RUN_LAYERS - wanted})
    gc.freeze()  # forked runs share these objects' pages instead of copying them when the collector runs
    if os.geteuid() == 0:  # nothing past this point runs as root
        _drop_root()
        _prctl(_PR_SET_DUMPABLE, 1)  # so a run's init may write its own /proc/self/uid_map
    with socket.socket(fileno=int(fd)) as sock:
        spare = _Run(limits, seccomp_filter, wanted)
        first = spare.wait_ready()
        if isinstance(first, str):
            sock.send(b"failed " + first.encode())
            return
        problems.update(first)
        spare.hand_to(sock, b"ready " + json.dumps(problems).encode())
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        while sock.recv(16) == b"go":  # the pool has just sent the prepared run its request
            reply = spare.finish(time.monotonic() + limits.timeout_s + BACKSTOP_S)
            spare = _Run(limits, seccomp_filter, wanted)
            ready = spare.wait_ready()
            if isinstance(ready, str) or set(ready) - set(problems):
                spare.abandon()
                sock.send(json.dumps({**reply, "next_error": f"the next run could not be prepared: {ready}"}).encode())
                return
            spare.hand_to(sock, json.dumps(reply).encode())  # the reply carries the next run's channel


def _seccomp_filter(lib_dir: str, problems: dict[str, str]):
    """The candidates' syscall filter, built once; None (and a problem) where libseccomp is missing."""
    try:
        sys.path.insert(0, lib_dir)
        import pyseccomp as seccomp  # type: ignore[import-untyped]

        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        for name in DENIED_SYSCALLS:
            try:
                rules.add_rule(seccomp.ERRNO(1), name)
            except (OSError, ValueError):  # not a syscall on this architecture
                continue
        rules.add_rule(seccomp.ERRNO(38), "clone3")
        rules.add_rule(seccomp.ERRNO(1), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_THREAD, 0))
        for flag in _NAMESPACE_FLAGS:
            rules.add_rule(seccomp.ERRNO(1), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        return rules
    except Exception as exc:  # ImportError (no pyseccomp), OSError (no libseccomp)...
        problems["seccomp"] = f"no seccomp filter: {type(exc).__name__}: {exc}"
        return None


class _Run:
    """One prepared run: its init and its candidate, forked and confined before any request exists."""

    def __init__(self, limits: Limits, seccomp_filter: object, layers: frozenset[str]):
        self.channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        status_read, status_write = os.pipe()
        uid, gid = os.getuid(), os.getgid()
        self.init_pid, problem = _start_init("run_namespaces" in layers)
        if self.init_pid == 0:
            self.channel.close()
            os.close(status_read)
            problems = {"run_namespaces": problem} if problem else {}
            if "run_namespaces" in layers and not problem:
                problems.update(_private_mounts(uid, gid, "private_tmp" in layers))
            _init_main(theirs, status_write, limits, seccomp_filter, problems)
        theirs.close()
        os.close(status_write)
        self.status = status_read
        self._ready: dict | str | None = None

    def wait_ready(self) -> dict | str:
        """The layers this run could not set up ({} if none), or why it did not become ready."""
        if self._ready is None:
            self._ready = self._read_ready()
        return self._ready

    def hand_to(self, sock: socket.socket, message: bytes) -> None:
        """Send ``message`` with this run's channel: the pool passes the request straight to the candidate."""
        socket.send_fds(sock, [message], [self.channel.fileno()])
        self.channel.close()

    def finish(self, deadline: float) -> dict:
        """Wait for the run (its init holds the candidate to the wall clock); past ``deadline`` kill it all."""
        pidfd = os.pidfd_open(self.init_pid)
        try:
            finished = bool(select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0])
        finally:
            os.close(pidfd)
        if not finished:
            _kill(self.init_pid)  # PID 1 of the run's namespace: the kernel kills everything else in it
        os.waitpid(self.init_pid, 0)
        with open(self.status, "rb") as status:
            report = status.read()
        return json.loads(report) if report else {"setup_error": "the run's init did not report; it was killed"}

    def _read_ready(self) -> dict | str:
        problems: dict[str, str] = {}
        seen: set[str] = set()
        self.channel.settimeout(READY_S)
        try:
            while len(seen) < 2:
                kind, _, rest = self.channel.recv(65536).decode().partition(" ")
                if kind in ("init", "ready"):
                    problems.update(json.loads(rest))
                else:
                    return f"the run's setup failed: {kind} {rest}".strip()
                seen.add(kind)
        except (OSError, ValueError) as exc:
            return f"the run did not become ready: {type(exc).__name__}: {exc}"
        finally:
            self.channel.settimeout(None)
        return problems

    def abandon(self) -> None:
        """Kill a run that did not become ready."""
        _kill(self.init_pid)
        os.waitpid(self.init_pid, 0)
        os.close(self.status)


def _start_init(namespaces: bool) -> tuple[int, str]:
    """Fork the run's init, as PID 1 of new user, PID, mount and IPC namespaces where asked and possible: like
    ``os.fork`` (0 in the child), plus why there are no namespaces, if so. One clone: no process in between."""
    if not namespaces:
        return os.fork(), ""
    if _SYS_CLONE is None:
        return os.fork(), f"no clone syscall number known for {os.uname().machine}"
    flags = _CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC | signal.SIGCHLD
    pid = _PYLIBC.syscall(_SYS_CLONE, flags, 0, 0, 0, 0)  # the child starts as a copy, as after fork
    if pid >= 0:
        return pid, ""
    why = _errno_text("clone(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC)")
    return os.fork(), why


def _init_main(channel: socket.socket, status: int, limits: Limits, seccomp_filter: object,
               problems: dict[str, str]) -> NoReturn:
    """PID 1 of the run: fork the candidate, hold it to the wall clock from its start, write how it ended."""
    code = 1
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as PID 1, ignores every signal from inside the run
        channel.send(b"init " + json.dumps(problems).encode())
        started_read, started_write = os.pipe()
        candidate = os.fork()
        if candidate == 0:
            os.close(status)
            os.close(started_read)
            _candidate_main(channel, started_write, limits, seccomp_filter)
        channel.close()
        os.close(started_write)
        started = os.read(started_read, 1) == b"s"  # empty: the candidate ended before any request
        pidfd = os.pidfd_open(candidate)
        timed_out = started and not select.select([pidfd], [], [], limits.timeout_s)[0]
        if timed_out:
            os.kill(candidate, signal.SIGKILL)
        _, wait_status, usage = os.wait4(candidate, 0)
        ended = {"code": os.waitstatus_to_exitcode(wait_status), "timeout": timed_out,
                 "cpu_s": usage.ru_utime + usage.ru_stime}
        write_all(status, json.dumps(ended).encode())
        code = 0
    finally:
        os._exit(code)


def _candidate_main(channel: socket.socket, started: int, limits: Limits, seccomp_filter: object) -> NoReturn:
    """Confine this process, say ready, receive the request, tell init the clock starts, run the cases, exit.

    The request brings a memfd for the records and a pipe to say they are complete (see :func:`_request`)."""
    code = 1
    try:
        problems = _confine({channel.fileno(), started}, limits, seccomp_filter)
        _warm_up()
        channel.send(b"ready " + json.dumps(problems).encode())
        message, fds, _, _ = socket.recv_fds(channel, INLINE_REQUEST_BYTES + 16, 3)
        channel.close()
        os.write(started, b"s")
        os.close(started)
        request = _request(message, fds)
        if request is not None:
            run_cases(*request, emitter(fds[0]))
            os.write(fds[1], b"e")
            code = 0
    finally:
        os._exit(code)


def _request(message: bytes, fds: list[int]) -> tuple[str, str, list[tuple]] | None:
    """The request's (source, function, arguments): in the message after b"run", or in the third fd's memfd
    after b"file"; None for anything else. The first two fds are the records memfd and the end pipe."""
    if message.startswith(b"run") and len(fds) == 2:
        return pickle.loads(message[3:])
    if message == b"file" and len(fds) == 3:
        with open(fds[2], "rb") as request:
            return pickle.load(request)
    return None


def _warm_up() -> None:
    """Do once what a run does (unpickle a request, compile, call, encode, write): the pages it touches become
    this process's own before the request, not during it."""
    source = "def f(x, y=1.5):\n    return [x, {'y': (y, str(x))}]\n"
    records = os.open(os.devnull, os.O_WRONLY)
    try:
        source, function, arguments = pickle.loads(pickle.dumps((source, "f", [(1,), (2, 2.5)])))
        run_cases(source, function, arguments, emitter(records))
    finally:
        os.close(records)


def _confine(keep: set[int], limits: Limits, seccomp_filter: object) -> dict[str, str]:
    """Own session, no inherited fds or privileges, rlimits, seccomp; the layers that failed."""
    problems: dict[str, str] = {}
    os.setsid()
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    start = 3
    for fd in sorted(keep):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, os.sysconf("SC_OPEN_MAX"))
    os.chdir("/")
    _set_limits(limits)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    if seccomp_filter is not None:
        try:
            seccomp_filter.load()  # type: ignore[attr-defined]
        except OSError as exc:
            problems["seccomp"] = f"the filter did not load: {exc}"
    return problems


def _set_limits(limits: Limits) -> None:
    """No core files, bounded file size, CPU seconds, threads, open files and address space."""
    memory = limits.memory_mb << 20
    for which, soft, hard in (
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_FSIZE, FILE_BYTES, FILE_BYTES),
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 1),
        (resource.RLIMIT_NPROC, MAX_THREADS, MAX_THREADS),
        (resource.RLIMIT_NOFILE, OPEN_FILES, OPEN_FILES),
        (resource.RLIMIT_AS, memory, memory),
    ):
        ceiling = resource.getrlimit(which)[1]
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        resource.setrlimit(which, (soft, hard))


def emitter(fd: int) -> Callable[[dict], None]:
    """A writer of JSON lines (one record each) to ``fd``."""

    def emit(record: dict) -> None:
        write_all(fd, json.dumps(record).encode() + b"\n")

    return emit


def _private_mounts(uid: int, gid: int, private_tmp: bool) -> dict[str, str]:
    """In the run's new namespaces: map its one user; give it an empty /tmp and /dev/shm and hide /proc."""
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{UNPRIVILEGED_ID} {uid} 1"),
                           ("gid_map", f"{UNPRIVILEGED_ID} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as map_file:
                map_file.write(text)
    except OSError as exc:
        return {"private_tmp": f"could not map the run's user: {exc}"}
    problems: dict[str, str] = {}
    if not private_tmp:
        return problems
    for target, flags in ((b"/tmp", 0), (b"/dev/shm", 0), (b"/proc", _MS_RDONLY)):
        if not os.path.isdir(target):
            continue
        options = f"size={TMP_BYTES},mode={'1777' if flags == 0 else '0555'}".encode()
        if _LIBC.mount(b"tmpfs", target, b"tmpfs", _MS_NOSUID | _MS_NODEV | flags, options) != 0:
            problems["private_tmp"] = _errno_text(f"mount tmpfs on {target.decode()}")
    return problems


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _drop_root() -> None:
    os.setgroups([])
    os.setgid(UNPRIVILEGED_ID)
    os.setuid(UNPRIVILEGED_ID)


def _kill(pid: int) -> None:
    if pid > 0:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _prctl(option: int, value: int) -> None:
    if _LIBC.prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)):
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _errno_text(what: str) -> str:
    number = ctypes.get_errno()
    return f"{what} failed: {os.strerror(number)}"


if __name__ == "__main__":
    main(*sys.argv[1:])
