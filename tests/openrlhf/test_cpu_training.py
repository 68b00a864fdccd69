"""A real two-step OpenRLHF 0.11.2 training on the BugFix gym, on a CPU, run as an OpenRLHF user runs it: the two
commands ``agentrl run --framework openrlhf --dry-run`` prints (``agentrl openrlhf prepare``, then OpenRLHF's own
command), in a shell, with ``--report-to tensorboard,wandb`` (W&B offline): the first verbatim, the second through the
``train_ppo_ray.sh`` the first writes (its last line is the printed command), with a flag of yours.

The unmodified ``python -m openrlhf.cli.train_ppo_ray`` runs under the CPU backend: DeepSpeed on
its CPU accelerator, the Hugging Face rollout actor in place of vLLM, weights synced over gloo,
episodes played by the shipped agent executor through the core episode runner. The estimator is
GiGPO's: each sample's label carries its episode's turns to the patched advantage step, which checks them
against the sample's action mask. TinyAgent is
random-initialised to keep it quick, so it earns no reward; ``loss.entropy_coef`` gives the
updates a gradient anyway (the weights must move for the sync check to mean anything), and
compact filtering keeps only ``max_context`` so that a random policy's episodes, whose lengths
straddle the 520-token budget after 4 turns, split between filtered (out of context) and kept
(out of turns). The trainer starts from the model in bf16 (OpenRLHF's parameter dtype).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentrl_plugins.algorithms import lr_multiplier
from agentrl_plugins.runs.metrics import logged_figures
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.testing import tensorboard_scalars, wandb_scalars

from agentrl_openrlhf.cpu import BACKEND_ENV
from agentrl_openrlhf.cpu.weights import weights_digest
from agentrl_openrlhf.recorder import STEPS_FILE
from agentrl_tinyagent.model import TINYAGENT_SIZE, build_model

OVERRIDES = {"advantage.estimator": "gigpo",
             "train.steps": 2, "train.eval_every": 1, "train.eval_episodes_per_task": 1, "rollout.group_size": 4,
             "rollout.tasks_per_step": 2, "rollout.max_turns": 4, "rollout.max_context_tokens": 520,
             "filtering.reasons": '["max_context"]', "loss.entropy_coef": 0.01, "optim.lr": 1e-3,
             "optim.lr_schedule": "cosine", "optim.min_lr_ratio": 0.25}


def run_as_a_user(tmp_path: Path, run: RunDir, overrides: dict, *options: str, own_flag: str = "") -> str:
    """``agentrl run --dry-run``'s two commands, in a shell: the first verbatim, the second through the
    ``train_ppo_ray.sh`` the first writes, with ``own_flag``; returns the printed training command."""
    env = {**os.environ, BACKEND_ENV: "cpu", "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    dry = subprocess.run(
        [sys.executable, "-m", "agentrl_plugins", "run", "deepswe_grpopp", "--framework", "openrlhf",
         "--profile", "laptop", "--model", str(tmp_path / "model"), "--out", str(run.path), *options, "--dry-run",
         *[arg for key, value in overrides.items() for arg in ("-o", f"{key}={value}")]],
        capture_output=True, text=True, timeout=300, env=env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    prepare, train = [line for line in dry.stdout.splitlines() if line and not line.startswith("#")]
    assert prepare.startswith("agentrl openrlhf prepare ")
    for line in (prepare, f"sh {run.path / 'train_ppo_ray.sh'} {own_flag}"):
        result = subprocess.run(line, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
        assert result.returncode == 0, line[:300] + result.stdout[-3000:] + result.stderr[-6000:]
        if line is prepare:
            assert (run.path / "train_ppo_ray.sh").read_text().splitlines()[-1] == f'exec {train} "$@"', \
                "the script runs the printed command"
    return train


def assert_the_engine_holds_the_trained_weights(run: RunDir, initial: Any) -> None:
    """After each of the two steps' syncs the rollout engine recorded what it received; after the last, exactly the
    trained weights, which moved off the start."""
    syncs = [json.loads(line) for line in (run.path / "rollout_weights.jsonl").read_text().splitlines()]
    trained = AutoModelForCausalLM.from_pretrained(run.final_weights, dtype=torch.float32)
    assert [s["sync"] for s in syncs] == [1, 2]
    assert syncs[-1]["sha256"] == weights_digest(trained) != weights_digest(initial.to(torch.bfloat16))


def test_two_real_openrlhf_steps_on_the_cpu_backend(tmp_path, tokenizer):
    initial = build_model(tokenizer, seed=0)
    initial.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    run = RunDir(tmp_path / "run")
    train = run_as_a_user(tmp_path, run, OVERRIDES, "--report-to", "tensorboard,wandb",
                          own_flag="--logger.wandb.run_name mine")

    assert_the_engine_holds_the_trained_weights(run, initial)

    steps = [json.loads(line) for line in (run.path / STEPS_FILE).read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2] and all(s["episodes"] == 8 for s in steps)
    assert sum(s["filtered_episodes"] for s in steps) > 0 and all(s["filtered_loss_tokens"] == 0 for s in steps)
    assert sum(s["policy_tokens"] for s in steps) > 0, "kept episodes carried the loss"
    # OpenRLHF reports the rate after the step's update. A step without a single loss token (every episode
    # filtered) is skipped whole by DeepSpeed: OpenRLHF's own entropy term divides 0 by 0 tokens, the NaN
    # gradient counts as an overflow, and neither the weights nor the schedule move.
    updates = [sum(s["policy_tokens"] > 0 for s in steps[:i + 1]) for i in range(len(steps))]
    assert [s["status"]["actor_lr"] for s in steps] == pytest.approx(
        [1e-3 * lr_multiplier("cosine", done, 2, 0.25) for done in updates]), \
        "the recipe's cosine with its 25% floor (OpenRLHF's own default is a cosine down to 10%)"

    assert run.run_info()["config_changes"] == [], "the printed command agrees with the recipe on every flag"
    rows = run.read_metrics()
    assert [r.step for r in rows] == [0, 1, 2]
    assert rows[0].heldout_pass1 is not None and rows[0].train_reward is None and rows[0].policy_tokens == 0
    for row, step in zip(rows[1:], steps):
        assert row.train_reward == step["status"]["rollout/reward_mean"] and row.heldout_pass1 is not None
        assert row.policy_tokens == step["policy_tokens"]
        assert row.filtered_fraction == step["filtered_episodes"] / step["episodes"]
        assert (row.entropy is None) == (step["policy_tokens"] == 0), "no entropy over no loss token (OpenRLHF: NaN)"
        assert row.seconds > 0 and 0 < row.rollout_seconds < row.seconds and row.eval_seconds > 0
        assert step["mismatch"]["tokens"] == step["policy_tokens"], "the actor's log-probs against the engine's"
        if step["policy_tokens"]:
            assert row.mismatch_pearson > 0.99 and row.mismatch_k3_kl >= 0 and row.mismatch_gap_max > 0
        else:
            assert row.mismatch_pearson is None
    assert rows[0].seconds == 0 and rows[0].eval_seconds > 0
    assert (run.path / "report.md").is_file() and (run.path / "curves.png").is_file()

    assert list((run.path / "tensorboard" / "mine").glob("events.out.tfevents.*")), \
        "your own flag (the run name OpenRLHF names its TensorBoard folder after) is kept"
    assert "from-WANDB_API_KEY" in train and "WANDB_DIR=" in train, "W&B is on, its key left to W&B"
    for scalars in (tensorboard_scalars(run.path / "tensorboard"), wandb_scalars(run.path / "wandb")):
        for row in rows:
            for name, value in logged_figures(row).items():
                assert scalars[f"train/{name}"][row.step] == pytest.approx(value, rel=1e-6, abs=1e-6), (name, row.step)
        assert "train/rollout/reward_mean" in scalars, "OpenRLHF's own figures are there too"


def test_two_real_openrlhf_steps_on_openrlhfs_own_engine_on_vllms_cpu_build(tmp_path, tokenizer):
    """The same run with ``rollout.engine = "vllm"``: OpenRLHF's own vLLM actor samples the episodes on vLLM's CPU
    build (bfloat16, as OpenRLHF builds it) and receives the trained weights each step."""
    initial = build_model(tokenizer, seed=0, size=TINYAGENT_SIZE)  # vLLM's CPU attention: head_dim 32
    initial.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    run = RunDir(tmp_path / "run")
    train = run_as_a_user(tmp_path, run, {**OVERRIDES, "rollout.engine": "vllm", "train.eval_every": 2})
    assert "AGENTRL_OPENRLHF_ROLLOUT=vllm" in train and "vllm-stand-in" not in train
    assert "--vllm.enforce_eager" in train and "--vllm.enable_prefix_caching" in train

    assert_the_engine_holds_the_trained_weights(run, initial)
    steps = [json.loads(line) for line in (run.path / STEPS_FILE).read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2] and all(s["episodes"] == 8 for s in steps)
    rows = run.read_metrics()
    assert [r.step for r in rows] == [0, 1, 2] and rows[2].heldout_pass1 is not None
    for row, step in zip(rows[1:], steps):
        assert step["mismatch"]["tokens"] == step["policy_tokens"], "the actor's log-probs against the engine's"
        if step["policy_tokens"]:
            assert 0.9 < row.mismatch_pearson and row.mismatch_gap_max > 0, "bfloat16 engine, bfloat16 learner"
