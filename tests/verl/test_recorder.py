"""The run folder's rows, step by step, from the episode log and verl's metrics: which episodes make which step's
figures, what reaches verl's loggers and the plugins' ``agentrl_step_end``, and what a resume drops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentrl_plugins import hookimpl
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.rundir import RunDir

from agentrl_verl.episodes import EpisodeRecord, append_episode, read_episodes
from agentrl_verl.final_weights import CHECKPOINT_MARKER, latest_checkpoint_step
from agentrl_verl.recorder import ENTROPY_KEY, StepRecorder, verl_metrics


def episode(split: str, version: int, reward: float, filtered: bool = False, hacked: bool = False,
            redundant: int = 0, drift: int = 0, played: tuple[float, float] = (0.0, 0.0)) -> EpisodeRecord:
    return EpisodeRecord(split, version, "t", "submitted", reward, reward == 1.0, hacked, filtered, [1, 2], [3, 4, 5],
                         [1, 0, 1], [-0.1, 0.0, -0.2], redundant, drift, *played)


class StepHook:
    """A plugin that keeps what ``agentrl_step_end`` receives."""

    def __init__(self):
        self.calls: list[tuple[int, dict[str, Any]]] = []

    @hookimpl
    def agentrl_step_end(self, step, metrics):
        self.calls.append((step, metrics))


@pytest.fixture()
def hook():
    manager, plugin = get_plugin_manager(), StepHook()
    manager.register(plugin, "step-hook-test")
    yield plugin
    manager.unregister(plugin)


@pytest.fixture()
def recorder(tmp_path):
    run = RunDir(tmp_path / "run")
    run.create(load_recipe("deepswe_grpopp", {"train.steps": 2}, "laptop"), "verl")
    return StepRecorder.for_recipe_file(run.recipe_file)


def play(recorder: StepRecorder, *records: EpisodeRecord) -> None:
    for record in records:
        append_episode(recorder.episodes_file, record)


def test_each_step_is_recorded_when_verl_logs_it_with_its_own_episodes_and_metrics(recorder, hook):
    play(recorder, episode("held_out", 0, 0.0, played=(100.0, 103.0)),
         episode("held_out", 0, 1.0, played=(101.0, 106.0)))
    figures = recorder.record(0, {"val-core/x": 0.5})
    assert figures["agentrl/heldout_pass1"] == 0.5 and "agentrl/train_reward" not in figures
    play(recorder, episode("train", 0, 1.0, redundant=3), episode("train", 0, 0.0, filtered=True, drift=3))
    figures = recorder.record(1, {"actor/pg_clipfrac": 0.25, ENTROPY_KEY: 2.0, "timing_s/step": 3.0,
                                  "timing_s/gen": 1.0, "actor/entropy": 99.0, "text": "not a number"})
    assert (figures["agentrl/train_reward"], figures["agentrl/filtered_fraction"]) == (0.5, 0.5)
    assert (figures["agentrl/policy_tokens"], figures["agentrl/clip_fraction"]) == (2.0, 0.25)
    play(recorder, episode("train", 1, 0.0, hacked=True), episode("train", 1, 1.0), episode("held_out", 2, 1.0))
    recorder.record(2, {"actor/pg_clipfrac": 0.5, ENTROPY_KEY: float("nan"), "timing_s/step": 4.0,
                        "timing_s/testing": 5.0})

    rows = {row.step: row for row in recorder.run.read_metrics()}
    assert sorted(rows) == [0, 1, 2]
    assert rows[0].heldout_pass1 == 0.5 and rows[0].train_reward is None
    assert (rows[1].train_reward, rows[1].filtered_fraction, rows[1].policy_tokens) == (0.5, 0.5, 2)
    assert (rows[1].clip_fraction, rows[1].entropy, rows[1].seconds, rows[1].heldout_pass1) == (0.25, 2.0, 3.0, None)
    assert (rows[2].hacked_fraction, rows[2].heldout_pass1, rows[2].entropy) == (0.5, 1.0, None)
    assert [(r.seconds, r.rollout_seconds, r.eval_seconds) for r in rows.values()] == [
        (0.0, None, 6.0), (3.0, 1.0, None), (4.0, None, 5.0)], \
        "evaluation time apart from the step's seconds; verl's validation before training timed by its episodes"
    assert (rows[1].success_tokens, rows[1].failure_tokens, rows[1].redundant_per_success) == (2, 2, 3), \
        "a filtered failure counts its sampled tokens"
    assert rows[0].success_tokens is None and rows[2].redundant_per_success == 0
    assert (rows[0].drift_per_episode, rows[1].drift_per_episode, rows[2].drift_per_episode) == (None, 1.5, 0.0), \
        "an agent program's drift, over the step's training episodes"
    assert [(step, metrics) for step, metrics in hook.calls] == [(s, rows[s].to_dict()) for s in (0, 1, 2)]
    assert "text" not in verl_metrics(recorder.verl_metrics_file)[1]
    assert recorder.finish(None).is_file()


def test_a_step_without_episodes_has_no_row_and_says_so(recorder, capsys):
    assert recorder.record(1, {"actor/entropy": 1.0}) == {}
    assert "no logged episode" in capsys.readouterr().err
    assert recorder.run.read_metrics() == []


def test_a_resume_drops_what_runs_again(recorder):
    play(recorder, episode("held_out", 0, 0.0), episode("train", 0, 1.0), episode("held_out", 1, 1.0),
         episode("train", 1, 0.0), episode("held_out", 2, 0.0))
    for step in (0, 1, 2):
        recorder.record(step, {ENTROPY_KEY: float(step)})
    recorder.resume_from(1)
    assert [(e.split, e.weights_version) for e in read_episodes(recorder.episodes_file)] == [
        ("held_out", 0), ("train", 0)]
    assert [row.step for row in recorder.run.read_metrics()] == [0]
    assert sorted(verl_metrics(recorder.verl_metrics_file)) == [0, 1]
    play(recorder, episode("held_out", 1, 1.0))
    recorder.record(1, {"val-core/x": 1.0})
    row = recorder.run.read_metrics()[-1]
    assert (row.step, row.train_reward, row.heldout_pass1, row.entropy) == (1, 1.0, 1.0, 1.0)


def tear_last_line(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[:-len(text.splitlines()[-1]) // 2])


def test_a_kill_during_any_append_leaves_logs_a_resume_reads(recorder):
    play(recorder, episode("held_out", 0, 0.0), episode("train", 0, 1.0), episode("held_out", 1, 1.0))
    for step in (0, 1):
        recorder.record(step, {ENTROPY_KEY: float(step)})
    for log in (recorder.episodes_file, recorder.verl_metrics_file, recorder.run.metrics_file):
        tear_last_line(log)  # what a kill during each append leaves
    recorder.resume_from(1)
    assert [(e.split, e.weights_version) for e in read_episodes(recorder.episodes_file)] == [
        ("held_out", 0), ("train", 0)]
    assert sorted(verl_metrics(recorder.verl_metrics_file)) == [0]
    assert [row.step for row in recorder.run.read_metrics()] == [0]
    for log in (recorder.episodes_file, recorder.verl_metrics_file, recorder.run.metrics_file):
        assert log.read_text().endswith("\n") and not log.with_name(log.name + ".partial").exists()


def test_a_torn_checkpoint_marker_resumes_from_the_newest_checkpoint_folder(tmp_path, capsys):
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    for step in (1, 2):
        (tmp_path / f"global_step_{step}" / "actor").mkdir(parents=True)
    marker = tmp_path / CHECKPOINT_MARKER
    marker.write_text("2")
    assert latest_checkpoint_step(tmp_path) == 2
    marker.write_text("")  # verl truncates the marker, then writes the step: a kill in between
    with pytest.raises(ValueError):
        find_latest_ckpt_path(str(tmp_path))
    assert latest_checkpoint_step(tmp_path) == 2
    assert "torn" in capsys.readouterr().err
    assert find_latest_ckpt_path(str(tmp_path)) == str(tmp_path / "global_step_2")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / CHECKPOINT_MARKER).write_text("")
    with pytest.raises(AgentRLError, match="reads '' and there is no checkpoint folder"):
        latest_checkpoint_step(empty)


def test_a_recipe_file_outside_a_run_folder_is_a_clear_error(tmp_path):
    (tmp_path / "recipe.toml").write_text("")
    with pytest.raises(Exception, match="agentrl verl prepare"):
        StepRecorder.for_recipe_file(tmp_path / "recipe.toml")
