"""The sandbox's processes as /proc shows them: workers started by this test process and what runs below them."""

import os
import time
from pathlib import Path


def proc_stat(pid):
    """(ppid, pgrp) of a live process, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[2])


def _pids():
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def descendants(root):
    """Every live process below ``root``."""
    children = {}
    for pid in _pids():
        stat = proc_stat(pid)
        if stat:
            children.setdefault(stat[0], []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _is_worker_code(pid):
    """A Python process running the sandbox's worker.py (bubblewrap's own command line names it too)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"python" in os.path.basename(argv[0]) and any(arg.endswith(b"worker.py") for arg in argv)


def worker_pids():
    """The sandbox workers started by this test process: worker.py processes whose parent is not one."""
    return {pid for pid in descendants(os.getpid())
            if _is_worker_code(pid) and not _is_worker_code((proc_stat(pid) or (0, 0))[0])}


def run_processes_settle():
    """True once below every worker of this test process is only its prepared next run: its init and candidate.

    Workers are listed afresh each time: one of a sandbox another test left behind may exit meanwhile."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if all(len(descendants(worker)) == 2 for worker in worker_pids()):
            return True
        time.sleep(0.05)
    return False
