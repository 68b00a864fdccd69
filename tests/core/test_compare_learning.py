"""The learning comparison's plumbing: arms, budgets, folder names, summaries, flags and the report.

Runs here are run folders written with the figures a trainer would write; the real trainers are
exercised end to end in tests/trl/test_compare_learning.py.
"""

from __future__ import annotations

import pytest

from agentrl_plugins.compare.command import default_folder
from agentrl_plugins.compare.learning import (
    Arm,
    ArmResult,
    arm_summary,
    check_budgets,
    flags,
    mean_curves,
    plan_arms,
    train_seed,
)
from agentrl_plugins.compare.learning_report import write_learning_report
from agentrl_plugins.compare.runner import FrameworkEnv
from agentrl_plugins.errors import AgentRLError, UnknownNameError
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.metrics import StepMetrics
from agentrl_plugins.runs.rundir import RunDir


def finished_run(path, recipe, seed, heldout, reward=0.5, stalled_from=None):
    """A run folder as ``agentrl run`` leaves it: recipe, run info, a metrics row per step, a report.

    From step ``stalled_from`` on, every episode is filtered and the steps carry no loss token."""
    run = RunDir(path)
    run.create(load_recipe(recipe, {"train.seed": seed}), "trl")
    for step, value in enumerate(heldout):
        stalled = stalled_from is not None and step >= stalled_from
        run.append_metrics(StepMetrics(step, None if step == 0 else reward, value, 0.1, None if step == 0 else 0.2,
                                       1.0 if stalled else 0.0, 0.0, 0.0, 0.3, 0 if step == 0 or stalled else 100,
                                       2.0))
    run.report_file.write_text("done\n")
    return run


def arm_result(tmp_path, recipe, curves):
    runs = {seed: finished_run(tmp_path / recipe / f"seed{seed}", recipe, seed, curve)
            for seed, curve in enumerate(curves)}
    return ArmResult(Arm(recipe, "trl"), runs, arm_summary(runs))


def test_arms_are_every_recipe_on_every_framework_and_need_two():
    assert plan_arms(["deepswe_grpopp", "grpo"], ["trl"]) == [Arm("deepswe_grpopp", "trl"), Arm("grpo", "trl")]
    assert [a.folder for a in plan_arms(["grpo"], ["trl", "verl"])] == ["trl-grpo", "verl-grpo"]
    assert Arm("/recipes/ablation.toml", "trl").folder == "trl-ablation"
    with pytest.raises(AgentRLError, match="needs two arms"):
        plan_arms(["grpo"], ["trl"])
    with pytest.raises(AgentRLError, match="name each recipe once"):
        plan_arms(["grpo", "grpo"], ["trl"])
    with pytest.raises(UnknownNameError, match="Did you mean 'verl'"):
        plan_arms(["grpo"], ["trl", "vrl"])


def test_arms_must_share_the_sample_budget(tmp_path):
    arms = plan_arms(["deepswe_grpopp", "grpo"], ["trl"])
    assert check_budgets(arms, [])["rollout.group_size"] == 8
    other = tmp_path / "wide.toml"
    other.write_text('name = "wide"\ndescription = "Wider groups."\nextends = "grpo"\n[rollout]\ngroup_size = 16\n')
    with pytest.raises(AgentRLError, match=r"rollout.group_size: 8 vs 16.*-o rollout.group_size=8"):
        check_budgets([Arm("grpo", "trl"), Arm(str(other), "trl")], [], model="any-local-model")
    assert check_budgets([Arm("grpo", "trl"), Arm(str(other), "trl")], ["rollout.group_size=4"], "m")


def test_default_folders_differ_with_the_overrides():
    assert str(default_folder(["deepswe_grpopp"], [])) == "runs/compare-deepswe_grpopp"
    assert str(default_folder(["deepswe_grpopp", "grpo"], [])) == "runs/compare-deepswe_grpopp-vs-grpo"
    one, two = default_folder(["grpo"], ["loss.clip_high=0.3"]), default_folder(["grpo"], ["loss.clip_high=0.4"])
    assert one != two and one.name.startswith("compare-grpo-")


