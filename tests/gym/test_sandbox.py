"""Proves the BugFix sandbox contains hostile candidates, answers within its timeout and keeps serving."""

import ast
import os
import pickle
import shutil
import signal
import socket
import tempfile
import threading
import time
import uuid

import pytest
from machine_load import stretch
from process_tree import descendants, proc_stat, run_processes_settle, worker_pids

from bugfix_gym.sandbox import RunResult, Sandbox, run_in_process
from bugfix_gym.sandbox import TestCase as Case
from bugfix_gym.sandbox.worker import INLINE_REQUEST_BYTES

TIMEOUT_S = 1.0
MARGIN_S = 0.75

ADD = "def add(a, b):\n    return a + b\n"
ADD_CASES = (Case((1, 2), 3), Case((2, 2), 4), Case((0, 0), 1))
CALL = (Case((), None),)  # a function that returned None would pass; a dead one must not
FDS_SOURCE = (  # f returns the file descriptors open in the candidate
    "import os\n"
    "def f():\n"
    "    found = []\n"
    "    for fd in range(1024):\n"
    "        try:\n            os.fstat(fd)\n        except OSError:\n            continue\n"
    "        found.append(fd)\n"
    "    return found\n"
)

HOSTILE = {
    "infinite_loop": ("def f():\n    while True:\n        pass\n", "timeout", "wall clock"),
    "hang_at_import": ("while True:\n    pass\n", "timeout", "wall clock"),
    "segfault": ("import ctypes\ndef f():\n    return ctypes.string_at(0)\n", "crashed", "SIGSEGV"),
    "abort": ("import os\ndef f():\n    os.abort()\n", "crashed", "SIGABRT"),
    "os_exit_zero": ("import os\ndef f():\n    os._exit(0)\n", "exited", "code 0"),
    "stops_itself": ("import os, signal\ndef f():\n    os.kill(os.getpid(), signal.SIGSTOP)\n", "timeout", "wall"),
    "exit_at_import": ("import sys\nsys.exit(0)\n", "load_error", "SystemExit"),
    "spams_result_pipe": (
        "import os\ndef f():\n    while True:\n        for fd in range(3, 32):\n"
        "            try:\n                os.write(fd, b'x' * 65536)\n"
        "            except OSError:\n                pass\n",
        "crashed",
        "output",
    ),
}
MEMORY_BOMBS = {  # touching 256 MB takes 0.1 s here and over 1 s on a cold VM: its own, roomier clock
    "string_bomb": "def f():\n    return len(' ' * 10**10)\n",
    "list_bomb": "def f():\n    hoard = []\n    while True:\n        hoard.append(bytearray(1 << 20))\n",
}
ROOMY_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, timeout_s=TIMEOUT_S, memory_mb=256, cpu_s=2) as box:
        yield box


@pytest.fixture(scope="module")
def roomy_sandbox():
    """The same limits except the wall clock and CPU seconds, so the memory limit is the one that trips."""
    with Sandbox(workers=2, timeout_s=ROOMY_TIMEOUT_S, memory_mb=256, cpu_s=int(ROOMY_TIMEOUT_S)) as box:
        yield box


def timed_run(box, source, function="f", cases=CALL, budget_s=None):
    """Run and assert the answer came back within the box's timeout plus a small margin, on an idle machine; a
    loaded one stretches the bound by how much slower than the CPU its wall clock runs (:func:`stretch`)."""
    factor = stretch()
    start = time.monotonic()
    result = box.run(source, function, cases)
    elapsed = time.monotonic() - start
    bound = (budget_s or box.limits.timeout_s + MARGIN_S) * max(factor, stretch())
    assert elapsed < bound, f"took {elapsed:.2f} s (bound {bound:.2f} s): {result}"
    return result


def assert_healthy(box):
    """Every worker still serves a normal run correctly and has no leftover descendants."""
    for _ in range(2):
        result = box.run(ADD, "add", ADD_CASES)
        assert result.status == "ok", result
        assert [r.passed for r in result.results] == [True, True, False]
    assert run_processes_settle()  # the prepared next run, nothing else


def test_passing_and_failing_cases(sandbox):
    result = sandbox.run(ADD, "add", ADD_CASES)
    assert isinstance(result, RunResult) and result.status == "ok" and result.detail == "all cases ran"
    assert [(r.case, r.passed, r.got) for r in result.results] == [
        (ADD_CASES[0], True, "3"),
        (ADD_CASES[1], True, "4"),
        (ADD_CASES[2], False, "0"),
    ]
    assert not result.passed
    assert sandbox.run(ADD, "add", ADD_CASES[:2]).passed
    assert pickle.loads(pickle.dumps(result)) == result


def test_exceptions_fail_only_their_case(sandbox):
    source = "def f(x):\n    return 10 // x\n"
    result = sandbox.run(source, "f", [Case((0,), 0), Case((5,), 2)])
    assert result.status == "ok"
    assert result.results[0].got.startswith("ZeroDivisionError") and not result.results[0].passed
    assert result.results[1].passed


