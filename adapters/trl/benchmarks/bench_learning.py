"""Does it learn? The default job over several seeds: held-out pass@1 at the start and the end, seconds per step.

Each seed is a full `agentrl run deepswe_grpopp` (laptop profile, TinyAgent, CPU) in its own run folder under
--out. Learning counts when the mean end-minus-start gain exceeds the spread (max - min) of the end values
across seeds.

    python adapters/trl/benchmarks/bench_learning.py [--seeds 0 1 2] [--out runs/bench-learning] [-o key=value ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from agentrl_plugins.adapter import RunOptions
from agentrl_plugins.recipe import load_recipe, parse_overrides
from agentrl_plugins.runs.rundir import RunDir
from agentrl_trl.runner import run


def one_seed(seed: int, out: Path, overrides: dict) -> dict:
    folder = out / f"seed{seed}"
    if not (folder / "final").is_dir():
        recipe = load_recipe("deepswe_grpopp", {**overrides, "train.seed": seed}, "laptop")
        run(recipe, RunOptions(run_dir=folder))
    rows = RunDir(folder).read_metrics()
    evaluated = [r for r in rows if r.heldout_pass1 is not None]
    trained = [r for r in rows if r.step > 0]
    return {"seed": seed, "start": evaluated[0].heldout_pass1, "end": evaluated[-1].heldout_pass1,
            "seconds_per_step": statistics.mean(r.seconds for r in trained), "steps": len(trained)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-learning"))
    parser.add_argument("-o", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    results = []
    for seed in args.seeds:
        print(f"seed {seed}", file=sys.stderr, flush=True)
        results.append(one_seed(seed, args.out, parse_overrides(args.overrides)))
    starts, ends = [r["start"] for r in results], [r["end"] for r in results]
    gain = statistics.mean(ends) - statistics.mean(starts)
    spread = max(ends) - min(ends)
    summary = {"seeds": results, "start_mean": statistics.mean(starts), "end_mean": statistics.mean(ends),
               "end_spread": spread, "gain": gain, "learns": gain > spread,
               "seconds_per_step": statistics.mean(r["seconds_per_step"] for r in results)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{'seed':>6}{'start':>8}{'end':>8}{'s/step':>9}")
    for r in results:
        print(f"{r['seed']:>6}{r['start']:>8.3f}{r['end']:>8.3f}{r['seconds_per_step']:>9.2f}")
    print(f"held-out pass@1: start {summary['start_mean']:.3f}, end {summary['end_mean']:.3f} "
          f"(spread across seeds {spread:.3f}); gain {gain:+.3f} -> {'learns' if summary['learns'] else 'no clear gain'}")
    print(f"seconds per step: {summary['seconds_per_step']:.2f}")


if __name__ == "__main__":
    main()
