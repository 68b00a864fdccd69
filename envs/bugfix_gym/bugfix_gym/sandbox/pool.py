"""The pool: warm sandbox workers handed to callers first come, first served, and the verdicts they feed.

Each worker (:mod:`bugfix_gym.sandbox.worker`) lives in the view of :mod:`bugfix_gym.sandbox.view` and talks
to the pool over a Unix SEQPACKET socket. Per request the pool passes the run's prepared candidate the function's
source and the case arguments (never the expected values), a memfd for its records and the write end of a pipe
that says they are complete; the candidate writes one record per case straight to the pool: the return value
as plain data, or what it raised. The pool compares each value with the expected one, exact types included, so
a candidate can fail to return the right values but cannot claim to pass. The worker only reports how the run
ended.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import selectors
import signal
import socket
import subprocess
import threading
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from agentrl_plugins.errors import UnknownNameError

from bugfix_gym.sandbox import plain_data, view
from bugfix_gym.sandbox.worker import (
    INLINE_REQUEST_BYTES,
    RUN_LAYERS,
    Limits,
    emitter,
    run_cases,
    write_all,
)

LAYERS = {
    "view": "a bubblewrap view: read-only system and Python, no installed package, host file or host socket",
    "network": "an empty network namespace",
    "run_namespaces": "per-run user, PID, mount and IPC namespaces: nothing outlives a run, no run can signal another "
                      "or read what another left",
    "private_tmp": "a private empty /tmp and /dev/shm per run, and /proc hidden",
    "seccomp": "a seccomp filter: no new process or program, namespace, mount, ptrace, bpf, io_uring or keyring",
}
_GRACE_S = 1.5  # how long past timeout_s the pool waits for a worker before declaring it hung
_STARTUP_S = 30.0
_STARVED = 0.5  # a wall-clock timeout with less CPU than this share of timeout_s is the machine's, not the code's
_OUTPUT_BASE, _OUTPUT_PER_CASE = 65536, 16384  # bytes of candidate output accepted per run
_END_KINDS = frozenset({"ok", "memory", "load_error"})
_CLOSED = object()


@dataclass(frozen=True)
class TestCase:
    """One call of the function under test: PASS iff ``function(*args)`` returns ``expected``, exact types included."""

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
    'crashed'     killed by a signal (SIGSEGV, ...), malformed output, or the sandbox failed;
    'unavailable' no worker became free in time.

    ``transient`` marks a result that says more about the machine than about the source (a sandbox failure,
    no free worker, a wall-clock timeout on little CPU): the same source may do otherwise next time.
    """

    results: tuple[CaseResult, ...]
    status: str
    detail: str
    transient: bool = False

    @property
    def passed(self) -> bool:
        """True iff the run finished normally and every case passed."""
        return self.status == "ok" and all(result.passed for result in self.results)


class SandboxUnavailableError(RuntimeError):
    """A strict sandbox could not set up every layer."""


