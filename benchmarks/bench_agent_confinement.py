"""What confinement costs an agent program run as a process, in one run: a trivial program's start to end
(it reads its task and prints ``{}``: Python, Python importing ``openai`` as a harness does, a shell), confined
against run as it is, interleaved, medians.

    python benchmarks/bench_agent_confinement.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

from agentrl_plugins.agent_command import AgentCommand
from agentrl_plugins.environment import AgentLink
from agentrl_plugins.types import Task

PROGRAMS = {"python": [sys.executable, "-c", "import json, sys; json.load(sys.stdin); print('{}')"],
            "python + openai": [sys.executable, "-c", "import json, sys, openai; json.load(sys.stdin); print('{}')"],
            "sh": ["sh", "-c", "cat > /dev/null; echo '{}'"]}
LINK = AgentLink("http://127.0.0.1:9/v1", "ep-bench", "agentrl", Task("t", "f", "train", "issue"), 30.0)


def seconds(command: AgentCommand) -> float:
    started = time.perf_counter()
    assert command.run(LINK, {}) == {}
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    warnings.simplefilter("ignore")
    for name, argv in PROGRAMS.items():
        confined, plain = AgentCommand.parse(argv), AgentCommand.parse(argv, confine=False)
        seconds(confined), seconds(plain)  # the one-time check of bubblewrap, the page cache
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(runs):
            for confine, command in ((True, confined), (False, plain)):
                times[confine].append(seconds(command))
        inside, outside = statistics.median(times[True]), statistics.median(times[False])
        print(f"{name}: confined {inside * 1e3:.1f} ms, unconfined {outside * 1e3:.1f} ms, "
              f"ratio {inside / outside:.2f}x (+{(inside - outside) * 1e3:.1f} ms), median of {runs}")


if __name__ == "__main__":
    main()
