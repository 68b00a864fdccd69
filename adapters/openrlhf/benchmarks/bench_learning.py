"""Does OpenRLHF learn on a CPU? ``deepswe_grpopp`` through the real ``train_ppo_ray``: held-out pass@1, s/step.

Each seed is a full ``agentrl run deepswe_grpopp --framework openrlhf`` on the CPU backend (laptop profile, the
cached TinyAgent warm start the TRL run also starts from) in its own run folder under --out; a seed whose folder
already has a report is read back, not run again. Same recipe, profile and seeds as
adapters/trl/benchmarks/bench_learning.py, so the summaries compare side by side.

    python adapters/openrlhf/benchmarks/bench_learning.py [--seeds 0 1 2] [--out runs/bench-learning-openrlhf]
        [--model DIR] [--ranks N] [-o key=value ...]
"""

from __future__ import annotations

import os

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.runs.learning import benchmark_main

from agentrl_openrlhf.adapter import OpenRLHFAdapter
from agentrl_openrlhf.cpu import BACKEND_ENV

if __name__ == "__main__":
    os.environ[BACKEND_ENV] = "cpu"
    benchmark_main(__doc__, "runs/bench-learning-openrlhf", lambda recipe, folder, model, ranks:
                   OpenRLHFAdapter().run(recipe, RunOptions(run_dir=folder.path, model=model, ranks=ranks)))