class Sandbox:
    """A thread-safe pool of warm workers; each ``run`` executes in a fresh, confined process tree.

    ``missing_layers`` names each layer of :data:`LAYERS` this machine could not provide, with the reason;
    ``strict=True`` refuses to start without all of them. A call waits at most ``acquire_timeout_s`` for a
    worker; callers are served in arrival order, and no run holds a worker past ``timeout_s`` + 1.5 s.
    ``layers`` leaves layers out, to measure what each costs (the network comes with the view)."""

    def __init__(self, workers: int = 2, timeout_s: float = 2.0, memory_mb: int = 256, cpu_s: int = 2,
                 strict: bool = False, acquire_timeout_s: float = 30.0, layers: Iterable[str] = tuple(LAYERS)):
        if workers < 1 or timeout_s <= 0 or memory_mb < 1 or cpu_s < 1 or acquire_timeout_s <= 0:
            raise ValueError("workers, timeout_s, memory_mb, cpu_s and acquire_timeout_s must be positive")
        self.layers = frozenset(layers)
        unknown = sorted(self.layers - set(LAYERS))
        if unknown:
            raise UnknownNameError("sandbox layer", unknown[0], LAYERS)
        self.limits = Limits(float(timeout_s), int(memory_mb), int(cpu_s))
        self.acquire_timeout_s = float(acquire_timeout_s)
        self._slots = _Slots()
        self._drainer = _Drainer(self._release)
        self._bwrap, why = view.bwrap_binary() if "view" in self.layers else (None, "left out on request")
        first, self.missing_layers = self._first_worker(why)
        if strict and self.missing_layers:
            first.stop(graceful=False)
            raise SandboxUnavailableError(_describe(self.missing_layers, "refusing to run untrusted code without"))
        if self.missing_layers:
            message = _describe(self.missing_layers, "running untrusted code without")
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        pool = [first]
        try:
            pool.extend(self._start_worker()[0] for _ in range(workers - 1))
        except BaseException:
            for worker in pool:
                worker.stop(graceful=False)
            raise
        for worker in pool:
            self._slots.put(worker)

    def run(self, source: str, function: str, cases: Sequence[TestCase]) -> RunResult:
        """Load ``source``, call ``function`` on every case in a sandboxed process and judge each case here.

        Case arguments must be picklable by standard-library classes (the worker cannot import the caller's
        own modules); expected values stay in this process."""
        cases = tuple(cases)
        try:
            worker = self._acquire()
        except TimeoutError:
            return _result(cases, {}, "unavailable",
                           f"no sandbox worker became free within {self.acquire_timeout_s} s", True)
        payload = pickle.dumps((source, function, [case.args for case in cases]))
        exchange = None
        try:
            exchange = worker.exchange(
                payload, self.limits.timeout_s + _GRACE_S, _OUTPUT_BASE + _OUTPUT_PER_CASE * len(cases)
            )
        finally:
            if exchange is not None and exchange.reply is None and exchange.ended:
                self._drainer.add(worker, time.monotonic() + self.limits.timeout_s + _GRACE_S)
            else:
                self._release(worker, exchange is not None and _healthy(worker, exchange.reply))
        results, end, complete = _judge(exchange.records, cases)
        return _result(cases, results, *self._status(exchange, end, complete))

    def close(self) -> None:
        """Stop every idle worker; workers busy in a run stop when it finishes. Later runs raise."""
        self._drainer.close()
        for slot in self._slots.close():
            if isinstance(slot, _Worker):
                slot.stop(graceful=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _first_worker(self, why_no_bwrap: str) -> tuple[_Worker, dict[str, str]]:
        """Start one worker inside the view, or without it where bubblewrap cannot run; what is missing."""
        missing: dict[str, str] = {}
        if self._bwrap is not None:
            try:
                worker, problems = self._start_worker()
                return worker, problems
            except RuntimeError as exc:
                missing["view"] = f"bubblewrap could not start a worker: {exc}"
                self._bwrap = None
        else:
            missing["view"] = why_no_bwrap
        if os.geteuid() != 0:
            missing["network"] = "no network namespace without bubblewrap or root"
        worker, problems = self._start_worker()
        return worker, {**missing, **problems}

    def _start_worker(self) -> tuple[_Worker, dict[str, str]]:
        run_layers = ",".join(sorted(self.layers & RUN_LAYERS))
        worker = _Worker(lambda fd, info_fd: view.worker_command(
            self._bwrap, [*map(str, self.limits), str(fd)], run_layers, info_fd))
        return worker, worker.wait_ready()

    def _acquire(self) -> _Worker:
        """The next free worker for this caller; a new one where the slot is empty or its worker died."""
        slot = self._slots.get(self.acquire_timeout_s)
        if slot is _CLOSED:
            raise RuntimeError("Sandbox is closed")
        if isinstance(slot, _Worker) and slot.proc.poll() is None:
            return slot
        if isinstance(slot, _Worker):
            slot.stop(graceful=False)
        try:
            return self._start_worker()[0]
        except BaseException:
            self._slots.put(None)
            raise

    def _release(self, worker: _Worker, healthy: bool) -> None:
        """Return a healthy worker to the pool; stop any other and leave an empty slot in its place."""
        if healthy and self._slots.put(worker):
            return
        worker.stop(graceful=healthy)
        if not healthy:
            self._slots.put(None)

    def _status(self, exchange: _Exchange, end: dict | None, complete: bool) -> tuple[str, str, bool]:
        """Status, detail and transience of a run from the candidate's records and the worker's reply."""
        reply = exchange.reply
        if exchange.overflow:
            return "crashed", "sandbox output exceeded its size limit", False
        if reply is None and exchange.ended:  # decided by the records; the worker's reply comes later
            return (*_end_status(end, complete), False)
        if reply is None:
            return "crashed", "sandbox worker died or stopped responding; it was replaced", True
        if "setup_error" in reply:
            return "crashed", f"sandbox setup failed: {reply['setup_error']}", True
        code = reply["code"]
        if reply["timeout"]:
            cpu_s = reply["cpu_s"]
            if cpu_s < _STARVED * self.limits.timeout_s:
                return "timeout", (f"exceeded {self.limits.timeout_s} s wall clock using {cpu_s:.2f} s of CPU "
                                   "(a busy machine or a waiting candidate)"), True
            return "timeout", f"exceeded {self.limits.timeout_s} s wall clock", False
        if code == -signal.SIGXCPU:
            return "timeout", f"exceeded {self.limits.cpu_s} s CPU time", False
        if code < 0:
            return "crashed", f"killed by {_signal_name(-code)}", False
        if code != 0 or end is None:
            return "exited", f"process exited with code {code} before finishing", False
        return (*_end_status(end, complete), False)


def run_in_process(source: str, function: str, cases: Sequence[TestCase]) -> RunResult:
    """Unsandboxed baseline for benchmarks: same semantics, no isolation and no limits. Never for untrusted code."""
    cases = tuple(cases)
    records: list[dict] = []
    run_cases(source, function, [case.args for case in cases], records.append)
    results, end, complete = _judge(json.loads(json.dumps(records)), cases)
    return _result(cases, results, *_end_status(end, complete))


def run_in_fork(source: str, function: str, cases: Sequence[TestCase]) -> RunResult:
    """Benchmark baseline: a plain fork per call writing its records to a pipe; no confinement, no limits."""
    cases = tuple(cases)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            run_cases(source, function, [case.args for case in cases], emitter(write_fd))
        finally:
            os._exit(0)
    os.close(write_fd)
    with open(read_fd, "rb") as pipe:
        output = pipe.read()
    os.waitpid(pid, 0)
    results, end, complete = _judge([_decode_line(line) for line in output.splitlines()], cases)
    return _result(cases, results, *_end_status(end, complete))


class _Slots:
    """Idle workers (or empty slots, None) handed to waiting callers first come, first served."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: deque = deque()
        self._waiting: deque[_Waiter] = deque()
        self._closed = False

    def put(self, slot: object) -> bool:
        """Hand ``slot`` to the longest-waiting caller, or keep it idle; False once closed."""
        with self._lock:
            if self._closed:
                return False
            if self._waiting:
                waiter = self._waiting.popleft()
                waiter.slot = slot
                waiter.event.set()
            else:
                self._idle.append(slot)
            return True

    def get(self, timeout_s: float) -> object:
        """A slot, or _CLOSED; TimeoutError after ``timeout_s``."""
        with self._lock:
            if self._closed:
                return _CLOSED
            if self._idle:
                return self._idle.popleft()
            waiter = _Waiter()
            self._waiting.append(waiter)
        if waiter.event.wait(timeout_s):
            return waiter.slot
        with self._lock:
            if waiter.event.is_set():
                return waiter.slot
            self._waiting.remove(waiter)
        raise TimeoutError

    def close(self) -> list:
        """Refuse later calls, wake every waiting caller, and return the idle slots."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
            for waiter in self._waiting:
                waiter.slot = _CLOSED
                waiter.event.set()
            self._waiting.clear()
        return idle


class _Waiter:
    """A caller waiting for a slot: the slot handed to it and the event that says so."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.slot: object = None


class _Worker:
    """Pool side of one warm worker process, and the channel to the candidate of its prepared run."""

    def __init__(self, command_for: Callable[[int, int], list[str]]):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.channel: socket.socket | None = None
        self._view_init: int | None = None  # pidfd of the view's PID 1: killing it ends everything inside
        info_read, info_write = os.pipe()
        self._info: int | None = info_read  # where bubblewrap writes the view's PID 1
        with theirs:
            self.proc = subprocess.Popen(
                command_for(theirs.fileno(), info_write),
                pass_fds=(theirs.fileno(), info_write),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={"PATH": os.defpath},
                start_new_session=True,
            )
        os.close(info_write)

    def wait_ready(self) -> dict[str, str]:
        """Block until the worker has started; the layers it could not set up. RuntimeError if it did not start."""
        self.sock.settimeout(_STARTUP_S)
        try:
            message = self.read_reply()
        except (TimeoutError, OSError):
            message = b""
        self.sock.settimeout(None)
        kind, _, problems = message.partition(b" ")
        if kind != b"ready" or self.channel is None:
            self.stop(graceful=False)
            error = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.stderr else ""
            why = problems.decode(errors="replace") if kind == b"failed" else error[-2000:]
            raise RuntimeError(f"sandbox worker failed to start (exit code {self.proc.poll()}): {why}")
        if self.proc.stderr:
            self.proc.stderr.close()
        self._watch_view()
        return json.loads(problems)

    def _watch_view(self) -> None:
        """Keep a pidfd of the view's PID 1, which bubblewrap reported before the worker started."""
        if self._info is None:
            return
        os.set_blocking(self._info, False)
        try:
            info = json.loads(os.read(self._info, 4096) or b"{}")
        except (OSError, ValueError):
            info = {}
        finally:
            os.close(self._info)
            self._info = None
        if "child-pid" in info:
            self._view_init = os.pidfd_open(info["child-pid"])

    def read_reply(self) -> bytes:
        """The worker's next message (empty once it is gone), keeping the prepared run's channel it carries."""
        message, fds, _, _ = socket.recv_fds(self.sock, 65536, 1)
        if fds:
            self.channel = socket.socket(fileno=fds[0])
        return message

    def exchange(self, payload: bytes, wait_s: float, limit: int) -> _Exchange:
        """Run one request: the candidate's records, and the worker's reply unless the records ended first."""
        results_fd = os.memfd_create("sandbox-results")
        end_read, end_write = os.pipe()
        try:
            sent = self._send(payload, results_fd, end_write)
            os.close(end_write)
            return self._receive(results_fd, end_read, time.monotonic() + wait_s, limit) if sent else _Exchange()
        finally:
            os.close(results_fd)
            os.close(end_read)

    def stop(self, graceful: bool) -> None:
        """Close the sockets (a worker exits when it sees EOF), then make sure everything it started is gone."""
        self.sock.close()
        for fd in (self.channel, self._info):
            if isinstance(fd, socket.socket):
                fd.close()
            elif fd is not None:
                os.close(fd)
        self._info = None
        if graceful:
            try:
                self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        if self._view_init is not None:
            try:
                signal.pidfd_send_signal(self._view_init, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(self._view_init)
            self._view_init = None
        self.proc.kill()
        self.proc.wait()

    def _send(self, payload: bytes, results_fd: int, end_write: int) -> bool:
        """Pass the prepared candidate its request (in the message, or in a memfd where it is large), the records
        memfd and the end pipe, and tell the worker; False if either is gone."""
        channel, self.channel = self.channel, None
        if channel is None:
            return False
        request_fd = None
        try:
            if len(payload) <= INLINE_REQUEST_BYTES:
                socket.send_fds(channel, [b"run" + payload], [results_fd, end_write])
            else:
                request_fd = os.memfd_create("sandbox-request")
                write_all(request_fd, payload)
                os.lseek(request_fd, 0, os.SEEK_SET)
                socket.send_fds(channel, [b"file"], [results_fd, end_write, request_fd])
            self.sock.send(b"go")
        except OSError:
            return False
        finally:
            if request_fd is not None:
                os.close(request_fd)
            channel.close()
        return True

    def _receive(self, results_fd: int, end_read: int, deadline: float, limit: int) -> _Exchange:
        """Wait until the records end (or the candidate is gone) or the worker replies, or the deadline passes."""
        exchange = _Exchange()
        poller = select.poll()
        poller.register(end_read, select.POLLIN)
        poller.register(self.sock, select.POLLIN)
        while (remaining := deadline - time.monotonic()) > 0:
            for fd, _ in poller.poll(remaining * 1e3):
                if fd == self.sock.fileno():
                    message = self.read_reply()
                    exchange.reply = json.loads(message) if message else None
                    exchange.records, exchange.overflow = _read_records(results_fd, limit)
                    return exchange
                poller.unregister(end_read)  # one look: a candidate that signals early only waits longer
                exchange.records, exchange.overflow = _read_records(results_fd, limit)
                if exchange.overflow or any(map(_is_end_record, exchange.records)):
                    exchange.ended = True
                    return exchange
        return exchange


@dataclass
class _Exchange:
    """What one request brought back: the candidate's records, whether they ended, the worker's reply."""

    records: list = field(default_factory=list)
    ended: bool = False
    overflow: bool = False
    reply: dict | None = None


class _Drainer:
    """Waits, off the callers' path, for the replies of workers whose runs were already decided, then releases them."""

    def __init__(self, release: Callable[[_Worker, bool], None]):
        self._release = release
        self._lock = threading.Lock()
        self._added: list[tuple[_Worker, float]] = []
        self._wake_read, self._wake_write = socket.socketpair()
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, worker: _Worker, deadline: float) -> None:
        with self._lock:
            if self._closed:
                self._release(worker, False)
                return
            self._added.append((worker, deadline))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="sandbox-drainer", daemon=True)
                self._thread.start()
        self._wake_write.send(b"x")

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._wake_write.send(b"x")
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        waiting: dict[socket.socket, tuple[_Worker, float]] = {}
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_read, selectors.EVENT_READ)
            while True:
                with self._lock:
                    closed, added, self._added = self._closed, self._added, []
                for worker, deadline in added:
                    waiting[worker.sock] = (worker, deadline)
                    selector.register(worker.sock, selectors.EVENT_READ)
                if closed and not waiting:
                    return
                now = time.monotonic()
                timeout = min((deadline for _, deadline in waiting.values()), default=now + 60.0) - now
                for key, _ in selector.select(max(0.0, timeout)):
                    if key.fileobj is self._wake_read:
                        self._wake_read.recv(4096)
                        continue
                    worker, _ = waiting.pop(key.fileobj)  # type: ignore[call-overload]
                    selector.unregister(worker.sock)
                    self._release(worker, _healthy(worker, worker.read_reply()))
                now = time.monotonic()
                for sock in [sock for sock, (_, deadline) in waiting.items() if deadline <= now]:
                    worker, _ = waiting.pop(sock)
                    selector.unregister(sock)
                    self._release(worker, False)


