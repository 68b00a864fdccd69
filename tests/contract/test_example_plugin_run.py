"""The plugin guide's example plugin, installed as a user installs it, trains through the framework of this
environment to a report with ``agentrl run`` (each framework's environment runs this file), and its event
hooks fire at the documented moments: once per ``metrics.jsonl`` row and once per training episode."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.testing import engine_overrides, fresh_environment

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "agentrl-example-plugin"
FRAMEWORKS = [entry.record.name for entry in get_plugin_manager().registry("adapter")
              if entry.distribution.startswith("agentrl-")]
STEPS = 1


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_example_plugin_trains_to_a_report_and_its_hooks_fire(framework, tmp_path):
    python = fresh_environment(tmp_path / "env", EXAMPLE)
    events = tmp_path / "events.jsonl"
    done = subprocess.run([str(python), "-m", "agentrl_plugins", "run", "arithmetic_median", "--framework", framework,
                           "--steps", str(STEPS), "--out", str(tmp_path / "run"),
                           *[part for item in engine_overrides() for part in ("-o", item)]], cwd=tmp_path,
                          env={**os.environ, "AGENTRL_EXAMPLE_EVENTS": str(events)},
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    run = RunDir(tmp_path / "run")
    recipe = run.load_recipe()
    assert recipe.environment.name == "arithmetic" and recipe.environment.options == {}
    assert [row.step for row in run.read_metrics()] == list(range(STEPS + 1))
    assert "Held-out pass@1" in run.report_file.read_text()
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert [line["step"] for line in lines if line["event"] == "step"] == list(range(STEPS + 1))
    training = [line for line in lines if line["event"] == "episode" and line["split"] == "train"]
    assert len(training) == STEPS * recipe.rollout.tasks_per_step * recipe.rollout.group_size
