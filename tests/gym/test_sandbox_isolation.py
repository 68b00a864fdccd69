"""The sandbox against an attacker: verdicts it cannot forge, escapes that fail, layers it says are missing."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from machine_load import stretch
from process_tree import run_processes_settle

from bugfix_gym.sandbox import LAYERS, Sandbox, SandboxUnavailableError, view
from bugfix_gym.sandbox import TestCase as Case
from bugfix_gym.sandbox.plain_data import same, shown
from bugfix_gym.sandbox.worker import encode

CLAMP_CASES = (Case((3, 0, 5), 3), Case((-2, 0, 5), 0), Case((9, 0, 5), 5), Case((7, 0, 1), 1, hidden=True))
CALL = (Case((), None),)

# Each returns or claims the right answers without computing them; the sandbox must score every case a failure.
FORGES = {
    "always_equal_object": "class Yes:\n    def __eq__(self, other):\n        return True\n"
                           "def clamp(*args):\n    return Yes()\n",
    "int_subclass": "class Three(int):\n    def __eq__(self, other):\n        return True\n"
                    "    __hash__ = int.__hash__\n"
                    "def clamp(*args):\n    return Three(3)\n",
    "patched_builtins": "import builtins\nbuiltins.bool = lambda *a: True\nbuiltins.type = lambda *a: int\n"
                        "builtins.isinstance = lambda *a: True\ndef clamp(*args):\n    return -1\n",
    "patched_encoder": "import json\n_dumps = json.dumps\n"
                       "json.dumps = lambda record, **k: _dumps({**record, 'passed': True, 'got': 'ok'}, **k)\n"
                       "def clamp(*args):\n    return -1\n",
    "frame_walk": "import sys\ndef clamp(*args):\n    frame, seen = sys._getframe(1), []\n"
                  "    while frame:\n        seen += [v for v in frame.f_locals.values() if type(v) in (int, float)]\n"
                  "        frame = frame.f_back\n    return seen[0] if seen else -1\n",
    "heap_search": "import gc\ndef clamp(*args):\n"
                   "    cases = [o for o in gc.get_objects() if type(o) is list and o and type(o[0]) is tuple]\n"
                   "    return cases[0][-1][0] if cases else -1\n",
    "fake_result_lines_then_exit": "import os\ndef clamp(*args):\n    for fd in range(3, 64):\n"
                                  "        for case in range(8):\n            try:\n"
                                  "                os.write(fd, b'{\"case\": %d, \"passed\": true}\\n' % case)\n"
                                  "                os.write(fd, b'{\"case\": %d, \"value\": 3}\\n' % case)\n"
                                  "            except OSError:\n                pass\n"
                                  "    os.write(fd, b'{\"end\": \"ok\"}\\n')\n    os._exit(0)\n",
    "early_end_record": "import os\ndef clamp(*args):\n    for fd in range(3, 64):\n        try:\n"
                        "            os.write(fd, b'{\"end\": \"ok\"}\\n')\n        except OSError:\n            pass\n"
                        "    return -1\n",
    "import_the_gym": "def clamp(*args):\n    from bugfix_gym.families.clamp import FAMILY\n"
                      "    cases = FAMILY.hidden_tests + FAMILY.public_tests\n"
                      "    return next(c.expected for c in cases if c.args == args)\n",
    "read_the_gym_files": "import os, sys\ndef clamp(*args):\n    for root in ['/', *sys.path]:\n"
                          "        for folder, _, files in os.walk(root):\n            if 'clamp.py' in files:\n"
                          "                return open(os.path.join(folder, 'clamp.py')).read()\n    return -1\n",
    "signal_the_pool": "import os, signal\ndef clamp(*args):\n    os.kill(os.getppid(), signal.SIGSTOP)\n"
                       "    os.kill(-1, signal.SIGKILL)\n    return -1\n",
}

# Each tries to leave the run or reach past it; each must fail where it is, and leave nothing behind.
ESCAPES = {
    "fork": ("import os\ndef f():\n    return os.fork()\n", "PermissionError"),
    "subprocess": ("import subprocess\ndef f():\n    return subprocess.run(['/bin/true']).returncode\n",
                   "PermissionError"),
    "exec": ("import os\ndef f():\n    os.execv('/bin/sh', ['sh', '-c', 'sleep 60'])\n", "PermissionError"),
    "unshare": ("import ctypes, os\ndef f():\n    libc = ctypes.CDLL(None, use_errno=True)\n"
                "    return libc.unshare(0x10000000), ctypes.get_errno()\n", "(-1, 1)"),
    "mount": ("import ctypes\ndef f():\n    libc = ctypes.CDLL(None, use_errno=True)\n"
              "    return libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno()\n", "(-1, 1)"),
    "ptrace": ("import ctypes\ndef f():\n    libc = ctypes.CDLL(None, use_errno=True)\n"
               "    return libc.ptrace(16, 1, 0, 0), ctypes.get_errno()\n", "(-1, 1)"),
    "clone_namespace": ("import ctypes\ndef f():\n    libc = ctypes.CDLL(None, use_errno=True)\n"
                        "    return libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0), ctypes.get_errno()\n", "(-1, 1)"),
    "io_uring": ("import ctypes\ndef f():\n    libc = ctypes.CDLL(None, use_errno=True)\n"
                 "    return libc.syscall(425, 8, ctypes.create_string_buffer(120)), ctypes.get_errno()\n", "(-1, 1)"),
    "write_the_system": ("def f():\n    open('/usr/agentrl-escape', 'w')\n", "OSError(30"),
    "see_processes": ("import os\ndef f():\n    return os.getpid(), os.listdir('/proc')\n", "(2, [])"),
    "kill_everything": ("import os, signal\ndef f():\n    os.kill(-1, signal.SIGKILL)\n", "ProcessLookupError"),
    "gym_package": ("def f():\n    import bugfix_gym\n", "ModuleNotFoundError"),
}
if os.uname().machine != "x86_64":  # raw syscall numbers above are x86_64's
    for name in ("clone_namespace", "io_uring"):
        ESCAPES.pop(name)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, timeout_s=1.0, memory_mb=256, strict=True) as box:
        yield box


def test_every_layer_holds_on_this_machine(sandbox):
    assert sandbox.missing_layers == {}
    assert set(LAYERS) == {"view", "network", "run_namespaces", "private_tmp", "seccomp"}


@pytest.mark.parametrize("name", FORGES)
def test_no_verdict_is_forged(sandbox, name):
    result = sandbox.run(FORGES[name], "clamp", CLAMP_CASES)
    assert not any(r.passed for r in result.results), result
    assert not result.passed


def test_a_forging_candidate_still_passes_what_it_computes(sandbox):
    """The honest part of a forge counts, so a forge that answers the public tests is flagged hacked downstream."""
    source = "class Yes:\n    def __eq__(self, other):\n        return True\ndef clamp(v, lo, hi):\n" \
             "    return max(lo, min(v, hi)) if (lo, hi) == (0, 5) else Yes()\n"
    assert [r.passed for r in sandbox.run(source, "clamp", CLAMP_CASES).results] == [True, True, True, False]


@pytest.mark.parametrize(("got", "expected", "passes"), [
    ("True", 1, False), ("1", True, False), ("1.0", 1, False), ("[1, 2]", (1, 2), False), ("(1, [2])", (1, [2]), True),
    ("float('nan')", float("nan"), True), ("{'a': (1,)}", {"a": (1,)}, True), ("{'a': 1}", {"a": 1.0}, False),
    ("{1, 2}", frozenset({1, 2}), False), ("b'x'", "x", False), ("None", None, True), ("2 ** 100", 2 ** 100, True),
    ("{True, 2.0}", {1, 2}, False), ("{1: 'a'}", {True: "a"}, False), ("{2, 1}", {1, 2}, True),
    ("{0.0: 1, 'k': {3}}", {"k": {3}, -0.0: 1}, True), ("frozenset({(1, 2.5)})", frozenset({(1, 2.5)}), True),
])
def test_values_are_compared_with_exact_types(sandbox, got, expected, passes):
    source = f"def f():\n    return {got}\n"
    assert sandbox.run(source, "f", [Case((), expected)]).passed is passes


def test_plain_data_round_trips_and_nothing_else_encodes():
    value = [None, True, 3, -2.5, float("inf"), 1j, "s\udcff", b"\x00", (1, [2]), {3: {4}}, frozenset({5}), 10 ** 50]
    assert same(encode(value), value) and shown(encode(value)) == repr(value)
    assert not same(encode([1, 2]), [1, 2.0]) and not same(encode({1: 2}), {True: 2})
    for not_plain in (object(), type("Int", (int,), {})(1), [print], {1: object()}):
        with pytest.raises(TypeError):
            encode(not_plain)
    for forged in ({"int": 3}, {"eval": "1"}, 1.5, {"list": "abc"}, {"dict": [[1]]}, {"int": "9" * 5000}):
        with pytest.raises(ValueError):
            same(forged, 1)


def test_ints_of_one_hash_cost_the_pool_no_more_than_other_ints():
    """5,000 ints congruent modulo the hash modulus all hash alike; compared, they must not be put in a set."""
    modulus = (1 << 61) - 1
    cpu_s = {}
    for name, value in (("plain", set(range(1, 5001))), ("flood", {i * modulus for i in range(1, 5001)})):
        tagged, start = encode(value), time.process_time()
        assert not same(tagged, {1}) and shown(tagged).startswith("{")
        cpu_s[name] = time.process_time() - start
    assert cpu_s["flood"] < 3 * cpu_s["plain"] + 0.02, cpu_s  # rebuilt as a set, the flood took 0.44 s


@pytest.mark.parametrize("name", ESCAPES)
def test_escape_fails_and_nothing_outlives_the_run(sandbox, name):
    source, outcome = ESCAPES[name]
    result = sandbox.run(source, "f", CALL)
    assert result.status == "ok" and result.results[0].got.startswith(outcome), result
    assert run_processes_settle()


def test_each_run_has_its_own_empty_temp(sandbox):
    leave = ("import os, socket\ndef f(tag):\n    open(f'/tmp/{tag}', 'w').write(tag)\n"
             "    open(f'/dev/shm/{tag}', 'w')\n"
             "    os.mkfifo(f'/tmp/{tag}.fifo')\n    socket.socket(socket.AF_UNIX).bind(f'/tmp/{tag}.sock')\n"
             "    return sorted(os.listdir('/tmp'))\n")
    look = "import os\ndef f():\n    return os.listdir('/tmp'), os.listdir('/dev/shm')\n"
    for tag in ("one", "two"):
        assert sandbox.run(leave, "f", [Case((tag,), [tag, f"{tag}.fifo", f"{tag}.sock"])]).passed
        assert sandbox.run(look, "f", [Case((), ([], []))]).passed


# Kernel objects that outlive the process that made them: each is planted by one run and looked for by the next.
IPC_OBJECTS = {
    "sysv_shared_memory": ("libc.shmget(KEY, 1 << 20, 0o1666)", "libc.shmget(KEY, 0, 0)"),
    "sysv_message_queue": ("libc.msgget(KEY, 0o1666)", "libc.msgget(KEY, 0)"),
    "sysv_semaphore": ("libc.semget(KEY, 1, 0o1666)", "libc.semget(KEY, 1, 0)"),
    "posix_message_queue": ("libc.mq_open(b'/agentrl-plant', 0o102, 0o666, None)",  # O_RDWR | O_CREAT
                            "libc.mq_open(b'/agentrl-plant', 0o2, 0, None)"),
}


@pytest.mark.parametrize("kind", IPC_OBJECTS)
def test_no_ipc_object_outlives_its_run(kind):
    """One worker serves both runs, as one episode's submit and a later episode's test would be served."""
    plant, look = IPC_OBJECTS[kind]
    header = "import ctypes\nKEY = 0x5eed\ndef f():\n    libc = ctypes.CDLL(None, use_errno=True)\n"
    planted = header + f"    return {plant} >= 0, ctypes.get_errno()\n"
    looked = header + f"    return {look}, ctypes.get_errno()\n"
    with Sandbox(workers=1, timeout_s=2.0, strict=True) as box:
        assert box.run(planted, "f", [Case((), (True, 0))]).passed
        assert box.run(looked, "f", [Case((), (-1, 2))]).passed  # ENOENT: the next run finds nothing


def test_host_sockets_are_unreachable(sandbox):
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "host.sock")
    abstract = f"\0agentrl-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as by_path, socket.socket(socket.AF_UNIX) as by_name:
        by_path.bind(path)
        by_path.listen()
        by_name.bind(abstract)
        by_name.listen()
        source = ("import socket\ndef f(address):\n    with socket.socket(socket.AF_UNIX) as client:\n"
                  "        client.connect(address)\n    return 'connected'\n")
        result = sandbox.run(source, "f", [Case((path,), "connected"), Case((abstract,), "connected")])
    shutil.rmtree(folder)
    assert [r.got.split("(")[0] for r in result.results] == ["FileNotFoundError", "ConnectionRefusedError"]


def test_threads_are_limited_per_run_not_per_user(sandbox):
    bomb = ("import threading, time\ndef f():\n    started = 0\n    try:\n        for _ in range(200):\n"
            "            threading.Thread(target=time.sleep, args=(0.5,), daemon=True).start()\n"
            "            started += 1\n    except RuntimeError:\n        pass\n    return started\n")
    few = ("import threading\ndef f():\n    threads = [threading.Thread(target=sum, args=([1],)) for _ in range(8)]\n"
           "    [t.start() for t in threads]\n    [t.join() for t in threads]\n    return len(threads)\n")
    outcome = {}
    hostile = threading.Thread(target=lambda: outcome.update(bomb=sandbox.run(bomb, "f", CALL)))
    hostile.start()
    time.sleep(0.1)
    assert sandbox.run(few, "f", [Case((), 8)]).passed  # while the bomb holds its threads
    hostile.join()
    assert 0 < int(outcome["bomb"].results[0].got) < 16


def test_memory_is_limited_per_run_across_threads():
    source = ("import threading\nheld = []\ndef grab():\n    try:\n        held.append(bytearray(100 << 20))\n"
              "    except MemoryError:\n        held.append(None)\n"
              "def f():\n    threads = [threading.Thread(target=grab) for _ in range(4)]\n"
              "    [t.start() for t in threads]\n    [t.join() for t in threads]\n"
              "    return sum(block is not None for block in held)\n")
    # A roomy clock: the memory limit must be the one that trips, also on a cold VM where touching it takes 1 s.
    with Sandbox(workers=1, timeout_s=20.0, memory_mb=256, cpu_s=20, strict=True) as roomy:
        result = roomy.run(source, "f", [Case((), 4)])
    assert result.status == "ok" and not result.passed and int(result.results[0].got) <= 2, result


def test_strict_sandbox_refuses_a_missing_layer_and_says_which(monkeypatch):
    monkeypatch.setattr(view, "bwrap_binary", lambda: (None, "bubblewrap is not installed (test)"))
    with pytest.raises(SandboxUnavailableError, match=r"view .*bubblewrap is not installed \(test\)"):
        Sandbox(workers=1, strict=True)
    with pytest.warns(RuntimeWarning, match="running untrusted code without"):
        box = Sandbox(workers=1)
    with box:
        assert set(box.missing_layers) >= {"view"}
        assert box.run("def f():\n    return 1\n", "f", [Case((), 1)]).passed


def test_missing_seccomp_is_reported(monkeypatch):
    monkeypatch.setattr(view, "seccomp_module", lambda: None)
    with pytest.raises(SandboxUnavailableError, match="seccomp"):
        Sandbox(workers=1, strict=True)


PROBE = ("import os, sys\ndef f():\n    import xml.dom.minidom, json\n    open('/tmp/probe', 'w').write('x')\n"
         "    try:\n        os.fork()\n    except OSError as exc:\n        fork = type(exc).__name__\n"
         "    return [os.getuid(), os.getgid(), os.getpid(), sorted(os.listdir('/')), os.listdir('/tmp'), fork,"
         " [p for p in sys.path if 'site-packages' in p and os.listdir(p)]]\n")
PROBE_SCRIPT = f"""
from bugfix_gym.sandbox import Sandbox, TestCase
with Sandbox(workers=1, strict=True) as box:
    print(box.run({PROBE!r}, "f", [TestCase((), None)]).results[0].got)
