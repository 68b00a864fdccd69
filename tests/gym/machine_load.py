"""How much slower than its CPU time the wall clock runs now: wall-clock bounds of the sandbox tests scale by it, so
they hold on a loaded machine (a bound from the CPU time the work takes, not from an idle machine's wall clock)."""

import time

SPIN_S = 0.05  # CPU seconds of the probe


def stretch() -> float:
    """Wall seconds per CPU second of a short busy loop in this process (1.0 on an idle machine, never below)."""
    wall, cpu = time.monotonic(), time.process_time()
    while time.process_time() - cpu < SPIN_S:
        pass
    return max(1.0, (time.monotonic() - wall) / (time.process_time() - cpu))
