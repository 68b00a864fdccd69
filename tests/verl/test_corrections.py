"""Each correction through verl's own ``rollout_corr_helper`` (as the launcher configures it) vs the core's."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
from verl.workers.config import ActorConfig, PolicyLossConfig

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.algorithms import aggregate_loss, clipped_surrogate
from agentrl_plugins.recipe import build_recipe, load_recipe
from agentrl_plugins.runs.rundir import write_recipe_file

from agentrl_verl.config import NO_DUAL_CLIP, LaunchPaths, correction_overrides, launch_overrides
from agentrl_verl.names import RAW_RATIO_THRESHOLD

MAPPED = {
    "token_tis": {"cap": 1.5},
    "sequence_tis": {"cap": 3.0},
    "icepop": {"low": 0.8, "high": 1.25},
}
INJECTED = {"geometric_sequence_mask": {"low": 0.9, "high": 1.1}, "none": {}}
"""Corrections verl has no exact twin for (its seq_mean_k1 rejection empties rows before the estimator)."""


def logprobs(seed: int = 0):
    """float64 learner/sampler log-probs with a per-row mismatch, and a mask with one empty row."""
    g = torch.Generator().manual_seed(seed)
    sampler = -torch.rand(6, 10, generator=g, dtype=torch.float64) * 3
    shift = torch.linspace(-0.3, 0.3, 6, dtype=torch.float64)[:, None]
    learner = sampler + shift + torch.randn(6, 10, generator=g, dtype=torch.float64) * 0.3
    mask = (torch.arange(10)[None, :] < torch.tensor([10, 6, 8, 3, 9, 0])[:, None]).to(torch.float64)
    return learner, sampler, mask


def recipe_for(name: str, params: dict):
    return load_recipe("grpo", {"correction.name": name, **{f"correction.{k}": v for k, v in params.items()}})


def verl_correction(recipe, learner, sampler, mask) -> DataProto:
    """verl's correction step on a batch, with ``algorithm.rollout_correction`` as the launcher sets it."""
    settings = {key.removeprefix("algorithm.rollout_correction."): value
                for key, value in correction_overrides(recipe)[0].items()}
    config = OmegaConf.merge(OmegaConf.create({"rollout_is": None, "rollout_is_threshold": 2.0, "rollout_rs": None,
                                               "rollout_rs_threshold": None, "rollout_is_batch_normalize": False}),
                             settings)
    batch = DataProto.from_single_dict({"old_log_probs": learner, "rollout_log_probs": sampler,
                                        "response_mask": mask.clone()})
    return compute_rollout_correction_and_add_to_batch(batch, config)[0]


@pytest.mark.parametrize("name", MAPPED)
def test_each_mapped_correction_equals_the_core_through_rollout_corr_helper(name):
    recipe = recipe_for(name, MAPPED[name])
    learner, sampler, mask = logprobs()
    core = RecipeAlgorithm.from_recipe(recipe).correct(learner, sampler, mask)
    out = verl_correction(recipe, learner, sampler, mask)
    weights = out.batch["rollout_is_weights"] if "rollout_is_weights" in out.batch else out.batch["response_mask"]
    assert torch.allclose(weights * out.batch["response_mask"], core.weights, atol=1e-12)
    assert 0 < core.metrics["capped_fraction"] + core.metrics["masked_fraction"] < 1
    assert torch.equal(out.batch["response_mask"], mask)


@pytest.mark.parametrize("name", list(MAPPED) + list(INJECTED))
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum"])
def test_the_agentrl_policy_loss_applies_the_core_correction_to_verls_raw_ratios(name, mode, tmp_path):
    params = {"cap": 1.5, "low": 0.8, "high": 1.25, **MAPPED.get(name, {}), **INJECTED.get(name, {})}
    recipe_file = write_recipe_file(tmp_path / "recipe.toml", recipe_for(name, params))
    learner, sampler, mask = logprobs(1)
    raw = {"rollout_is": "token", "rollout_is_threshold": RAW_RATIO_THRESHOLD}
    batch = DataProto.from_single_dict({"old_log_probs": learner, "rollout_log_probs": sampler,
                                        "response_mask": mask.clone()})
    ratios = compute_rollout_correction_and_add_to_batch(batch, OmegaConf.create(raw))[0].batch["rollout_is_weights"]
    carried = {"agentrl_recipe": str(recipe_file)}  # as +actor_rollout_ref.actor.policy_loss.rollout_correction.*
    config = ActorConfig(strategy="fsdp", rollout_n=8, clip_ratio_low=0.2, clip_ratio_high=0.28,
                         clip_ratio_c=NO_DUAL_CLIP, loss_agg_mode=mode, ppo_micro_batch_size_per_gpu=1,
                         policy_loss=PolicyLossConfig(rollout_correction=carried))
    advantages = torch.linspace(-1, 1, 6, dtype=torch.float64)
    logp = learner + 0.1
    loss, metrics = get_policy_loss_fn(f"agentrl_{name}")(learner, logp, advantages[:, None] * mask, mask.bool(),
                                                          mode, config, ratios)
    core = RecipeAlgorithm.from_recipe(recipe_for(name, params)).correct(learner, sampler, mask)
    surrogate = clipped_surrogate(logp, learner, advantages, mask, clip_low=0.2, clip_high=0.28, weights=core.weights)
    assert loss.item() == pytest.approx(aggregate_loss(surrogate.per_token_loss, mask, mode).item(), abs=1e-6)
    assert metrics["agentrl/capped_fraction"] == pytest.approx(core.metrics["capped_fraction"])


def test_a_correction_verl_has_no_setting_for_goes_through_its_policy_loss(tmp_path):
    recipe = build_recipe({"name": "r", "description": "d", "correction": {"name": "my_correction", "cap": 4.0}})
    overrides, status, _ = correction_overrides(recipe)
    assert status == "injected"
    assert overrides["actor_rollout_ref.actor.policy_loss.loss_mode"] == "agentrl_my_correction"
    assert overrides["algorithm.rollout_correction.rollout_is_threshold"] == RAW_RATIO_THRESHOLD
    launched = launch_overrides(recipe, LaunchPaths("/models/m", tmp_path, run_dir=tmp_path / "run"))
    carried = launched["+actor_rollout_ref.actor.policy_loss.rollout_correction.agentrl_recipe"]
    assert carried == launched["+agentrl.recipe"] == str(tmp_path / "run" / "recipe.toml"), "the cap travels in it"
