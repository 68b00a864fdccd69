"""The run folder's rows from the episode log and verl's metrics file: which episodes make which step's figures."""

from __future__ import annotations

import json

import pytest

from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.runs.rundir import RunDir

from agentrl_verl.episodes import EpisodeRecord, append_episode, read_episodes, truncate_episodes
from agentrl_verl.recorder import EPISODES_FILE, VERL_METRICS_FILE, record_run


def episode(split: str, version: int, reward: float, filtered: bool = False, hacked: bool = False) -> EpisodeRecord:
    return EpisodeRecord(split, version, "t", "submitted", reward, reward == 1.0, hacked, filtered, [1, 2], [3, 4, 5],
                         [1, 0, 1], [-0.1, 0.0, -0.2])


@pytest.fixture()
def run(tmp_path):
    run = RunDir(tmp_path / "run")
    run.create(load_recipe("deepswe_grpopp", {"train.steps": 2}, "laptop"), "verl")
    for record in (episode("held_out", 0, 0.0), episode("held_out", 0, 1.0),
                   episode("train", 0, 1.0), episode("train", 0, 0.0, filtered=True),
                   episode("train", 1, 0.0, hacked=True), episode("train", 1, 1.0),
                   episode("held_out", 2, 1.0)):
        append_episode(run.path / EPISODES_FILE, record)
    (run.path / VERL_METRICS_FILE).write_text("".join(json.dumps(line) + "\n" for line in (
        {"step": 0, "data": {"val-core/x": 0.5}},
        {"step": 1, "data": {"actor/pg_clipfrac": 0.25, "actor/entropy": 2.0, "timing_s/step": 3.0}},
        {"step": 2, "data": {"actor/pg_clipfrac": 0.5, "actor/entropy": float("nan"), "timing_s/step": 4.0}})))
    return run


def test_training_episodes_count_for_the_step_after_their_weights_and_evaluations_for_theirs(run):
    assert record_run(run).is_file()
    rows = {row.step: row for row in run.read_metrics()}
    assert sorted(rows) == [0, 1, 2]
    assert rows[0].heldout_pass1 == 0.5 and rows[0].train_reward is None
    assert (rows[1].train_reward, rows[1].filtered_fraction, rows[1].policy_tokens) == (0.5, 0.5, 2)
    assert (rows[1].clip_fraction, rows[1].entropy, rows[1].seconds, rows[1].heldout_pass1) == (0.25, 2.0, 3.0, None)
    assert (rows[2].hacked_fraction, rows[2].heldout_pass1, rows[2].entropy) == (0.5, 1.0, None)


def test_a_resume_drops_what_runs_again(run):
    truncate_episodes(run.path / EPISODES_FILE, 1)
    assert [(e.split, e.weights_version) for e in read_episodes(run.path / EPISODES_FILE)] == [
        ("held_out", 0), ("held_out", 0), ("train", 0), ("train", 0)]
