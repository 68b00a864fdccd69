"""The run folder, metrics rows, evaluation summary and report, independent of any framework."""

from __future__ import annotations

import json

import pytest

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.evaluate import summarize
from agentrl_plugins.runs.figures import EpisodeCounts, episode_figures
from agentrl_plugins.runs.metrics import StepMetrics, finite
from agentrl_plugins.runs.report import write_report
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.types import Trajectory, Verdict

MANAGER = PluginManager(load_entry_points=False)


def row(step, pass1=None):
    return StepMetrics(step, 0.5, pass1, None if pass1 is None else 0.0, 0.1, 0.2, 0.0, 0.0, 1.2, 100, 1.5)


def test_run_folder_round_trip(tmp_path):
    recipe = load_recipe("deepswe_grpopp", {"train.seed": 3}, "laptop", plugin_manager=MANAGER)
    run = RunDir(tmp_path / "run")
    run.create(recipe, "trl", {"model": "tinyagent"})
    assert run.load_recipe() == recipe
    info = run.run_info()
    assert info["seed"] == 3 and info["framework"] == "trl" and "torch" in info["versions"]
    for step in range(1, 4):
        run.append_metrics(row(step, 0.25 * step if step != 2 else None))
    assert [r.step for r in run.read_metrics()] == [1, 2, 3]
    run.truncate_metrics(2)
    assert [r.step for r in run.read_metrics()] == [1, 2]
    assert set(json.loads(run.metrics_file.read_text().splitlines()[0])) >= {
        "train_reward", "heldout_pass1", "hacked_fraction", "filtered_fraction", "clip_fraction",
        "is_capped_fraction", "entropy", "policy_tokens", "seconds", "rollout_seconds", "eval_seconds"}


def test_a_fresh_run_never_merges_into_a_folder_that_holds_one(tmp_path, monkeypatch):
    recipe = load_recipe("grpo", plugin_manager=MANAGER)
    run = RunDir(tmp_path / "run")
    run.create(recipe, "trl")
    run.append_metrics(row(1, 0.5))
    before = run.run_file.read_text()
    with pytest.raises(AgentRLError, match=r"already holds a run \(run.json\): continue it with `agentrl run "
                                           r"--resume .*run`, or start the fresh run in another folder"):
        run.create(recipe, "verl")
    assert run.run_file.read_text() == before and [r.step for r in run.read_metrics()] == [1], "nothing touched"
    (tmp_path / "empty").mkdir()
    RunDir(tmp_path / "empty").create(recipe, "trl")  # an empty folder is fine
    monkeypatch.chdir(tmp_path)
    first = RunDir.default(recipe, "trl")
    first.create(recipe, "trl")
    second = RunDir.default(recipe, "trl")
    assert second.path != first.path and second.path.name.startswith(first.path.name.rsplit("-", 1)[0]), \
        "a run started in the same second gets a folder of its own"


