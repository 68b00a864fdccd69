"""``agentrl run --framework verl --environment bugfix_agent``: the BugFix gym's agent program (a plain
``openai``-client loop) plays every episode through the gateway inside verl's agent-loop workers, and verl trains
on the tokens the gateway recorded. A random TinyAgent keeps it quick (it earns no reward; ``loss.entropy_coef``
gives the update a gradient)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrl_plugins.runs.rundir import RunDir

from agentrl_verl.episodes import EPISODES_FILE, read_episodes
from agentrl_verl.recorder import VERL_METRICS_FILE

OVERRIDES = {"train.steps": 1, "train.eval_episodes_per_task": 1, "rollout.group_size": 2,
             "rollout.tasks_per_step": 2, "rollout.max_turns": 3, "loss.entropy_coef": 0.01,
             "filtering.reasons": '["timeout"]'}


def run_agent_program(tmp_path: Path, model_dir: Path, **overrides: str) -> RunDir:
    """``agentrl run --framework verl --environment bugfix_agent`` with the recipe's ``overrides``; its run folder."""
    run = RunDir(tmp_path / "run")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "AGENTRL_CACHE": str(tmp_path / "cache"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "verl", "--environment",
         "bugfix_agent", "--profile", "laptop", "--model", str(model_dir), "--out", str(run.path),
         *[arg for key, value in {**OVERRIDES, **overrides}.items() for arg in ("-o", f"{key}={value}")]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return run


def test_verl_trains_the_agent_program_through_the_gateway_and_its_later_segments_as_rows_of_their_episode(
        tmp_path, model_dir):
    """One run does both: a one-exchange window (``keep_turns=1``) makes every three-turn episode drift."""
    run = run_agent_program(tmp_path, model_dir, **{"environment.options": "{keep_turns=1}"})
    assert [row.step for row in run.read_metrics()] == [0, 1] and run.report_file.is_file()
    train = [e for e in read_episodes(run.path / EPISODES_FILE) if e.split == "train"]
    assert len(train) == 4
    for episode in train:  # the gateway's record: sampled tokens with their log-probs, observations masked out
        assert sum(episode.policy_mask) > 0 and len(episode.policy_mask) == len(episode.response_ids)
        assert all((lp != 0.0) == bool(m) for lp, m in zip(episode.logprobs, episode.policy_mask))
    # three turns, the third after the window dropped the first exchange: one later segment of one reply each
    assert [(e.termination, e.drift, e.later_trained) for e in train] == [("max_turns", 1, True)] * 4
    assert all(e.later_policy_tokens > 0 for e in train)
    verl = json.loads((run.path / VERL_METRICS_FILE).read_text().splitlines()[-1])["data"]
    lengths = [len(e.response_ids) for e in train] + [e.later_policy_tokens for e in train]
    assert verl["response_length/mean"] == pytest.approx(sum(lengths) / 8), "verl's batch: 4 episodes, 4 segments"
    assert run.read_metrics()[1].policy_tokens == sum(e.policy_tokens for e in train) > sum(
        sum(e.policy_mask) for e in train)