def _read_records(fd: int, limit: int) -> tuple[list, bool]:
    """The complete lines the candidate has written to its records memfd, decoded; and whether it wrote too much."""
    size = os.fstat(fd).st_size
    if size > limit:
        return [], True
    lines = os.pread(fd, size, 0).split(b"\n")[:-1]  # the last piece is empty or an unfinished line
    try:  # one parse for the usual well-formed lines; line by line where that fails or blurs their boundaries
        records = json.loads(b"[" + b",".join(lines) + b"]")
        if type(records) is list and len(records) == len(lines):
            return records, False
    except (ValueError, RecursionError):
        pass
    return [_decode_line(line) for line in lines], False


def _decode_line(line: bytes) -> object:
    """The JSON record on one line of candidate output; None where it does not parse."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _judge(records: list, cases: tuple[TestCase, ...]) -> tuple[dict[int, tuple[bool, str]], dict | None, bool]:
    """Per-case (passed, got) by index, the end record, and whether the records were complete and well-formed.

    Only the first end record counts, and nothing after it. Malformed output (a duplicate, an unknown record)
    is not the harness's: then no case counts."""
    results: dict[int, tuple[bool, str]] = {}
    end = None
    wellformed = True
    for record in records:
        if _is_end_record(record):
            end = record
            break
        judged = _judge_case(record, cases)
        if judged is None or judged[0] in results:
            wellformed = False
            continue
        results[judged[0]] = judged[1]
    return (results if wellformed else {}), end, wellformed and len(results) == len(cases)


