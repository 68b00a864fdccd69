"""Does verl learn on a CPU? ``deepswe_grpopp`` through the real ``main_ppo`` per seed: held-out pass@1, s/step.

Each seed is a full ``agentrl run deepswe_grpopp --framework verl`` on verl's cpu platform (laptop profile, the
cached TinyAgent warm start the TRL run also starts from, else a fresh TinyAgent, which the launcher says) in its
own run folder under --out; a seed whose folder already has a report is read back, not run again. Same recipe,
profile and seeds as adapters/trl/benchmarks/bench_learning.py, so the summaries compare side by side.

    python adapters/verl/benchmarks/bench_learning.py [--seeds 0 1 2] [--out runs/bench-learning-verl]
        [--model DIR] [--ranks N] [-o key=value ...]
"""

from __future__ import annotations

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.runs.learning import benchmark_main

from agentrl_verl.launch import launch

if __name__ == "__main__":
    benchmark_main(__doc__, "runs/bench-learning-verl", lambda recipe, folder, model, ranks: launch(
        recipe, RunOptions(run_dir=folder.path, model=model, ranks=ranks, extra={"cpu": True})))
