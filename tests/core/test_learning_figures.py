"""The learning benchmarks' figures and progress lines, read from run folders as every framework writes them."""

from __future__ import annotations

import json
from types import SimpleNamespace

from agentrl_plugins.runs.learning import bench_seeds, learning_summary, seed_figures, summary_lines
from agentrl_plugins.runs.metrics import StepMetrics
from agentrl_plugins.runs.progress import record_step
from agentrl_plugins.runs.rundir import RunDir


def row(step: int, pass1: float | None, seconds: float, policy_tokens: int = 100) -> StepMetrics:
    return StepMetrics(step, None if step == 0 else 0.5, pass1, None, None, None, None, None, None,
                       0 if step == 0 else policy_tokens, seconds)


def test_record_step_appends_the_row_calls_the_hook_and_prints(tmp_path, capsys):
    run, seen = RunDir(tmp_path), []
    hooks = SimpleNamespace(agentrl_step_end=lambda step, metrics: seen.append((step, metrics["heldout_pass1"])))
    record_step(run, row(3, 0.25, 2.0), hooks)
    assert run.read_metrics() == [row(3, 0.25, 2.0)] and seen == [(3, 0.25)]
    assert capsys.readouterr().err == "step 3  train reward 0.500  held-out pass@1 0.250\n"


def test_a_step_without_a_loss_token_is_called_out(tmp_path, capsys):
    hooks = SimpleNamespace(agentrl_step_end=lambda step, metrics: None)
    record_step(RunDir(tmp_path), row(0, 0.25, 2.0), hooks)
    assert "no gradient" not in capsys.readouterr().err, "the starting evaluation trains nothing"
    record_step(RunDir(tmp_path), row(4, None, 2.0, policy_tokens=0), hooks)
    assert capsys.readouterr().err.splitlines()[1].startswith("step 4: no loss token, so no gradient")


def test_seed_figures_and_the_summary_across_seeds(tmp_path):
    runs = {seed: RunDir(tmp_path / f"seed{seed}") for seed in (0, 1)}
    for run in runs.values():
        run.path.mkdir()
    for seed, (start, end) in zip(runs, [(0.2, 0.6), (0.3, 0.5)]):
        for step, pass1, seconds in [(0, start, 9.0), (1, None, 2.0), (2, end, 4.0)]:
            runs[seed].append_metrics(row(step, pass1, seconds, policy_tokens=100 * seed))
    seeds = [seed_figures(seed, run) for seed, run in runs.items()]
    assert seeds[0] == {"seed": 0, "start": 0.2, "end": 0.6, "seconds_per_step": 3.0, "steps": 2,
                        "steps_without_gradient": 2}
    assert seeds[1]["steps_without_gradient"] == 0
    summary = learning_summary(seeds)
    assert round(summary["gain"], 6) == 0.3 and round(summary["end_spread"], 6) == 0.1 and summary["learns"]
    lines = summary_lines(summary)
    assert lines[1].split() == ["0", "0.200", "0.600", "3.00", "2"] and "gain +0.300 -> learns" in lines[-2]


def test_bench_seeds_trains_missing_seeds_and_reads_finished_ones(tmp_path):
    trained = []

    def train(recipe, run):
        trained.append((recipe.name, recipe.train.seed, recipe.rollout.max_turns))
        run.path.mkdir(parents=True)
        for step, pass1 in [(0, 0.1 * recipe.train.seed), (1, 0.5)]:
            run.append_metrics(row(step, pass1, 2.0))
        run.report_file.write_text("report")

    first = bench_seeds([1, 2], tmp_path, {"rollout.max_turns": 3}, train)
    assert trained == [("deepswe_grpopp", 1, 3), ("deepswe_grpopp", 2, 3)]
    assert bench_seeds([1, 2], tmp_path, {}, train) == first and len(trained) == 2, "finished seeds are read back"
    assert json.loads((tmp_path / "summary.json").read_text())["end_mean"] == 0.5
