"""The reaper a framework's command runs under: its whole process tree ends with ``agentrl run``, daemonised
grandchildren included, whether the command ends, is signalled or its parent is killed with ``kill -9``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

from agentrl_plugins.runs.reaper import fate_shared


def marked(marker: str) -> list[int]:
    """Live processes with ``marker`` on their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            pass
    return found


def settled(marker: str, within_s: float = 10.0) -> list[int]:
    """``marker``'s processes still alive ``within_s`` from now (killed then: the test started them)."""
    deadline = time.monotonic() + within_s
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = marked(marker)
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    return alive


def tree(marker: str, status: int = 0, linger: bool = False) -> list[str]:
    """A command that starts a daemon (a double fork into a session of its own, as Ray's daemons detach) and a
    plain child, both sleeping with ``marker`` on their command line; then exits with ``status``, or sleeps on
    (``linger``)."""
    sleeper = f"import time; time.sleep(300)  # {marker}"
    script = textwrap.dedent(f"""
        import os, subprocess, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", {sleeper!r}])
            os._exit(0)
        subprocess.Popen([sys.executable, "-c", {sleeper!r}])
        print("up", flush=True)
        while {linger!r}:
            time.sleep(1)
        sys.exit({status})
    """)
    return [sys.executable, "-c", script]


def wait_for(marker: str, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(marked(marker)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(marked(marker)) >= count, "the command's processes did not start"


def test_what_the_command_leaves_running_is_killed_and_its_status_kept():
    marker = f"agentrl-reaper-{uuid.uuid4().hex}"
    done = subprocess.run(fate_shared(tree(marker, status=3)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and done.stdout == "up\n"
    assert settled(marker, within_s=1.0) == [], "the daemonised grandchild outlived the command"


def test_a_kill_9_of_agentrl_run_ends_the_whole_tree_within_seconds():
    marker = f"agentrl-reaper-{uuid.uuid4().hex}"
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys
        from agentrl_plugins.runs.reaper import fate_shared
        sys.exit(subprocess.run(fate_shared({tree(marker, linger=True)!r})).returncode)
    """)])
    try:
        wait_for(marker, 3)  # the command, the daemon and the child
        parent.kill()
        parent.wait()
        assert settled(marker) == [], "the run's processes outlived a kill -9 of agentrl run"
    finally:
        parent.kill()


def test_sigterm_reaches_the_command_and_the_tree_goes_with_it():
    marker = f"agentrl-reaper-{uuid.uuid4().hex}"
    reaper = subprocess.Popen(fate_shared(tree(marker, linger=True)), stdout=subprocess.PIPE, text=True)
    assert reaper.stdout is not None and reaper.stdout.readline() == "up\n"
    reaper.send_signal(signal.SIGTERM)
    assert reaper.wait(timeout=30) == 128 + signal.SIGTERM
    assert settled(marker, within_s=1.0) == []