def test_report_has_curves_and_a_table(tmp_path):
    recipe = load_recipe("grpo", plugin_manager=MANAGER)
    run, other = RunDir(tmp_path / "a"), RunDir(tmp_path / "b")
    for folder in (run, other):
        folder.create(recipe, "trl")
        folder.append_metrics(row(1, 0.2))
        folder.append_metrics(row(2, 0.4))
    report = write_report(run, {"public_tests": other}).read_text()
    assert "from 0.200 (step 1) to 0.400 (step 2)" in report
    assert "![curves](curves.png)" in report and "| 2 | 0.500 | 0.400 |" in report
    assert (run.path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "## Settings" not in report, "a TRL run records no framework command"


def test_the_report_holds_the_command_as_it_ran_and_your_settings_first(tmp_path):
    run = RunDir(tmp_path / "run")
    run.create(load_recipe("grpo", plugin_manager=MANAGER), "verl")
    run.append_metrics(row(1, 0.2))
    run.update_info(command_as_run=["python", "-m", "verl.trainer.main_ppo", "algorithm.filter_groups.enable=true"],
                    settings=[["actor.optim.lr", "0.0005", "recipe", "1e-06", "optim.lr"],
                              ["algorithm.filter_groups.enable", "True", "user", "False", "a|b"]])
    report = write_report(run).read_text()
    section = report[report.index("## Settings"):]
    assert "python -m verl.trainer.main_ppo algorithm.filter_groups.enable=true" in section
    assert "1 setting(s) you set: `algorithm.filter_groups.enable`" in section
    assert section.index("| algorithm.filter_groups.enable | True | user | False | a\\|b |") < \
        section.index("| actor.optim.lr |"), "yours first, a pipe in a cell escaped"


def test_summarize_counts_honest_passes_and_hacked():
    def trajectory(family, passed, hacked):
        verdict = Verdict(float(passed), passed, flags={"hacked": hacked})
        return Trajectory("t", [], [], [], [], [], "submitted", verdict.reward, verdict, family=family)

    result = summarize([trajectory("a", True, False), trajectory("a", False, True), trajectory("b", False, False),
                        trajectory("b", False, False)])
    assert result.pass_at_1 == 0.25 and result.hacked_fraction == 0.25
    assert result.per_family == {"a": 0.5, "b": 0.0}
    gamed = summarize([trajectory("a", True, True), trajectory("a", True, False)])
    assert gamed.pass_at_1 == 0.5 and gamed.hacked_fraction == 0.5 and gamed.per_family == {"a": 0.5}


def test_a_frameworks_missing_or_nan_figure_is_no_figure():
    assert [finite(v) for v in (None, float("nan"), float("inf"), 2, "0.5")] == [None, None, None, 2.0, 0.5]


def test_a_torn_last_row_is_left_out_and_a_bad_earlier_one_is_an_error(tmp_path):
    run = RunDir(tmp_path / "run")
    run.create(load_recipe("deepswe_grpopp", plugin_manager=MANAGER), "trl")
    for step in range(1, 4):
        run.append_metrics(row(step))
    text = run.metrics_file.read_text()
    run.metrics_file.write_text(text[:-40])  # a kill during the last append
    assert [r.step for r in run.read_metrics()] == [1, 2]
    run.truncate_metrics(5)
    assert run.metrics_file.read_text() == "".join(text.splitlines(keepends=True)[:2])
    assert [path.name for path in run.path.iterdir() if "metrics" in path.name] == ["metrics.jsonl"]
    lines = text.splitlines()
    run.metrics_file.write_text("\n".join([lines[0], lines[1][:30], lines[2]]) + "\n")
    with pytest.raises(AgentRLError, match=r"metrics.jsonl, line 2: not a JSON line"):
        run.read_metrics()
    run.metrics_file.write_text("\n".join([lines[0], '{"step": 2}', lines[2]]) + "\n")
    with pytest.raises(AgentRLError, match=r"metrics.jsonl, line 2: not a metrics row \(KeyError\('train_reward'\)\)"):
        run.read_metrics()


def test_the_final_export_replaces_final_only_when_it_completes(tmp_path):
    run = RunDir(tmp_path / "run")
    with run.exporting_final() as folder:
        (folder / "weights").write_text("first")
    assert (run.final_weights / "weights").read_text() == "first" and not run.final_staging.exists()
    with pytest.raises(RuntimeError), run.exporting_final() as folder:
        (folder / "weights").write_text("half")
        raise RuntimeError("the export stops here")
    assert (run.final_weights / "weights").read_text() == "first"  # the earlier export stays whole
    with run.exporting_final() as folder:  # the next export starts from an empty folder
        assert list(folder.iterdir()) == []
        (folder / "other").write_text("second")
    assert sorted(p.name for p in run.final_weights.iterdir()) == ["other"]


def test_episode_figures_count_an_agent_programs_drift_over_every_training_episode():
    def episode(reward: float, segments: int) -> Trajectory:
        trajectory = Trajectory("t", [1], [2, 3], [1, 1], [-0.1, -0.2], [(0, 2)], "submitted", reward,
                                Verdict(reward, reward == 1.0))
        trajectory.segments = [Trajectory("t", [4], [5], [1], [-0.3], [(0, 1)], "submitted")] * segments
        return trajectory

    figures = episode_figures([EpisodeCounts.of(episode(1.0, 2)), EpisodeCounts.of(episode(0.0, 0))])
    assert figures["drift_per_episode"] == 1.0 and figures["success_tokens"] == 2 + 2 * 1  # every segment's tokens
    assert episode_figures([])["drift_per_episode"] is None
    assert StepMetrics.from_dict({**StepMetrics(1, *[None] * 8, 0, 1.0).to_dict(), "drift_per_episode": 0.5}) \
        .drift_per_episode == 0.5
