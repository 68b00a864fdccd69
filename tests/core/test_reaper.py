"""The reaper a framework's command runs under: its whole process tree ends with ``agentrl run``, daemonised
grandchildren included, whether the command ends, is signalled or its parent is killed with ``kill -9``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from agentrl_plugins.runs.reaper import fate_shared
from agentrl_plugins.testing import marked_processes, new_process_marker, settled_leftovers


def marked_env(marker: str) -> dict[str, str]:
    """This environment with ``marker`` set: every process of a command started with it carries it."""
    name, value = marker.split("=")
    return {**os.environ, name: value}


def tree(status: int = 0, linger: bool = False) -> list[str]:
    """A command that starts a daemon (a double fork into a session of its own, as Ray's daemons detach) and a
    plain child, both sleeping; then exits with ``status``, or sleeps on (``linger``)."""
    sleeper = "import time; time.sleep(300)"
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
    while len(marked_processes(marker)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(marked_processes(marker)) >= count, "the command's processes did not start"


def test_what_the_command_leaves_running_is_killed_and_its_status_kept():
    marker = new_process_marker()
    done = subprocess.run(fate_shared(tree(status=3)), capture_output=True, text=True, timeout=60,
                          env=marked_env(marker))
    assert done.returncode == 3 and done.stdout == "up\n"
    assert settled_leftovers(marker, 1.0) == {}, "the daemonised grandchild outlived the command"


def test_a_kill_9_of_agentrl_run_ends_the_whole_tree_within_seconds():
    marker = new_process_marker()
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys
        from agentrl_plugins.runs.reaper import fate_shared
        sys.exit(subprocess.run(fate_shared({tree(linger=True)!r})).returncode)
    """)], env=marked_env(marker))
    try:
        wait_for(marker, 3)  # the command, the daemon and the child
        parent.kill()
        parent.wait()
        assert settled_leftovers(marker, 10.0) == {}, "the run's processes outlived a kill -9 of agentrl run"
    finally:
        parent.kill()


def test_sigterm_reaches_the_command_and_the_tree_goes_with_it():
    marker = new_process_marker()
    reaper = subprocess.Popen(fate_shared(tree(linger=True)), stdout=subprocess.PIPE, text=True,
                              env=marked_env(marker))
    assert reaper.stdout is not None and reaper.stdout.readline() == "up\n"
    reaper.send_signal(signal.SIGTERM)
    assert reaper.wait(timeout=30) == 128 + signal.SIGTERM
    assert settled_leftovers(marker, 1.0) == {}
