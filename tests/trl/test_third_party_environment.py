"""The plugin guide's example plugin, installed as a user installs it, runs ``agentrl run`` to a report in TRL."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.testing import fresh_environment

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "agentrl-example-plugin"


def test_the_example_plugin_trains_through_trl_to_a_report(tmp_path):
    python = fresh_environment(tmp_path / "env", EXAMPLE)
    done = subprocess.run([str(python), "-m", "agentrl_plugins", "run", "arithmetic_median", "--framework", "trl",
                           "--steps", "2", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = RunDir(tmp_path / "run")
    assert [row.step for row in run.read_metrics()] == [0, 1, 2]
    assert run.load_recipe().environment.name == "arithmetic" and run.load_recipe().environment.options == {}
    assert "Held-out pass@1" in run.report_file.read_text()