def test_a_gain_beyond_the_seed_spread_learns_and_differences_beyond_it_are_flagged(tmp_path):
    flat = arm_result(tmp_path, "grpo", [[0.2, 0.2, 0.25], [0.2, 0.25, 0.2]])
    rising = arm_result(tmp_path, "deepswe_grpopp", [[0.2, 0.3, 0.5], [0.2, 0.4, 0.55]])
    assert rising.summary["learns"] and not flat.summary["learns"]
    assert rising.summary["end_mean"] == pytest.approx(0.525) and rising.summary["end_spread"] == pytest.approx(0.05)
    assert rising.summary["train_reward"] == pytest.approx(0.5) and rising.summary["policy_tokens"] == 400
    assert rising.summary["start_heldout_hacked"] == rising.summary["end_heldout_hacked"] == pytest.approx(0.1)
    assert mean_curves(rising, "heldout_pass1") == ([0, 1, 2], pytest.approx([0.2, 0.35, 0.525]), [0.2, 0.3, 0.5],
                                                    [0.2, 0.4, 0.55])
    [flag] = flags([flat, rising])
    assert flag.difference == pytest.approx(0.3) and flag.spread == pytest.approx(0.05)
    noisy = arm_result(tmp_path / "noisy", "grpo", [[0.2, 0.2, 0.1], [0.2, 0.3, 0.6]])
    assert flags([noisy, rising]) == []


def test_the_report_shows_arms_flags_seeds_and_a_plot(tmp_path):
    flat = arm_result(tmp_path, "grpo", [[0.2, 0.2, 0.25], [0.2, 0.25, 0.2]])
    rising = arm_result(tmp_path, "deepswe_grpopp", [[0.2, 0.3, 0.5], [0.2, 0.4, 0.55]])
    report = write_learning_report([flat, rising], {"train.steps": 2}, ["train.steps=2"], tmp_path,
                                   "- **trl** computes with loss.clip_c=None: no dual clip.")
    text = report.read_text()
    assert "# Learning: grpo (trl) vs deepswe_grpopp (trl)" in text
    assert "| deepswe_grpopp (trl) | 0, 1 | 0.200 | 0.525 | 0.050 | +0.325 | yes |" in text
    assert "end pass@1 differs by +0.300" in text and "no dual clip" in text
    assert "- train.steps: 2" in text and (tmp_path / "learning.png").stat().st_size > 0
    assert "| deepswe_grpopp (trl) | 1 | 0.200 | 0.550 | 0 of 2 | 2.00 |" in text


def test_the_report_counts_the_steps_where_compact_filtering_left_no_gradient(tmp_path):
    runs = {seed: finished_run(tmp_path / f"seed{seed}", "grpo", seed, [0.3, 0.1, 0.0, 0.0], stalled_from=stall)
            for seed, stall in [(0, None), (1, 2)]}
    result = ArmResult(Arm("grpo", "openrlhf"), runs, arm_summary(runs))
    assert [s["steps_without_gradient"] for s in result.summary["seeds"]] == [0, 2]
    text = write_learning_report([result, arm_result(tmp_path, "dapo", [[0.3, 0.4], [0.3, 0.5]])], {}, [],
                                 tmp_path).read_text()
    assert "| grpo (openrlhf) | 1 | 0.300 | 0.000 | 2 of 3 | 2.00 |" in text


def test_a_finished_seed_is_read_back_not_rerun(tmp_path, capsys):
    run = finished_run(tmp_path / "seed0", "grpo", 0, [0.1, 0.2])
    train_seed(FrameworkEnv("trl", tmp_path / "no-such-python", "test"), Arm("grpo", "trl"), 0, [], run)
    assert "read back" in capsys.readouterr().err and run.read_metrics()[-1].heldout_pass1 == 0.2