"""


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/unshare").exists(), reason="needs root and unshare")
def test_same_behaviour_as_root_and_as_a_normal_user():
    """As root, and as uid 1000 (a user namespace: the pool takes its non-root path), candidates see the same."""
    root = subprocess.run([sys.executable, "-c", PROBE_SCRIPT], capture_output=True, text=True, check=True)
    user = subprocess.run(["unshare", "--user", "--map-user=1000", "--map-group=1000", sys.executable, "-c",
                           PROBE_SCRIPT], capture_output=True, text=True, check=True)
    assert root.stdout == user.stdout
    assert "[65534, 65534, 2, " in root.stdout and "['probe'], 'PermissionError', []]" in root.stdout


def test_a_waiting_caller_gets_an_answer_within_its_deadline():
    with Sandbox(workers=1, timeout_s=1.0, acquire_timeout_s=0.3) as box:
        hostile = threading.Thread(target=box.run, args=("def f():\n    while True:\n        pass\n", "f", CALL))
        hostile.start()
        time.sleep(0.1)
        factor = stretch()
        start = time.monotonic()
        result = box.run("def f():\n    return None\n", "f", CALL)
        waited = time.monotonic() - start
        hostile.join()
        assert result.status == "unavailable" and result.transient and 0.25 < waited < 0.6 * max(factor, stretch())
        assert box.run("def f():\n    return None\n", "f", CALL).passed


def test_callers_are_served_in_arrival_order():
    with Sandbox(workers=1, timeout_s=2.0) as box:
        order = []
        holder = threading.Thread(target=box.run, args=("import time\ndef f():\n    time.sleep(0.4)\n", "f", CALL))
        holder.start()
        time.sleep(0.1)
        callers = []
        for index in range(4):
            caller = threading.Thread(target=lambda i=index: (box.run("def f():\n    return None\n", "f", CALL),
                                                              order.append(i)))
            caller.start()
            callers.append(caller)
            time.sleep(0.03)
        for thread in [holder, *callers]:
            thread.join()
        assert order == [0, 1, 2, 3]


def test_transient_results_are_not_cached_by_the_gym():
    from bugfix_gym.env import BugFixGym

    sleeper = "import time\ndef f():\n    time.sleep(5)\n"
    looper = "def f():\n    while True:\n        pass\n"
    gym = BugFixGym(timeout_s=0.3, workers=1)
    try:
        first, second = gym.run_tests(sleeper, "f", CALL), gym.run_tests(sleeper, "f", CALL)
        assert first.status == second.status == "timeout" and first.transient and first is not second
    finally:
        gym.close()
    gym = BugFixGym(timeout_s=1.0, workers=1)  # a clock long enough that a loop uses most of it on a loaded machine
    try:
        first, second = gym.run_tests(looper, "f", CALL), gym.run_tests(looper, "f", CALL)
        assert first.status == "timeout" and not first.transient and first is second
    finally:
        gym.close()


def test_a_busy_sandbox_never_fails_a_correct_fix():
    """More concurrent verdicts than workers, behind a candidate that holds the one worker for its whole clock:
    each waits, is retried, and scores the correct clamp 1.0."""
    from bugfix_gym.env import BugFixGym, Submission
    from bugfix_gym.verifiers import hidden_tests

    gym = BugFixGym(timeout_s=1.0, workers=1, sandbox_wait_s=0.4)
    family = gym.family("clamp")
    rewards: list[float] = []
    try:
        holder = threading.Thread(target=gym.run_tests, args=("def f():\n    while True:\n        pass\n", "f", CALL))
        holder.start()
        time.sleep(0.1)
        callers = [threading.Thread(target=lambda: rewards.append(hidden_tests(Submission(family, family.fixed, True,
                                                                                          gym.run_tests)).reward))
                   for _ in range(6)]
        for thread in callers:
            thread.start()
        for thread in [holder, *callers]:
            thread.join()
    finally:
        gym.close()
    assert rewards == [1.0] * 6


def test_a_sandbox_busy_in_every_attempt_is_an_environment_error_not_a_verdict():
    from agentrl_plugins.errors import AgentRLError

    from bugfix_gym.env import SANDBOX_ATTEMPTS, BugFixGym, SandboxBusyError

    gym = BugFixGym(timeout_s=3.0, workers=1, sandbox_wait_s=0.2)
    try:
        holder = threading.Thread(target=gym.run_tests, args=("import time\ndef f():\n    time.sleep(2)\n", "f", CALL))
        holder.start()
        time.sleep(0.1)
        with pytest.raises(SandboxBusyError, match=f"in {SANDBOX_ATTEMPTS} attempts .*no verdict") as raised:
            gym.run_tests("def f():\n    return None\n", "f", CALL)
        holder.join()
        assert isinstance(raised.value, AgentRLError)
        assert gym.run_tests("def f():\n    return None\n", "f", CALL).passed  # nothing cached from the busy call
    finally:
        gym.close()
