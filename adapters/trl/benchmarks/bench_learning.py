"""Does it learn? The default job over several seeds: held-out pass@1 at the start and the end, seconds per step.

Each seed is a full `agentrl run deepswe_grpopp` (laptop profile, TinyAgent, CPU) in its own run folder under
--out; a seed whose folder already has a report is read back, not run again. Learning counts when the mean
end-minus-start gain exceeds the spread (max - min) of the end values across seeds.

    python adapters/trl/benchmarks/bench_learning.py [--seeds 0 1 2] [--out runs/bench-learning] [--model DIR]
        [-o key=value ...]
"""

from __future__ import annotations

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.runs.learning import benchmark_main

from agentrl_trl.adapter import TRLAdapter

if __name__ == "__main__":
    benchmark_main(__doc__, "runs/bench-learning", lambda recipe, folder, model, ranks: TRLAdapter().run(
        recipe, RunOptions(run_dir=folder.path, model=model, ranks=ranks)))
