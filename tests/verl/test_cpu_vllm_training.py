"""Two real verl training steps on verl's own vLLM rollout on vLLM's CPU build (``rollout.engine = "vllm"``), run as
the printed commands: verl's ``vLLMHttpServer`` and its agent loop sample the episodes, verl's bucketed weight
transfer syncs them each step into the CPU build through vLLM's in-place reload.

The proof that the engine serves the trained weights comes from the episodes it sampled: the log-probs it recorded
for step 2's episodes are the policy's after step 1 (from verl's own checkpoint), to bfloat16's precision (vLLM
serves in verl's rollout dtype, bfloat16; the learner trains in float32), and farther from the starting policy's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from statistics import mean

import pytest
from conftest import model_logprobs
from test_cpu_training import policy

from agentrl_plugins.runs.rundir import RunDir

from agentrl_tinyagent.model import TINYAGENT_SIZE, build_model
from agentrl_verl.cpu.overrides import VLLM_ON_CPU
from agentrl_verl.episodes import EPISODES_FILE, read_episodes
from agentrl_verl.recorder import verl_metrics

pytest.importorskip("vllm")
OVERRIDES = {"rollout.engine": "vllm", "train.steps": 2, "train.eval_every": 1, "train.eval_episodes_per_task": 1,
             "rollout.group_size": 4, "rollout.tasks_per_step": 2, "filtering.compact": "false",
             "loss.entropy_coef": 0.05, "optim.lr": 1e-2}
"""A checkpoint every step (the policy after step 1 is read from it); an entropy bonus gives a fresh TinyAgent a
gradient, and a large step makes the policy move well past bfloat16's rounding, so the served weights' version
shows in the log-probs."""


def test_two_real_verl_steps_on_verls_own_vllm_rollout_on_vllms_cpu_build(tmp_path, tokenizer):
    model_dir = tmp_path / "model"
    build_model(tokenizer, seed=0, size=TINYAGENT_SIZE).save_pretrained(model_dir)  # vLLM's CPU attention: head 32
    tokenizer.save_pretrained(model_dir)
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    dry = subprocess.run(
        [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "verl", "--profile",
         "laptop", "--model", str(model_dir), "--out", str(run_dir), "--dry-run",
         *[arg for key, value in OVERRIDES.items() for arg in ("-o", f"{key}={value}")]],
        env=env, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "vLLM rollout on vLLM's CPU build" in dry.stdout
    prepare, train = [line for line in dry.stdout.splitlines() if line and not line.startswith("#")]
    assert "actor_rollout_ref.rollout.name=vllm" in train and "VLLM_CPU_KVCACHE_SPACE=" in train
    assert all(f"{key}={str(value).lower()}" in train for key, value in VLLM_ON_CPU.items())
    for line in (prepare, f"bash {run_dir / 'main_ppo.sh'}"):
        result = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, line[:300] + result.stdout[-3000:] + result.stderr[-6000:]

    rows = RunDir(run_dir).read_metrics()
    assert [row.step for row in rows] == [0, 1, 2] and rows[2].heldout_pass1 is not None
    trained = [row for row in rows if row.step > 0]
    assert all(row.policy_tokens > 0 for row in trained)
    assert all(0.9 < row.mismatch_pearson < 1 - 1e-6 and row.mismatch_gap_max > 0 for row in trained), \
        "a bfloat16 engine against a float32 learner"
    verl = verl_metrics(run_dir / "verl_metrics.jsonl")
    assert all(verl[row.step]["actor/agentrl/mismatch/tokens"] > 0 for row in trained)

    episodes = [e for e in read_episodes(run_dir / EPISODES_FILE) if e.split == "train" and e.weights_version == 1]
    start, after_one = policy(model_dir, run_dir, 0), policy(model_dir, run_dir, 1)
    gaps: dict[str, list[float]] = {"start": [], "after one step": []}
    for episode in episodes:
        for name, model in (("start", start), ("after one step", after_one)):
            recomputed = model_logprobs(model, episode.prompt_ids, episode.response_ids)
            gaps[name] += [abs(a - b) for a, b, on in zip(recomputed, episode.logprobs, episode.policy_mask) if on]
    assert episodes and mean(gaps["after one step"]) < mean(gaps["start"]) / 2, gaps.keys()
    assert max(gaps["after one step"]) < 0.2, "to bfloat16's precision"
