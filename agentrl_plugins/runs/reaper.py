"""A framework's command whose whole process tree ends with the ``agentrl run`` that started it.

verl and OpenRLHF runs are process trees: the driver, the Ray cluster it starts (GCS, raylet, agents, workers,
some of them daemonised) and the trainer and rollout actors. Killed with ``kill -9``, ``agentrl run`` cannot
stop them, and they train on headless. So the command runs under a reaper, ``python -m agentrl_plugins.runs.reaper
PID -- COMMAND...``: a child subreaper (``PR_SET_CHILD_SUBREAPER``), to which every process of the tree that
loses its parent is re-parented, so that it can always find all of them. It kills the whole tree when the process
``PID`` (``agentrl run``) is gone, and whatever the command left behind when the command ends; on SIGTERM or
SIGINT it passes the signal to the command and kills the tree ``GRACE_S`` later. It exits with the command's status
(128 + the signal's number when a signal ended it, as a shell reports). Only a ``kill -9`` of the reaper itself
is out of its reach.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.1
GRACE_S = 10.0
"""How long a signalled command has to stop before its tree is killed."""


def fate_shared(command: list[str]) -> list[str]:
    """``command`` run under the reaper, tied to this process: what an adapter runs instead of ``command``."""
    return [sys.executable, "-m", "agentrl_plugins.runs.reaper", str(os.getpid()), "--", *command]


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (from each process's parent in ``/proc``), nearest first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended while we looked
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, frontier = [], [root]
    while frontier:
        below = [child for pid in frontier for child in children.get(pid, [])]
        found += below
        frontier = below
    return found


def kill_tree(root: int, deadline_s: float = 5.0) -> None:
    """SIGKILL every process below ``root`` until none is left (reaping those re-parented to this one)."""
    deadline = time.monotonic() + deadline_s
    while (alive := descendants(root)) and time.monotonic() < deadline:
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _reap()
        time.sleep(0.02)
    _reap()


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def supervise(parent: int, command: list[str]) -> int:
    """Run ``command`` as described above; its exit status."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("agentrl: the reaper could not become a child subreaper; a killed run may leave processes",
              file=sys.stderr)
    signalled: list[float] = []

    def forward(number: int, _frame: object) -> None:
        if not signalled:
            signalled.append(time.monotonic())
            child.send_signal(number)

    child = subprocess.Popen(command)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    me = os.getpid()
    while child.poll() is None:
        if os.getppid() != parent:  # agentrl run is gone: nothing would ever stop the tree
            kill_tree(me)
            child.wait()
            return 128 + signal.SIGKILL
        if signalled and time.monotonic() - signalled[0] > GRACE_S:
            break
        time.sleep(POLL_S)
    kill_tree(me)  # what the command left running (a Ray agent), or all of it past the grace
    status = child.wait()
    return 128 - status if status < 0 else status


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: python -m agentrl_plugins.runs.reaper PARENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    return supervise(int(argv[0]), argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
