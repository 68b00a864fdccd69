"""Two real verl training steps on a CPU, run as a verl user runs them: the two commands that
``agentrl run deepswe_grpopp --framework verl --dry-run`` prints, in a shell: the first verbatim, the second
through the ``main_ppo.sh`` the first writes (its last line is the printed command), with an override of yours.

The first, ``agentrl verl prepare``, writes the run folder (recipe, dataset, model); the second is verl's
unmodified ``python -m verl.trainer.main_ppo`` with ``VERL_PLATFORM=cpu`` (agentrl-verl's cpu platform and
``agentrl_hf`` rollout server), whose recording ``sync`` trainer fills the run folder step by step and logs
the agentrl figures to TensorBoard and W&B (``--report-to tensorboard,wandb``, W&B offline). The BugFix gym
runs through the agent loop, with a freshly initialised TinyAgent (random weights: quick to build, and a warm
start needs TRL).

The estimator is GiGPO's, so every step's advantages come from each episode's turns, which the agent loop
hands the recording trainer through verl's TransferQueue (and the trainer checks them against each row's
policy tokens). A fresh TinyAgent never earns a reward, so the run adds an entropy bonus
(``loss.entropy_coef``) to give the kept episodes a gradient. Filtering only
on ``max_context`` with a 610-token context makes the episodes that run out of
context compact-filtered while those that run out of turns are kept: the
random policy's episodes end on both sides of that line. ``token-mean``
aggregation makes verl's ``actor/entropy`` a plain mean over the loss tokens,
which the tests recompute from the logged episodes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import model_logprobs
from transformers import AutoModelForCausalLM

from agentrl_plugins.algorithms import lr_multiplier
from agentrl_plugins.runs.metrics import logged_figures
from agentrl_plugins.runs.rundir import RunDir
from agentrl_plugins.testing import tensorboard_scalars, wandb_scalars

from agentrl_verl.episodes import EPISODES_FILE, EpisodeRecord, read_episodes
from agentrl_verl.recorder import verl_metrics

ROOT = Path(__file__).resolve().parents[2]
STEPS = 2
OVERRIDES = {"advantage.estimator": "gigpo",
             "train.steps": STEPS, "train.eval_every": 1, "train.eval_episodes_per_task": 1,
             "rollout.group_size": 4, "rollout.tasks_per_step": 2, "rollout.max_context_tokens": 610,
             "filtering.reasons": '["max_context"]', "loss.aggregation": "token-mean", "loss.entropy_coef": 0.01,
             "optim.lr": 1e-3, "optim.lr_schedule": "cosine", "optim.min_lr_ratio": 0.25}
LOGPROB_TOLERANCE = 1e-3
"""Largest allowed |rollout - trainer| gap (verl's prob diff, and log-probs recomputed here); measured ~5e-9."""
SIGN_AGREEMENT = 0.99
"""Share of clearly moved weights whose first update follows the kept episodes' entropy gradient."""
SIGN_MARGIN = 0.01


def printed_commands(run_dir: Path, model_dir: Path, env: dict[str, str]) -> list[str]:
    """What ``agentrl run ... --dry-run`` prints for this run: its command lines, comments left out."""
    result = subprocess.run(
        [sys.executable, "-c", "from agentrl_plugins.cli import main; main()", "run", "deepswe_grpopp",
         "--framework", "verl", "--profile", "laptop", "--model", str(model_dir), "--out", str(run_dir),
         "--report-to", "tensorboard,wandb", "--dry-run",
         *[arg for key, value in OVERRIDES.items() for arg in ("-o", f"{key}={value}")]],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return [line for line in result.stdout.splitlines() if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def run(tmp_path_factory, model_dir) -> Path:
    """One real two-step training run (about two minutes on two cores); its run folder. The first printed
    command runs verbatim; the second is the last line of the ``main_ppo.sh`` it writes, which runs with an
    override of the user's (``trainer.experiment_name``, a setting the recipe leaves open)."""
    run_dir = tmp_path_factory.mktemp("cpu_run") / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline",
           "AGENTRL_CACHE": str(tmp_path_factory.mktemp("cache")),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    prepare, train = printed_commands(run_dir, model_dir, env)
    assert prepare.split()[:3] == ["agentrl", "verl", "prepare"]
    cwd = tmp_path_factory.mktemp("cwd")
    for line in (prepare, f"bash {run_dir / 'main_ppo.sh'} trainer.experiment_name=mine"):
        result = subprocess.run(line, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, line[:300] + result.stdout[-3000:] + result.stderr[-6000:]
        if line is prepare:
            assert (run_dir / "main_ppo.sh").read_text().splitlines()[-1] == f'exec env {train} "$@"', \
                "the script runs the printed command"
    return run_dir


@pytest.fixture(scope="module")
def episodes(run) -> list[EpisodeRecord]:
    return read_episodes(run / EPISODES_FILE)


@pytest.fixture(scope="module")
def verl(run) -> dict[int, dict[str, Any]]:
    return verl_metrics(run / "verl_metrics.jsonl")


def training(episodes: list[EpisodeRecord], step: int) -> list[EpisodeRecord]:
    return [e for e in episodes if e.split == "train" and e.weights_version == step - 1]


def weights(model_dir: Path, run: Path, step: int) -> dict[str, torch.Tensor]:
    """The policy after ``step`` (0: the starting model), from verl's own checkpoint (one FSDP2 shard)."""
    if step == 0:
        return {k: v.detach().clone() for k, v in AutoModelForCausalLM.from_pretrained(model_dir).state_dict().items()}
    shard = torch.load(run / "checkpoints" / f"global_step_{step}" / "actor" / "model_world_size_1_rank_0.pt",
                       weights_only=False)
    return {k: v.to_local() if hasattr(v, "to_local") else v for k, v in shard.items()}


def policy(model_dir: Path, run: Path, version: int) -> Any:
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa", dtype=torch.float32)
    model.load_state_dict(weights(model_dir, run, version), strict=False)
    return model.eval()


def token_entropies(model: Any, episode: EpisodeRecord) -> torch.Tensor:
    """Entropy of the policy at each of the episode's policy tokens (teacher-forced, differentiable)."""
    ids = episode.prompt_ids + episode.response_ids
    logits = model(torch.tensor([ids])).logits[0, len(episode.prompt_ids) - 1:-1].float()
    entropy = torch.distributions.Categorical(logits=logits).entropy()
    return entropy[torch.tensor(episode.policy_mask, dtype=torch.bool)]


def entropy_ascent(model: Any, episodes: list[EpisodeRecord]) -> dict[str, torch.Tensor]:
    """The gradient of the token-mean entropy over ``episodes``' policy tokens: the entropy bonus's direction."""
    model.zero_grad()
    torch.cat([token_entropies(model, e) for e in episodes]).mean().backward()
    return {name: p.grad.detach().clone() for name, p in model.named_parameters()}


def sign_agreement(step: dict[str, torch.Tensor], direction: dict[str, torch.Tensor]) -> float:
    """Fraction of the clearly moved weights that moved along ``direction`` (Adam's first step follows its sign)."""
    agree = total = 0
    for name, grad in direction.items():
        delta = step[name]
        clear = (grad.abs() > 1e-3 * grad.abs().max()) & (delta != 0)
        agree += int((torch.sign(delta[clear]) == torch.sign(grad[clear])).sum())
        total += int(clear.sum())
    return agree / total


def test_the_run_folder_has_a_metrics_row_per_step_and_a_report(run, episodes):
    rows = RunDir(run).read_metrics()
    assert [row.step for row in rows] == list(range(STEPS + 1))
    assert rows[0].heldout_pass1 is not None and rows[0].train_reward is None
    assert rows[0].seconds == 0 and rows[0].eval_seconds > 0, "verl's validation before training, by its episodes"
    for row in rows[1:]:
        batch = training(episodes, row.step)
        assert len(batch) == 2 * 4
        assert row.train_reward == pytest.approx(sum(e.reward for e in batch) / len(batch))
        assert row.filtered_fraction == pytest.approx(sum(e.filtered for e in batch) / len(batch))
        assert row.policy_tokens == sum(sum(e.policy_mask) for e in batch if not e.filtered)
        assert row.heldout_pass1 is not None and 0.0 <= row.heldout_pass1 <= 1.0
        assert row.seconds > 0 and 0 < row.rollout_seconds < row.seconds and row.eval_seconds > 0
    assert (run / "report.md").is_file()


def test_the_printed_command_agrees_with_the_recipe_on_every_setting_it_decides(run):
    assert RunDir(run).run_info()["config_changes"] == []


def test_your_own_override_of_an_open_setting_is_kept(run):
    assert "experiment_name: mine" in (run / "hydra" / ".hydra" / "config.yaml").read_text()


@pytest.mark.parametrize("logger", ["tensorboard", "wandb"])
def test_the_agentrl_figures_reach_the_loggers_step_by_step(run, logger):
    scalars = tensorboard_scalars(run / "tensorboard") if logger == "tensorboard" else \
        wandb_scalars(run / "wandb", step_key="_step")
    rows = RunDir(run).read_metrics()
    for row in rows:
        for name, value in logged_figures(row).items():
            assert scalars[name][row.step] == pytest.approx(value, rel=1e-6, abs=1e-6), (name, row.step)
    assert "actor/entropy" in scalars, "verl's own figures are there too"


def test_the_entropy_figure_is_the_mean_over_loss_tokens(run, verl):
    """The recording trainer's own figure; under token-mean aggregation verl's ``actor/entropy`` is that mean too
    (under a sequence-mean one it is not: one definition in every framework comes from the trainer's)."""
    rows = {row.step: row for row in RunDir(run).read_metrics()}
    for step in range(1, STEPS + 1):
        assert rows[step].entropy == pytest.approx(verl[step]["actor/entropy"], rel=1e-5)


def test_the_learning_rate_follows_the_recipes_schedule(verl):
    steps = range(1, STEPS + 1)
    assert [verl[step]["actor/lr"] for step in steps] == pytest.approx(
        [1e-3 * lr_multiplier("cosine", step, STEPS, 0.25) for step in steps]), \
        "verl reports the rate after each step's scheduler step: the recipe's cosine, not its default constant"


def test_the_policy_weights_changed(run, model_dir, episodes):
    assert any(not e.filtered for e in episodes if e.split == "train"), "no kept episode: nothing to train on"
    start, end = weights(model_dir, run, 0), weights(model_dir, run, STEPS)
    assert max(float((start[k] - end[k]).abs().max()) for k in end) > 0


def test_the_final_folder_holds_the_last_checkpoint_as_float32_hugging_face_weights(run, model_dir):
    final = AutoModelForCausalLM.from_pretrained(run / "final", dtype=torch.float32).state_dict()
    last = weights(model_dir, run, STEPS)
    assert set(final) == set(last) and all(torch.equal(final[key], last[key]) for key in last)


def test_filtered_episodes_carry_no_loss(run, model_dir, episodes, verl):
    """A step whose episodes are all filtered moves nothing; the first step that moves the policy moves it along
    the gradient of the kept episodes alone (Adam's first step follows its sign), not of every episode."""
    train = [e for e in episodes if e.split == "train"]
    assert any(e.filtered for e in train), "no filtered episode: the run does not exercise compact filtering"
    assert all(e.policy_tokens == 0 for e in train if e.filtered)
    for step in range(1, STEPS + 1):
        batch = training(episodes, step)
        before, after = weights(model_dir, run, step - 1), weights(model_dir, run, step)
        if all(e.filtered for e in batch):
            assert verl[step]["actor/grad_norm"] == 0.0
            assert all(torch.equal(before[k], after[k]) for k in after)
            continue
        model = policy(model_dir, run, step - 1)
        moved = {name: after[name] - before[name] for name, _ in model.named_parameters()}
        kept = sign_agreement(moved, entropy_ascent(model, [e for e in batch if not e.filtered]))
        assert kept > SIGN_AGREEMENT
        if any(e.filtered for e in batch):
            assert sign_agreement(moved, entropy_ascent(model, batch)) < kept - SIGN_MARGIN
        break


def test_rollout_and_trainer_logprobs_agree(run, model_dir, episodes, verl):
    """verl's trainer forward (packed rows, the packed-sequence attention) against the sampler's log-probs, as the
    on-policy update measures it in its own forward (the mismatch figures of every step's row, from the sums each
    micro-batch's loss logs); then the starting policy recomputed by Hugging Face alone."""
    rows = [row for row in RunDir(run).read_metrics() if row.step > 0]
    assert "training/rollout_probs_diff_max" not in verl[1], "verl's figure needs the old-log-prob pass it skipped"
    assert len(rows) == STEPS and all(row.mismatch_pearson > 0.9999 for row in rows)
    assert all(verl[row.step]["actor/agentrl/mismatch/tokens"] > 0 for row in rows)
    gaps = [row.mismatch_gap_max for row in rows]
    assert max(gaps) < LOGPROB_TOLERANCE and any(gap > 0 for gap in gaps)
    assert all(0 <= row.mismatch_k3_kl < 1e-6 and abs(row.mismatch_ppl_ratio - 1) < 1e-4 for row in rows)
    model = policy(model_dir, run, 0)
    for episode in [e for e in episodes if e.weights_version == 0][:4]:
        recomputed = model_logprobs(model, episode.prompt_ids, episode.response_ids)
        served = [(a, b) for a, b, on in zip(recomputed, episode.logprobs, episode.policy_mask) if on]
        assert served and max(abs(a - b) for a, b in served) < LOGPROB_TOLERANCE

