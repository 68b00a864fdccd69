"""``kill -9`` of ``agentrl run --framework openrlhf`` while OpenRLHF's Ray cluster runs: no process of the run
(the driver, Ray's daemons, the trainer and rollout actors) outlives it by more than seconds."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agentrl_plugins.testing import killed_run_leftovers

from agentrl_openrlhf.cpu import BACKEND_ENV


def test_a_kill_9_of_agentrl_run_leaves_no_process_of_the_run(tmp_path, model, tokenizer):
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    env = {**os.environ, BACKEND_ENV: "cpu", "OMP_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "openrlhf",
               "--profile", "laptop", "--model", str(tmp_path / "model"), "--out", str(tmp_path / "run"),
               "-o", "train.steps=1"]
    left = killed_run_leftovers(command, env, started="ray::")
    assert left == {}, f"{len(left)} processes of the killed run kept running: {sorted(left.values())}"