def test_syntax_error_is_load_error(sandbox):
    result = timed_run(sandbox, "def f(:\n    pass\n", cases=ADD_CASES)
    assert result.status == "load_error" and result.detail.startswith("SyntaxError")
    assert all(not r.passed and r.got == result.detail for r in result.results)


def test_missing_function_is_load_error(sandbox):
    result = sandbox.run("g = 1\n", "g", ADD_CASES)
    assert result.status == "load_error" and "NameError" in result.detail


def test_system_exit_and_recursion_are_failing_cases(sandbox):
    source = (
        "import sys\n"
        "def f(x):\n"
        "    if x == 0:\n        sys.exit(0)\n"
        "    if x == 1:\n        raise SystemExit\n"
        "    if x == 2:\n        return f(x)\n"
        "    return x\n"
    )
    result = timed_run(sandbox, source, cases=[Case((n,), n) for n in range(4)])
    assert result.status == "ok"
    assert [r.got.split("(")[0] for r in result.results] == ["SystemExit", "SystemExit", "RecursionError", "3"]
    assert [r.passed for r in result.results] == [False, False, False, True]
    assert_healthy(sandbox)


def test_unbounded_recursion_limit_is_contained(sandbox):
    source = "import sys\nsys.setrecursionlimit(10**9)\ndef f(n=0):\n    return f(n + 1) + 1\n"
    result = timed_run(sandbox, source)
    assert result.status in {"memory", "crashed", "timeout", "ok"} and not result.passed
    assert_healthy(sandbox)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_candidate_is_contained(sandbox, name):
    source, status, detail = HOSTILE[name]
    result = timed_run(sandbox, source)
    assert result.status == status, result
    assert detail in result.detail, result
    assert not result.passed and not result.results[0].passed
    assert_healthy(sandbox)


@pytest.mark.parametrize("name", MEMORY_BOMBS)
def test_memory_bomb_meets_the_memory_limit(roomy_sandbox, name):
    result = timed_run(roomy_sandbox, MEMORY_BOMBS[name])
    assert result.status == "memory", result
    assert "MemoryError" in result.detail, result
    assert not result.passed and not result.results[0].passed
    assert_healthy(roomy_sandbox)


def test_early_death_keeps_finished_cases(sandbox):
    source = "import os\ndef f(x):\n    if x:\n        os._exit(0)\n    return x\n"
    result = timed_run(sandbox, source, cases=[Case((0,), 0), Case((1,), None), Case((0,), 0)])
    assert result.status == "exited"
    assert [r.passed for r in result.results] == [True, False, False]
    assert result.results[1].got.startswith("exited: ")


def test_cpu_limit():
    with Sandbox(workers=1, timeout_s=3.0, cpu_s=1) as box:
        result = timed_run(box, HOSTILE["infinite_loop"][0], budget_s=2.5)
        assert result.status == "timeout" and "CPU" in result.detail


def test_candidate_sees_only_its_result_channel(sandbox):
    """stdin, stdout and stderr on /dev/null, the records memfd and the end pipe: nothing else."""
    found = ast.literal_eval(sandbox.run(FDS_SOURCE, "f", CALL).results[0].got)
    assert found[:3] == [0, 1, 2] and len(found) == 5


def test_large_request_travels_in_a_memfd(sandbox):
    """A request past the message size (a long source, a long argument) runs the same, and its memfd is closed."""
    source = "# " + "x" * 40000 + "\n" + FDS_SOURCE + "def g(text):\n    return len(text)\n"
    assert len(source) > INLINE_REQUEST_BYTES
    result = sandbox.run(source, "f", CALL)
    assert result.status == "ok" and len(ast.literal_eval(result.results[0].got)) == 5
    assert sandbox.run(source, "g", [Case(("y" * 50000,), 50000)]).passed


def test_environment_is_not_inherited(monkeypatch):
    monkeypatch.setenv("BUGFIX_SECRET", "hunter2")
    with Sandbox(workers=1, timeout_s=TIMEOUT_S) as box:
        result = box.run("import os\ndef f():\n    return os.environ.get('BUGFIX_SECRET')\n", "f", CALL)
    assert result.passed


def test_candidate_runs_unprivileged(sandbox):
    source = "import os\ndef f():\n    return os.getuid(), os.getgid(), os.getgroups()\n"
    assert sandbox.run(source, "f", [Case((), (65534, 65534, []))]).passed


def test_host_files_are_out_of_sight(sandbox):
    directory = tempfile.mkdtemp()
    os.chmod(directory, 0o777)
    target = os.path.join(directory, "out.txt")
    try:
        source = ("def f(path, mode):\n    with open(path, mode) as file:\n"
                  "        return file.write('x') if mode == 'w' else file.read()\n")
        cases = [Case((target, "w"), None), Case(("/etc/shadow", "r"), None), Case(("/etc/passwd", "r"), None)]
        result = sandbox.run(source, "f", cases)
        assert [r.got.split("(")[0] for r in result.results] == ["FileNotFoundError"] * 3
        assert not os.path.exists(target)
    finally:
        shutil.rmtree(directory)


