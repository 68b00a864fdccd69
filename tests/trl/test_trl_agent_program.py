"""``agentrl run`` trains an agent program (``bugfix_agent``: the BugFix gym's openai-client loop, through the
gateway) with TRL, as a user runs it, and learns exactly what the built-in episode runner's run learns."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agentrl_plugins.algorithms.mismatch import MISMATCH_FIGURES
from agentrl_plugins.runs.metrics import TIMING_NAMES

AGENTRL = Path(sys.executable).parent / "agentrl"
SMALL = ["-o", "rollout.group_size=2", "-o", "rollout.tasks_per_step=2", "-o", "train.eval_episodes_per_task=1",
         "--steps", "2"]


def run(out: Path, *extra: str) -> list[dict]:
    done = subprocess.run([str(AGENTRL), "run", "deepswe_grpopp", *SMALL, "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (out / "report.md").exists()
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_agentrl_run_trains_the_agent_program_as_the_built_in_runner_does(tmp_path):
    agent = run(tmp_path / "agent", "-o", "environment.name=bugfix_agent")
    built_in = run(tmp_path / "built_in")
    assert [row["step"] for row in agent] == [0, 1, 2]
    recipe = tomllib.loads((tmp_path / "agent" / "recipe.toml").read_text())
    assert recipe["environment"]["name"] == "bugfix_agent"
    for mine, theirs in zip(agent, built_in):
        for name, value in theirs.items():
            if name in TIMING_NAMES or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            # the mismatch figures of a near-exact sampler are float noise of how the requests were batched
            noise = 1e-5 if name in MISMATCH_FIGURES else 1e-7
            assert mine[name] == pytest.approx(value, rel=1e-5, abs=noise), (mine["step"], name)
    assert agent[-1]["policy_tokens"] > 0


def test_agentrl_run_trains_an_agent_program_whose_window_drops_its_history(tmp_path):
    rows = run(tmp_path / "window", "-o", "environment.name=bugfix_agent", "-o", "environment.options={keep_turns=1}",
               "-o", "rollout.max_turns=3")
    assert [row["step"] for row in rows] == [0, 1, 2]
    assert all(row["drift_per_episode"] > 0 for row in rows[1:]), "an episode that reaches a third turn drifts"
    assert all(row["policy_tokens"] > 0 for row in rows[1:])
