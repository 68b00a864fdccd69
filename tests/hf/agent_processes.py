"""Processes an agent program left behind, found by a marker on their command line (a confined program's pids are
its own namespace's, so a marker is what the test can see)."""

import os
import signal
import time
from pathlib import Path


def marked(marker: str) -> list[int]:
    """Live (not zombie) processes with ``marker`` on their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            pass
    return found


def left_running(marker: str) -> list[int]:
    """``marker``'s processes still up after a settle of up to 3 s; each is killed (the test started them)."""
    deadline = time.monotonic() + 3
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = marked(marker)
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    return alive
