"""Two data-parallel trainer ranks on a two-node Ray cluster, as a user who outgrows one machine runs verl: the
cluster is already running (``ray start --head``, then ``ray start --address`` on this machine: one trainer slot each,
so the ranks land on different nodes; token authentication on, as ``ray start`` turns it on wherever a token
exists) and ``RAY_ADDRESS`` names it; ``agentrl verl prepare --ranks 2 --nodes 2`` writes the run and its
``main_ppo.sh`` joins the cluster. The run must train, leave a checkpoint of two FSDP shards, join them into the
final weights (float32, as trained) and write the report. That the two ranks compute the one-rank numbers is shown
twice: the parity through verl's own loss (``test_parity.py``, two ranks) and, below, the real engine's steps
against a one-rank run's on the same episodes."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch
from conftest import ONE_RANK_SETTINGS, cpu_run_env
from transformers import AutoModelForCausalLM

from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.testing import local_ray_cluster

from agentrl_verl.final_weights import joined_shards
from agentrl_verl.recorder import VERL_METRICS_FILE, verl_metrics


def test_two_ranks_on_two_nodes_train_exactly_the_one_rank_steps_when_they_sample_the_same_episodes(
        tmp_path, model_dir, one_rank_run):
    """The real engine, not an emulation: with one rollout server for both ranks (rollout tensor parallel size 2,
    a setting of the user's own command), the two ranks sample the session's one-rank run's episodes
    (``conftest.one_rank_run``), and verl's global gradient norm, loss and the next step's episodes (sampled from the
    updated weights) agree with the one-rank run's. The run turns verl's checkpoints off (``trainer.save_freq=-1``):
    the last step's is saved all the same, and said, for ``final/``."""
    run = RunDir(tmp_path / "ranks2")
    with local_ray_cluster(nodes=2, gpus_per_node=1) as address:
        env = {**cpu_run_env(tmp_path), "RAY_ADDRESS": address}
        prepare = subprocess.run(
            [sys.executable, "-m", "agentrl_plugins", "verl", "prepare", "deepswe_grpopp", "--profile", "laptop",
             "--cpu", "--ranks", "2", "--nodes", "2", "--model", str(model_dir), "--run-dir", str(run.path),
             *[arg for key, value in ONE_RANK_SETTINGS.items() for arg in ("-o", f"{key}={value}")]],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert prepare.returncode == 0, prepare.stderr[-3000:]
        done = subprocess.run(["bash", str(run.path / "main_ppo.sh"), "trainer.save_freq=-1",
                               "actor_rollout_ref.rollout.tensor_model_parallel_size=2"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    port = address.rsplit(":", 1)[1]
    assert re.search(rf"Connecting to existing Ray cluster at address: [\d.]+:{port}\b", done.stderr)
    assert "uses token authentication: verl joins it with RAY_AUTH_MODE=token" in done.stderr, \
        "the cluster `ray start` starts where a token exists, joined without RAY_AUTH_MODE set"
    assert "trainer.save_freq=-1 saves no checkpoint: agentrl saved the last step's (global_step_2" in done.stderr
    info = run.run_info()
    assert (info["ranks"], info["nodes"]) == (2, 2)
    assert [path.name for path in run.checkpoints.glob("global_step_*")] == ["global_step_2"]
    shards = sorted((run.checkpoints / "global_step_2" / "actor").glob("model_world_size_*"))
    assert [path.name for path in shards] == ["model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt"]
    assert [row.step for row in run.read_metrics()] == [0, 1, 2]
    assert run.report_file.is_file()
    joined = joined_shards(shards)
    final = AutoModelForCausalLM.from_pretrained(run.final_weights).state_dict()
    assert joined is not None and joined.keys() <= final.keys()
    assert all(final[name].dtype == torch.float32 and torch.equal(final[name], joined[name]) for name in joined), \
        "the final weights are the two ranks' shards joined, in float32 as trained"
    one, two = verl_metrics(one_rank_run.path / VERL_METRICS_FILE), verl_metrics(run.path / VERL_METRICS_FILE)
    for step in (1, 2):
        assert two[step]["actor/grad_norm"] > 0, "the entropy bonus gives every step a gradient"
        assert two[step]["response_length/mean"] == one[step]["response_length/mean"], "the same episodes"
        for key in ("actor/grad_norm", "actor/pg_loss", "actor/entropy"):
            assert two[step][key] == pytest.approx(one[step][key], rel=1e-5, abs=1e-7), (step, key)
