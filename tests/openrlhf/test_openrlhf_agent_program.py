"""``agentrl run --framework openrlhf --environment bugfix_agent``: the BugFix gym's agent program (a plain
``openai``-client loop) plays every episode through the gateway inside OpenRLHF's agent executor, and OpenRLHF
trains on the tokens the gateway recorded: every figure of every step equals the built-in environment's run.
That also holds OpenRLHF to the recipe's seed: its trainer actor's prompt order comes from the seed the
runtime-env hook gives every worker (OpenRLHF leaves that process unseeded). A random TinyAgent keeps it quick
(it earns no reward; ``loss.entropy_coef`` gives the update a gradient)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from agentrl_plugins.algorithms.mismatch import MISMATCH_FIGURES
from agentrl_plugins.runs.metrics import without_timing
from agentrl_plugins.runs.rundir import RunDir

from agentrl_openrlhf.cpu import BACKEND_ENV
from agentrl_openrlhf.recorder import STEPS_FILE
from agentrl_tinyagent.model import build_model

NOISE = dict.fromkeys(["entropy", *MISMATCH_FIGURES])
OVERRIDES = {"train.steps": 1, "train.eval_episodes_per_task": 1, "rollout.group_size": 2,
             "rollout.tasks_per_step": 2, "rollout.max_turns": 3, "loss.entropy_coef": 0.01,
             "filtering.reasons": '["timeout"]'}


def train(tmp_path: Path, environment: str, **overrides: str) -> RunDir:
    run = RunDir(tmp_path / (environment + "".join(overrides)))
    env = {**os.environ, BACKEND_ENV: "cpu", "OMP_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "openrlhf",
         "--environment", environment, "--profile", "laptop", "--model", str(tmp_path / "model"), "--out",
         str(run.path),
         *[arg for key, value in {**OVERRIDES, **overrides}.items() for arg in ("-o", f"{key}={value}")]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return run


def test_openrlhf_trains_the_agent_program_through_the_gateway(tmp_path, tokenizer):
    build_model(tokenizer, seed=0).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    run, built_in = train(tmp_path, "bugfix_agent"), train(tmp_path, "bugfix")
    assert [row.step for row in run.read_metrics()] == [0, 1] and run.report_file.is_file()
    for mine, theirs in zip(run.read_metrics(), built_in.read_metrics()):
        # the learner's entropy and the sampler/learner mismatch are float noise apart (about 1e-7: another
        # batch composition), the rest exact
        assert replace(without_timing(mine), **NOISE) == replace(without_timing(theirs), **NOISE)
        for name in NOISE:
            ours, reference = getattr(mine, name), getattr(theirs, name)
            assert (ours is None) == (reference is None), name
            assert ours is None or ours == pytest.approx(reference, rel=1e-5, abs=1e-5), name
    (step,) = [json.loads(line) for line in (run.path / STEPS_FILE).read_text().splitlines()]
    assert step["episodes"] == 4 and step["policy_tokens"] > 0
    assert step["status"]["termination_error"] == 0.0, "every agent program reached the model and returned"
    assert step["status"]["termination_max_turns"] + step["status"]["termination_max_context"] == 1.0


def test_openrlhf_trains_each_later_segment_as_a_row_of_the_step(tmp_path, tokenizer):
    """A one-exchange window (``keep_turns=1``) makes every three-turn episode drift: its later segment is a row of
    OpenRLHF's step (its own rollout stats count it, its actor logs the rows that are segments), the run's episode
    figures still count the episodes, and its policy tokens every row's."""
    build_model(tokenizer, seed=0).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    run = train(tmp_path, "bugfix_agent", **{"environment.options": "{keep_turns=1}", "filtering.reasons": "[]"})
    (step,) = [json.loads(line) for line in (run.path / STEPS_FILE).read_text().splitlines()]
    row = run.read_metrics()[1]
    segments = round(row.drift_per_episode * step["episodes"])
    assert step["episodes"] == 4 and segments > 0
    assert step["status"]["rollout/num_samples"] == 4 + segments, "OpenRLHF's step holds every segment as a row"
    assert step["status"]["segment"] == pytest.approx(segments / (4 + segments)), "and trains on them"
    assert step["status"]["actor_grad_norm"] > 0 and row.policy_tokens == step["policy_tokens"]