def test_no_network(sandbox):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        source = (
            "import socket\n"
            "def f(port):\n"
            "    with socket.socket() as client:\n"
            "        client.settimeout(0.5)\n"
            "        client.connect(('127.0.0.1', port))\n"
            "    return 'connected'\n"
        )
        result = timed_run(sandbox, source, cases=[Case((port,), "connected")])
    assert not result.passed and result.results[0].got.startswith(("OSError", "ConnectionRefusedError"))


def test_expected_values_never_leave_the_pool(sandbox):
    """Not in a worker, not in the prepared next run, not in the candidate's own heap."""
    marker = f"expected-{uuid.uuid4().hex}"
    source = ("import gc\ndef f(x):\n"
              "    return [o for o in gc.get_objects() if type(o) is str and o.startswith('expected-')]\n")
    result = sandbox.run(source, "f", [Case(("x",), [marker], hidden=True)])
    assert result.status == "ok" and result.results[0].got == "[]"
    run_processes_settle()
    for worker in worker_pids():
        for pid in [worker, *descendants(worker)]:
            assert marker.encode() not in _memory(pid)


def _memory(pid):
    """Every readable, private mapping of a process, concatenated."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(part, 16) for part in span.split("-"))
            if perms.startswith("r") and "vsyscall" not in line:
                try:
                    mem.seek(start)
                    chunks.append(mem.read(end - start))
                except OSError:
                    continue
    return b"".join(chunks)


def test_concurrent_runs_are_independent(sandbox):
    results = {}
    barrier = threading.Barrier(8)

    def call(factor):
        source = f"import time\ndef f(x):\n    time.sleep(0.02)\n    return x * {factor}\n"
        cases = [Case((n,), n * factor) for n in range(5)] + [Case((1,), -1)]
        barrier.wait()
        results[factor] = sandbox.run(source, "f", cases)

    threads = [threading.Thread(target=call, args=(factor,)) for factor in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for factor, result in results.items():
        assert result.status == "ok"
        assert [r.got for r in result.results] == [repr(n * factor) for n in range(5)] + [repr(factor)]
        assert [r.passed for r in result.results] == [True] * 5 + [factor == -1]
    assert len(results) == 8


def test_hostile_run_does_not_disturb_concurrent_runs(sandbox):
    hostile = threading.Thread(target=sandbox.run, args=(HOSTILE["infinite_loop"][0], "f", CALL))
    hostile.start()
    for _ in range(5):
        assert sandbox.run(ADD, "add", ADD_CASES[:2]).passed
    hostile.join()


def _signal_worker_mid_run(box, worker, sig):
    """Start an endless run on a one-worker box, send ``sig`` to its worker; return the result and the seconds taken."""
    outcome = {}
    start = time.monotonic()
    thread = threading.Thread(target=lambda: outcome.update(result=box.run(HOSTILE["infinite_loop"][0], "f", CALL)))
    thread.start()
    time.sleep(0.3)
    os.kill(worker, sig)
    thread.join()
    return outcome["result"], time.monotonic() - start


@pytest.mark.parametrize(("sig", "budget_s"), [(signal.SIGKILL, 1.0), (signal.SIGSTOP, 0.5 + 2.0)],
                         ids=["dies", "hangs"])
def test_failed_worker_is_reported_and_replaced(sig, budget_s):
    before = worker_pids()
    with Sandbox(workers=1, timeout_s=0.5) as box:
        (worker,) = worker_pids() - before
        result, elapsed = _signal_worker_mid_run(box, worker, sig)
        assert elapsed < budget_s
        assert result.status == "crashed" and "worker" in result.detail
        assert box.run(ADD, "add", ADD_CASES[:2]).passed
        assert worker not in worker_pids()


def test_close_stops_every_worker():
    before = worker_pids()
    box = Sandbox(workers=3, timeout_s=TIMEOUT_S)
    mine = worker_pids() - before
    assert len(mine) == 3
    assert box.run(ADD, "add", ADD_CASES[:1]).passed
    box.close()
    assert not mine & worker_pids() and all(proc_stat(pid) is None for pid in mine)
    with pytest.raises(RuntimeError):
        box.run(ADD, "add", ADD_CASES)


def test_run_in_process_matches_sandbox(sandbox):
    source = "import sys\ndef f(x):\n    if x < 0:\n        sys.exit(1)\n    return x * 2\n"
    cases = [Case((1,), 2), Case((2,), 5), Case((-1,), 0)]
    assert run_in_process(source, "f", cases) == sandbox.run(source, "f", cases)
    assert run_in_process("def f(:", "f", cases) == sandbox.run("def f(:", "f", cases)
