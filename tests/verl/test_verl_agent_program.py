"""``agentrl run --framework verl --environment bugfix_agent``: the BugFix gym's agent program (a plain
``openai``-client loop) plays every episode through the gateway inside verl's agent-loop workers, and verl trains
on the tokens the gateway recorded. A random TinyAgent keeps it quick (it earns no reward; ``loss.entropy_coef``
gives the update a gradient)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentrl_plugins.runs.rundir import RunDir

from agentrl_verl.episodes import EPISODES_FILE, read_episodes

OVERRIDES = {"train.steps": 1, "train.eval_episodes_per_task": 1, "rollout.group_size": 2,
             "rollout.tasks_per_step": 2, "rollout.max_turns": 3, "loss.entropy_coef": 0.01,
             "filtering.reasons": '["timeout"]'}


def test_verl_trains_the_agent_program_through_the_gateway(tmp_path, model_dir):
    run = RunDir(tmp_path / "run")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "AGENTRL_CACHE": str(tmp_path / "cache"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "verl", "--environment",
         "bugfix_agent", "--profile", "laptop", "--model", str(model_dir), "--out", str(run.path),
         *[arg for key, value in OVERRIDES.items() for arg in ("-o", f"{key}={value}")]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert [row.step for row in run.read_metrics()] == [0, 1] and run.report_file.is_file()
    episodes = read_episodes(run.path / EPISODES_FILE)
    train = [e for e in episodes if e.split == "train"]
    assert len(train) == 4 and all(e.termination in ("max_turns", "max_context") for e in train), \
        [e.termination for e in train]
    for episode in train:  # the gateway's record: sampled tokens with their log-probs, observations masked out
        assert sum(episode.policy_mask) > 0 and len(episode.policy_mask) == len(episode.response_ids)
        assert all((lp != 0.0) == bool(m) for lp, m in zip(episode.logprobs, episode.policy_mask))
    assert run.read_metrics()[1].policy_tokens > 0
