"""Your own agent program, as the plugin guide's example package ships one (``arithmetic_agent``: an
``openai``-client loop over the arithmetic tasks), installed as a user installs it and trained with
``agentrl run --environment``: it learns exactly what the example's own environment learns."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from agentrl_plugins.algorithms.mismatch import MISMATCH_FIGURES
from agentrl_plugins.runs.metrics import without_timing
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.testing import engine_overrides, fresh_environment

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "agentrl-example-plugin"


def test_the_example_agent_program_trains_as_the_examples_environment(tmp_path):
    python = fresh_environment(tmp_path / "env", EXAMPLE)
    runs = {}
    for environment in ("arithmetic_agent", "arithmetic"):
        done = subprocess.run([str(python), "-m", "agentrl_plugins", "run", "arithmetic_median", "--environment",
                               environment, "--steps", "2", "--out", str(tmp_path / environment),
                               *[part for item in engine_overrides() for part in ("-o", item)]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
        runs[environment] = RunDir(tmp_path / environment)
    assert runs["arithmetic_agent"].load_recipe().environment.name == "arithmetic_agent"
    metrics = [run.read_metrics() for run in runs.values()]
    # entropy and the sampler/learner mismatch are float noise of how the sampler batched the requests
    noise = dict.fromkeys(["entropy", *MISMATCH_FIGURES])
    rows = [[replace(without_timing(row), **noise) for row in run] for run in metrics]
    assert [row.step for row in rows[0]] == [0, 1, 2] and rows[0] == rows[1]
    assert all(abs(a.mismatch_gap_max - b.mismatch_gap_max) < 1e-4 and a.mismatch_pearson > 1 - 1e-6
               for a, b in zip(*metrics) if a.policy_tokens)
    assert rows[0][-1].policy_tokens > 0 and rows[0][-1].drift_per_episode == 0.0
