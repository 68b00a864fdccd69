"""Your own Ray cluster, started as Ray's docs say (``ray start --head``), joined by OpenRLHF's command: a CPU
cluster started without ``--num-gpus`` (OpenRLHF waited for slots forever, printing the autoscaler's errors), with
token authentication on as ``ray start`` turns it on wherever a token exists, and a command prepared before
``RAY_ADDRESS`` was set. The two-node training run on a ``ray start`` cluster is in ``test_data_parallel.py``; the
cluster check itself (auth on and off) in verl's ``test_own_cluster.py``."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

from agentrl_plugins.testing import local_ray_cluster

from agentrl_openrlhf.cpu import BACKEND_ENV


def test_a_command_prepared_without_ray_address_stops_before_it_connects_to_a_cluster_without_gpu_slots(
        tmp_path, model, tokenizer):
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    env = {key: value for key, value in os.environ.items() if key not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    env.update({BACKEND_ENV: "cpu", "OMP_NUM_THREADS": "1",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    run_dir = tmp_path / "run"
    prepared = subprocess.run([sys.executable, "-m", "agentrl_plugins", "openrlhf", "prepare", "deepswe_grpopp",
                               "--run-dir", str(run_dir), "--model", str(tmp_path / "model")],
                              env=env, capture_output=True, text=True, timeout=300)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    assert "RAY_OVERRIDE_RESOURCES" in (run_dir / "train_ppo_ray.sh").read_text(), "prepared for a local cluster"
    with local_ray_cluster(nodes=1, gpus_per_node=None, token_auth=True) as address:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(["sh", str(run_dir / "train_ppo_ray.sh")], env={**env, "RAY_ADDRESS": address},
                              capture_output=True, text=True, timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode != 0
    assert "joins it with RAY_AUTH_MODE=token" in done.stderr, done.stderr[-3000:]
    assert ("OpenRLHF's CPU backend places its 1 trainer rank(s) and 1 rollout engine(s) on one each"
            in done.stderr), done.stderr[-3000:]
    assert "`ray start --head --num-gpus 2`" in done.stderr
    assert "Connecting to existing Ray cluster" not in done.stderr, "refused before the driver connects"
    assert after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime < 60
