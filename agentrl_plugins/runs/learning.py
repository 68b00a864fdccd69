"""The learning benchmarks' figures, the same for every framework: per-seed start/end held-out pass@1 and s/step."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

from agentrl_plugins.recipe import load_recipe, parse_overrides
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import RunDir

BENCH_RECIPE = "deepswe_grpopp"
BENCH_PROFILE = "laptop"


def seed_figures(seed: int, run: RunDir) -> dict[str, Any]:
    """A finished run's first and last held-out pass@1, its mean seconds per training step, and how many
    steps had no loss token at all (every episode compact-filtered: no gradient)."""
    rows = run.read_metrics()
    held_out = [row.heldout_pass1 for row in rows if row.heldout_pass1 is not None]
    trained = [row for row in rows if row.step > 0]
    return {"seed": seed, "start": held_out[0], "end": held_out[-1],
            "seconds_per_step": statistics.fmean(row.seconds for row in trained), "steps": len(trained),
            "steps_without_gradient": sum(row.policy_tokens == 0 for row in trained)}


def learning_summary(seeds: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over seeds; learning counts when the mean gain exceeds the spread (max - min) of the end values."""
    starts, ends = [s["start"] for s in seeds], [s["end"] for s in seeds]
    gain = statistics.fmean(ends) - statistics.fmean(starts)
    spread = max(ends) - min(ends)
    return {"seeds": seeds, "start_mean": statistics.fmean(starts), "end_mean": statistics.fmean(ends),
            "end_spread": spread, "gain": gain, "learns": gain > spread,
            "seconds_per_step": statistics.fmean(s["seconds_per_step"] for s in seeds)}


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """A per-seed table, then the means."""
    lines = [f"{'seed':>6}{'start':>8}{'end':>8}{'s/step':>9}{'steps without gradient':>24}"]
    lines += [f"{s['seed']:>6}{s['start']:>8.3f}{s['end']:>8.3f}{s['seconds_per_step']:>9.2f}"
              f"{s['steps_without_gradient']:>24}" for s in summary["seeds"]]
    verdict = "learns" if summary["learns"] else "no clear gain"
    lines.append(f"held-out pass@1: start {summary['start_mean']:.3f}, end {summary['end_mean']:.3f} (spread across "
                 f"seeds {summary['end_spread']:.3f}); gain {summary['gain']:+.3f} -> {verdict}")
    lines.append(f"seconds per step: {summary['seconds_per_step']:.2f}")
    return lines


def bench_seeds(seeds: list[int], out: Path, overrides: dict[str, Any],
                train: Callable[[Recipe, RunDir], Any]) -> dict[str, Any]:
    """``train`` the laptop ``deepswe_grpopp`` run of each seed in ``out/seed<N>`` (a folder with a report is
    only read back), then write and return the summary (``out/summary.json``)."""
    figures = []
    for seed in seeds:
        print(f"seed {seed}", file=sys.stderr, flush=True)
        run = RunDir(out / f"seed{seed}")
        if not run.report_file.is_file():
            train(load_recipe(BENCH_RECIPE, {**overrides, "train.seed": seed}, BENCH_PROFILE), run)
        figures.append(seed_figures(seed, run))
    summary = learning_summary(figures)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def benchmark_main(doc: str, default_out: str, train: Callable[[Recipe, RunDir, str | None, int], Any]) -> None:
    """The command line every framework's learning benchmark shares: ``--seeds``, ``--out``, ``--model``,
    ``--ranks``, ``-o``; ``train(recipe, run, model, ranks)`` runs one seed. Prints the per-seed table and the
    means."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path(default_out))
    parser.add_argument("--model", help="A local model folder instead of the cached TinyAgent warm start.")
    parser.add_argument("--ranks", type=int, default=1, help="Data-parallel trainer ranks (verl, OpenRLHF).")
    parser.add_argument("-o", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    summary = bench_seeds(args.seeds, args.out, parse_overrides(args.overrides),
                          lambda recipe, run: train(recipe, run, args.model, args.ranks))
    print("\n".join(summary_lines(summary)))