def _judge_case(record: object, cases: tuple[TestCase, ...]) -> tuple[int, tuple[bool, str]] | None:
    """(index, (passed, got)) of one case record, or None where it is malformed."""
    if not (isinstance(record, dict) and type(record.get("case")) is int and 0 <= record["case"] < len(cases)):
        return None
    index = record["case"]
    if set(record) == {"case", "value"}:
        try:
            return index, (plain_data.same(record["value"], cases[index].expected), plain_data.shown(record["value"]))
        except (ValueError, TypeError, RecursionError):
            return None
    if set(record) == {"case", "raised"} and type(record["raised"]) is str:
        return index, (False, record["raised"])
    if set(record) == {"case", "unplain"} and type(record["unplain"]) is str:
        return index, (False, f"returned a value that is not plain data: {record['unplain']}")
    return None


def _is_end_record(record: object) -> bool:
    return (
        isinstance(record, dict)
        and record.get("end") in _END_KINDS
        and (record["end"] in ("ok", "memory") or type(record.get("error")) is str)
    )


def _healthy(worker: _Worker, reply: dict | bytes | None) -> bool:
    """Whether a worker may serve again: it replied, without a setup failure, and sent its next run's channel."""
    if isinstance(reply, bytes):
        try:
            reply = json.loads(reply) if reply else None
        except ValueError:
            return False
    return isinstance(reply, dict) and not {"setup_error", "next_error"} & set(reply) and worker.channel is not None


def _end_status(end: dict | None, complete: bool) -> tuple[str, str]:
    """Status and detail of a candidate that exited cleanly after writing ``end``."""
    if end is None:
        return "crashed", "malformed output from the sandbox"
    kind = end["end"]
    if kind == "ok":
        return ("ok", "all cases ran") if complete else ("crashed", "malformed output from the sandbox")
    if kind == "memory":
        return "memory", "a case raised MemoryError (memory limit reached); later cases did not run"
    return "load_error", end["error"]


def _result(cases: tuple[TestCase, ...], results: dict, status: str, detail: str, transient: bool = False) -> RunResult:
    """Assemble a RunResult; cases without a result FAIL with the load error or the reason the run ended."""
    missing = (False, detail if status == "load_error" else f"{status}: {detail}")
    return RunResult(
        tuple(CaseResult(case, *results.get(index, missing)) for index, case in enumerate(cases)), status, detail,
        transient,
    )


def _describe(missing: dict[str, str], lead: str) -> str:
    lines = [f"- {name} ({LAYERS[name]}): {why}" for name, why in missing.items()]
    return f"sandbox: {lead} {len(missing)} layer(s):\n" + "\n".join(lines)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
