"""``kill -9`` of ``agentrl run --framework verl`` while verl's Ray cluster runs: no process of the run (the driver,
Ray's daemons, the TaskRunner and worker actors) outlives it by more than seconds."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agentrl_plugins.testing import killed_run_leftovers


def test_a_kill_9_of_agentrl_run_leaves_no_process_of_the_run(tmp_path, model_dir):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "AGENTRL_CACHE": str(tmp_path / "cache"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "verl", "--profile",
               "laptop", "--model", str(model_dir), "--out", str(tmp_path / "run"), "-o", "train.steps=1"]
    left = killed_run_leftovers(command, env, started="ray::TaskRunner")
    assert left == {}, f"{len(left)} processes of the killed run kept running: {sorted(left.values())}"
