"""Two data-parallel trainer ranks on a two-node Ray cluster, as a user who outgrows one machine runs OpenRLHF: the
cluster is already running (``ray start --head``, then ``ray start --address`` on this machine: two trainer or
rollout slots each, Ray choosing which node each rank lands on; token authentication on, as ``ray start`` turns it
on wherever a token exists) and ``RAY_ADDRESS`` names it; ``agentrl run --ranks 2 --nodes 2`` joins it, and the
runtime-env hook carries the CPU backend's variables to the cluster's processes, which do not inherit the
launching shell's. The run must train on two ranks (DeepSpeed writes one ZeRO optimizer shard per rank) and write
the report. That the two ranks compute the one-rank numbers is the parity's to show (``test_parity.py``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.testing import local_ray_cluster

from agentrl_openrlhf.cpu import BACKEND_ENV
from agentrl_openrlhf.recorder import STEPS_FILE

OVERRIDES = {"train.steps": 2, "train.eval_every": 3, "train.eval_episodes_per_task": 1,
             "rollout.group_size": 4, "rollout.tasks_per_step": 2, "rollout.max_turns": 4,
             "filtering.compact": "false", "loss.entropy_coef": 0.01}
"""A freshly initialised TinyAgent earns no reward: the entropy bonus on unfiltered episodes gives every step a
gradient. Evaluating every third step, OpenRLHF evaluates none of the two: the adapter evaluates the last."""


def test_two_ranks_on_two_nodes_train_and_report(tmp_path, tokenizer, model):
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    run = RunDir(tmp_path / "run")
    yours = {key: value for key, value in os.environ.items() if key != "RAY_AUTH_MODE"}
    env = {**yours, BACKEND_ENV: "cpu", "OMP_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    with local_ray_cluster(nodes=2, gpus_per_node=2) as address:
        done = subprocess.run(
            [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "openrlhf", "--ranks",
             "2", "--nodes", "2", "--profile", "laptop", "--model", str(tmp_path / "model"), "--out", str(run.path),
             *[arg for key, value in OVERRIDES.items() for arg in ("-o", f"{key}={value}")]],
            cwd=tmp_path, env={**env, "RAY_ADDRESS": address}, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    port = address.rsplit(":", 1)[1]
    assert re.search(rf"Connecting to existing Ray cluster at address: [\d.]+:{port}\b", done.stderr)
    assert "uses token authentication: OpenRLHF joins it with RAY_AUTH_MODE=token" in done.stderr, \
        "the cluster `ray start` starts where a token exists, joined without RAY_AUTH_MODE set"
    info = run.run_info()
    assert (info["ranks"], info["nodes"]) == (2, 2)
    assert "RAY_OVERRIDE_RESOURCES" not in " ".join(info["command"]), "a running cluster brings its own resources"
    shards = sorted(path.name for path in run.checkpoints.rglob("*zero_pp_rank_*_optim_states.pt"))
    assert [name.split("zero_pp_rank_")[1][0] for name in shards] == ["0", "1"], shards
    rows = run.read_metrics()
    assert [row.step for row in rows] == [0, 1, 2]
    assert [row.heldout_pass1 is not None for row in rows] == [True, False, True], "the start and the last step"
    steps = [json.loads(line) for line in (run.path / STEPS_FILE).read_text().splitlines()]
    assert all(step["status"]["actor_grad_norm"] > 0 for step in steps), "both steps must have had a gradient"
    assert run.report_file.is_file()
