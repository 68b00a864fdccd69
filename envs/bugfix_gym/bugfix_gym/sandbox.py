"""Run untrusted candidate functions against test cases in a pool of warm, forking sandbox workers.

Each worker is a fresh interpreter (``python -I sandbox.py``) that talks to the pool over a Unix
SEQPACKET socket. Per request the pool passes it two file descriptors: a memfd holding the pickled
request and the write end of a new result pipe. The worker forks a child that confines itself, reads
the request, runs the cases and streams one JSON line per case straight to the pool; the worker only
times, kills and reaps, then replies with how the child ended. The worker never holds test data, so no
later candidate can find an earlier call's (hidden) cases in the memory it forks from. Linux only.

Containment per run (the child is its own session; the worker SIGKILLs that process group afterwards
and, as a child subreaper, also kills and reaps any descendant that escaped the group):

- wall clock: killed at ``timeout_s``; the pool answers by ``timeout_s`` + 1.5 s even if a worker hangs;
- RLIMIT_CPU (SIGXCPU, then SIGKILL), RLIMIT_AS (MemoryError), RLIMIT_FSIZE 0 (no file growth), RLIMIT_CORE 0,
  RLIMIT_NPROC 16, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG (dies with its worker), fds 0-2 on /dev/null,
  every other inherited fd closed, an empty environment;
- when the pool runs as root: the child drops to nobody/nogroup (so RLIMIT_NPROC applies and root-only
  files are unreadable) and workers live in an empty network namespace.

Not contained: code in the child can forge its own result lines (it shares the process with the harness),
and without root it keeps the caller's uid, files and network.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import pickle
import queue
import resource
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple, NoReturn, Sequence

_UNPRIVILEGED_ID = 65534  # nobody / nogroup: candidates run under it when the pool runs as root
_MAX_PROCS = 16  # RLIMIT_NPROC for that user: bounds fork bombs
_REPR_LIMIT = 1000  # characters of repr kept per value
_GRACE_S = 1.5  # how long past timeout_s the pool waits for a worker before declaring it hung
_REAP_S = 0.5  # how long a worker tries to kill stray descendants before asking to be replaced
_STARTUP_S = 30.0
_OUTPUT_BASE, _OUTPUT_PER_CASE = 65536, 16384  # bytes of child output accepted per run
_PRELOAD = (
    "array", "bisect", "cmath", "collections", "copy", "datetime", "decimal", "fractions",
    "functools", "hashlib", "heapq", "itertools", "math", "operator", "random", "re",
    "statistics", "string", "textwrap", "typing", "unicodedata",
)  # imported by workers up front: cheap for candidates, and readable after the privilege drop
_END_KINDS = frozenset({"ok", "memory", "load_error", "setup_error"})
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWNET = 0x40000000
_LIBC = ctypes.CDLL(None, use_errno=True)
_CLOSED = object()


@dataclass(frozen=True)
class TestCase:
    """One call of the function under test: PASS iff ``function(*args) == expected``."""

    __test__ = False  # not a pytest test class

    args: tuple
    expected: object
    hidden: bool = False


@dataclass(frozen=True)
class CaseResult:
    """Outcome of one case; ``got`` is the repr of the return value or exception, or why it did not run."""

    case: TestCase
    passed: bool
    got: str


@dataclass(frozen=True)
class RunResult:
    """Outcome of one run, cases in order. ``status`` is one of:

    'ok'          every case ran to completion (individual cases may still have failed);
    'load_error'  the source raised while loading, or does not define ``function`` as a callable;
    'timeout'     the wall clock (process killed) or the CPU-time limit (SIGXCPU) ran out;
    'memory'      a case raised MemoryError at the address-space limit; later cases did not run;
    'exited'      the process ended itself before finishing (``os._exit``, ...);
    'crashed'     killed by a signal (SIGSEGV, ...), or the sandbox failed (worker died, bad output).
    """

    results: tuple[CaseResult, ...]
    status: str
    detail: str

    @property
    def passed(self) -> bool:
        """True iff the run finished normally and every case passed."""
        return self.status == "ok" and all(result.passed for result in self.results)


class _Limits(NamedTuple):
    """What every run may use: wall-clock seconds, address space in MiB, CPU seconds."""

    timeout_s: float
    memory_mb: int
    cpu_s: int


class Sandbox:
    """A thread-safe pool of warm workers; each ``run`` executes in a fresh, confined forked child."""

    def __init__(self, workers: int = 2, timeout_s: float = 2.0, memory_mb: int = 256, cpu_s: int = 2):
        if workers < 1 or timeout_s <= 0 or memory_mb < 1 or cpu_s < 1:
            raise ValueError("workers, timeout_s, memory_mb and cpu_s must be positive")
        self.limits = _Limits(float(timeout_s), int(memory_mb), int(cpu_s))
        self._argv = [sys.executable, "-I", os.path.abspath(__file__), *map(str, self.limits)]
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        pool: list[_Worker] = []
        try:
            pool.extend(_Worker(self._argv) for _ in range(workers))
            for worker in pool:
                worker.wait_ready()
        except BaseException:
            for worker in pool:
                worker.stop(graceful=False)
            raise
        for worker in pool:
            self._idle.put(worker)

    def run(self, source: str, function: str, cases: Sequence[TestCase]) -> RunResult:
        """Load ``source``, call ``function`` on every case in a sandboxed child and report each case.

        Blocks while every worker is busy. Case args and expected values must be picklable by stdlib or
        site-packages classes (the worker cannot import the caller's own modules)."""
        cases = tuple(cases)
        payload = pickle.dumps((source, function, [(case.args, case.expected) for case in cases]))
        worker = self._acquire()
        reply = None
        try:
            reply, output, overflow = worker.exchange(
                payload, self.limits.timeout_s + _GRACE_S, _OUTPUT_BASE + _OUTPUT_PER_CASE * len(cases)
            )
        finally:
            self._release(worker, healthy=reply is not None and reply["clean"])
        results, end, complete = _collect(_decode(output), len(cases))
        return _result(cases, results, *self._status(reply, overflow, end, complete))

    def close(self) -> None:
        """Stop every idle worker; workers busy in a run stop when it finishes. Later runs raise."""
        with self._lock:
            self._closed = True
            slots = []
            while not self._idle.empty():
                slots.append(self._idle.get())
            self._idle.put(_CLOSED)
        for slot in slots:
            if isinstance(slot, _Worker):
                slot.stop(graceful=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _acquire(self) -> _Worker:
        """Take an idle worker, starting a replacement where a slot is empty or its worker died."""
        slot = self._idle.get()
        if slot is _CLOSED:
            self._idle.put(_CLOSED)
            raise RuntimeError("Sandbox is closed")
        if slot is not None and slot.proc.poll() is None:
            return slot
        if slot is not None:
            slot.stop(graceful=False)
        try:
            worker = _Worker(self._argv)
            worker.wait_ready()
        except BaseException:
            self._idle.put(None)
            raise
        return worker

    def _release(self, worker: _Worker, healthy: bool) -> None:
        """Return a healthy worker to the pool; stop any other and leave an empty slot in its place."""
        with self._lock:
            keep = healthy and not self._closed
            if keep:
                self._idle.put(worker)
            elif not self._closed:
                self._idle.put(None)
        if not keep:
            worker.stop(graceful=healthy)

    def _status(self, reply: dict | None, overflow: bool, end: dict | None, complete: bool) -> tuple[str, str]:
        """Status and detail of a run from the worker's reply and the child's own records."""
        if reply is None:
            return "crashed", "sandbox worker died or stopped responding; it was replaced"
        if overflow:
            return "crashed", "sandbox output exceeded its size limit"
        code = reply["code"]
        if reply["timeout"]:
            return "timeout", f"exceeded {self.limits.timeout_s} s wall clock"
        if code == -signal.SIGXCPU:
            return "timeout", f"exceeded {self.limits.cpu_s} s CPU time"
        if code < 0:
            return "crashed", f"killed by {_signal_name(-code)}"
        if code != 0 or end is None:
            return "exited", f"process exited with code {code} before finishing"
        return _end_status(end, complete)


def run_in_process(source: str, function: str, cases: Sequence[TestCase]) -> RunResult:
    """Unsandboxed baseline for benchmarks: same semantics, no isolation and no limits. Never for untrusted code."""
    cases = tuple(cases)
    records: list[dict] = []
    _run_cases(source, function, [(case.args, case.expected) for case in cases], records.append)
    results, end, complete = _collect(records, len(cases))
    return _result(cases, results, *_end_status(end, complete))


class _Worker:
    """Pool side of one warm worker process."""

    def __init__(self, argv: list[str]):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = subprocess.Popen(
                [*argv, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env={"PATH": os.defpath},
                start_new_session=True,
            )

    def wait_ready(self) -> None:
        """Block until the worker has started up, or raise."""
        self.sock.settimeout(_STARTUP_S)
        try:
            ready = self.sock.recv(16) == b"ready"
        except TimeoutError:
            ready = False
        self.sock.settimeout(None)
        if not ready:
            self.stop(graceful=False)
            raise RuntimeError(f"sandbox worker failed to start (exit code {self.proc.poll()})")

    def exchange(self, payload: bytes, wait_s: float, limit: int) -> tuple[dict | None, bytes, bool]:
        """Run one request: (worker reply, or None if it died or hung; child output; output overflowed)."""
        read_fd, write_fd = os.pipe()
        with open(read_fd, "rb", buffering=0) as pipe:
            try:
                sent = self._send(payload, write_fd)
            finally:
                os.close(write_fd)
            return self._receive(pipe, time.monotonic() + wait_s, limit) if sent else (None, b"", False)

    def stop(self, graceful: bool) -> None:
        """Close the socket (a worker exits when it sees EOF), then make sure the process is gone."""
        self.sock.close()
        if graceful:
            try:
                self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        self.proc.kill()
        self.proc.wait()

    def _send(self, payload: bytes, write_fd: int) -> bool:
        """Pass the worker a memfd holding the request plus the result pipe; False if it is gone."""
        request_fd = os.memfd_create("sandbox-request")
        try:
            _write_all(request_fd, payload)
            os.lseek(request_fd, 0, os.SEEK_SET)
            socket.send_fds(self.sock, [b"run"], [request_fd, write_fd])
        except (BrokenPipeError, ConnectionResetError):
            return False
        finally:
            os.close(request_fd)
        return True

    def _receive(self, pipe, deadline: float, limit: int) -> tuple[dict | None, bytes, bool]:
        """Collect the child's output and the worker's reply until both are complete or the deadline passes."""
        chunks: list[bytes] = []
        size, reply, overflow = 0, None, False
        with selectors.DefaultSelector() as selector:
            selector.register(pipe, selectors.EVENT_READ)
            selector.register(self.sock, selectors.EVENT_READ)
            while selector.get_map() and (remaining := deadline - time.monotonic()) > 0:
                for key, _ in selector.select(remaining):
                    if key.fileobj is self.sock:
                        selector.unregister(self.sock)
                        message = self.sock.recv(4096)
                        if not message:
                            return None, b"".join(chunks), False
                        reply = json.loads(message)
                        continue
                    chunk = pipe.read(65536)
                    if chunk and size + len(chunk) <= limit:
                        chunks.append(chunk)
                        size += len(chunk)
                    else:
                        selector.unregister(pipe)
                        overflow = bool(chunk)
        return reply, b"".join(chunks), overflow


def _decode(output: bytes) -> list:
    """JSON records from the child's output lines; None for a line that does not parse."""
    records = []
    for line in output.splitlines():
        try:
            records.append(json.loads(line))
        except (ValueError, RecursionError):
            records.append(None)
    return records


def _collect(records: list, count: int) -> tuple[dict[int, tuple[bool, str]], dict | None, bool]:
    """Per-case (passed, got) by index, the end record, and whether the records were complete and well-formed."""
    results: dict[int, tuple[bool, str]] = {}
    end = None
    wellformed = True
    for record in records:
        if _is_case_record(record, count) and record["case"] not in results:
            results[record["case"]] = (record["passed"], record["got"])
        elif _is_end_record(record) and end is None:
            end = record
        else:
            wellformed = False
    return results, end, wellformed and len(results) == count


def _is_case_record(record: object, count: int) -> bool:
    return (
        isinstance(record, dict)
        and type(record.get("case")) is int
        and 0 <= record["case"] < count
        and type(record.get("passed")) is bool
        and type(record.get("got")) is str
    )


def _is_end_record(record: object) -> bool:
    return (
        isinstance(record, dict)
        and record.get("end") in _END_KINDS
        and (record["end"] in ("ok", "memory") or type(record.get("error")) is str)
    )


def _end_status(end: dict, complete: bool) -> tuple[str, str]:
    """Status and detail of a child that exited cleanly after writing ``end``."""
    kind = end["end"]
    if kind == "ok":
        return ("ok", "all cases ran") if complete else ("crashed", "malformed output from the sandbox")
    if kind == "memory":
        return "memory", "a case raised MemoryError (memory limit reached); later cases did not run"
    if kind == "load_error":
        return "load_error", end["error"]
    return "crashed", f"sandbox setup failed: {end['error']}"


def _result(cases: tuple[TestCase, ...], results: dict, status: str, detail: str) -> RunResult:
    """Assemble a RunResult; cases without a result FAIL with the load error or the reason the run ended."""
    missing = (False, detail if status == "load_error" else f"{status}: {detail}")
    return RunResult(
        tuple(CaseResult(case, *results.get(index, missing)) for index, case in enumerate(cases)), status, detail
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _short_repr(value: object) -> str:
    """repr(value) cut to _REPR_LIMIT characters; never raises."""
    try:
        text = repr(value)
    except BaseException as exc:  # a hostile __repr__ must not abort the run
        text = f"<repr failed: {type(exc).__name__}>"
    return text if len(text) <= _REPR_LIMIT else text[:_REPR_LIMIT] + "..."


def _load(source: str, function: str) -> Callable:
    """Exec ``source`` in a fresh namespace and return its ``function``."""
    namespace: dict = {"__name__": "__candidate__"}
    exec(compile(source, "<candidate>", "exec"), namespace)
    candidate = namespace.get(function)
    if not callable(candidate):
        raise NameError(f"source does not define a callable {function!r}")
    return candidate


def _evaluate(candidate: Callable, args: tuple, expected: object) -> tuple[bool, str, bool]:
    """Call and compare one case: (passed, got, out_of_memory). Every exception is a failing case."""
    try:
        got = candidate(*args)
        return bool(got == expected), _short_repr(got), False
    except MemoryError as exc:
        return False, _short_repr(exc), True
    except BaseException as exc:  # SystemExit, RecursionError, KeyboardInterrupt... are failures, not escapes
        return False, _short_repr(exc), False


def _run_cases(source: str, function: str, pairs: list, emit: Callable[[dict], None]) -> None:
    """Load the source, emit one record per (args, expected) pair in order, then one 'end' record."""
    try:
        candidate = _load(source, function)
    except BaseException as exc:  # SyntaxError, SystemExit at import time... all mean load_error
        emit({"end": "load_error", "error": _short_repr(exc)})
        return
    for index, (args, expected) in enumerate(pairs):
        passed, got, out_of_memory = _evaluate(candidate, args, expected)
        emit({"case": index, "passed": passed, "got": got})
        if out_of_memory:
            emit({"end": "memory"})
            return
    emit({"end": "ok"})


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _prctl(option: int, value: int) -> None:
    if _LIBC.prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)):
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _worker_main(timeout_s: str, memory_mb: str, cpu_s: str, fd: str) -> None:
    """Entry point of a warm worker: serve requests from the pool until its socket closes."""
    for name in _PRELOAD:
        importlib.import_module(name)
    limits = _Limits(float(timeout_s), int(memory_mb), int(cpu_s))
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # orphaned descendants of a child come back to us to be killed
    if os.geteuid() == 0:
        _LIBC.unshare(_CLONE_NEWNET)  # best effort: children get an empty network namespace
    with socket.socket(fileno=int(fd)) as sock:
        sock.send(b"ready")
        while True:
            message, fds, _, _ = socket.recv_fds(sock, 16, 2)
            if not message:
                return
            sock.send(json.dumps(_supervise(*fds, limits)).encode())


def _supervise(request_fd: int, result_fd: int, limits: _Limits) -> dict:
    """Fork a child for one request, enforce the wall clock, then kill its process group and reap everything."""
    worker_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        _child_main(request_fd, result_fd, worker_pid, limits)
    os.close(request_fd)
    os.close(result_fd)
    pidfd = os.pidfd_open(pid)
    try:
        finished = bool(select.select([pidfd], [], [], limits.timeout_s)[0])
    finally:
        os.close(pidfd)
    _kill(os.kill, pid)
    _kill(os.killpg, pid)
    _, status = os.waitpid(pid, 0)
    clean = _reap_descendants(time.monotonic() + _REAP_S)
    return {"timeout": not finished, "code": os.waitstatus_to_exitcode(status), "clean": clean}


def _kill(kill: Callable[[int, int], None], target: int) -> None:
    try:
        kill(target, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap_descendants(deadline: float) -> bool:
    """Kill and reap every remaining descendant (orphans are re-parented to this subreaper); False if some survive."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0]:
                continue
        except ChildProcessError:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in _children(os.getpid()):
            _kill(os.kill, pid)
        time.sleep(0.001)


def _children(parent: int) -> list[int]:
    """Pids whose parent is ``parent``, read from /proc."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == parent:
            found.append(int(name))
    return found


def _child_main(request_fd: int, result_fd: int, worker_pid: int, limits: _Limits) -> NoReturn:
    """In the forked child: confine this process, run the request's cases, stream the results, exit."""
    code = 1
    try:
        emit = _emitter(result_fd)
        try:
            source, function, pairs = _confine(request_fd, result_fd, worker_pid, limits)
        except BaseException as exc:  # report why the sandbox could not be set up
            emit({"end": "setup_error", "error": _short_repr(exc)})
        else:
            _run_cases(source, function, pairs, emit)
        code = 0
    finally:
        os._exit(code)


def _emitter(fd: int) -> Callable[[dict], None]:
    """A writer of JSON lines to ``fd`` that only this process may use: processes the candidate forks exit."""
    owner = os.getpid()

    def emit(record: dict) -> None:
        if os.getpid() != owner:
            os._exit(0)
        _write_all(fd, json.dumps(record).encode() + b"\n")

    return emit


def _confine(request_fd: int, result_fd: int, worker_pid: int, limits: _Limits) -> tuple:
    """Isolate this child (session, fds, rlimits, unprivileged ids) and return the unpickled request."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    _close_fds_except({request_fd, result_fd})
    with open(request_fd, "rb") as request:
        source, function, pairs = pickle.load(request)
    os.chdir("/")
    _set_limits(limits)
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(_UNPRIVILEGED_ID)
        os.setuid(_UNPRIVILEGED_ID)
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
    if os.getppid() != worker_pid:
        raise RuntimeError("sandbox worker exited")
    return source, function, pairs


def _close_fds_except(keep: set[int]) -> None:
    start = 3
    for fd in sorted(keep):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, os.sysconf("SC_OPEN_MAX"))


def _set_limits(limits: _Limits) -> None:
    """No core files, no file writes, bounded CPU seconds, processes and address space."""
    memory = limits.memory_mb << 20
    for which, soft, hard in (
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_FSIZE, 0, 0),
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 1),
        (resource.RLIMIT_NPROC, _MAX_PROCS, _MAX_PROCS),
        (resource.RLIMIT_AS, memory, memory),
    ):
        ceiling = resource.getrlimit(which)[1]
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        resource.setrlimit(which, (soft, hard))


if __name__ == "__main__":
    _worker_main(*sys.argv[1:])
