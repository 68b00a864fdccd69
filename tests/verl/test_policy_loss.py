"""verl's policy-loss path (clip 0.2/0.28, every aggregation) against the core's clipped surrogate and aggregation."""

from __future__ import annotations

import pytest
import torch
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.workers.config import ActorConfig

from agentrl_plugins.algorithms import LOSS_AGG_MODES, aggregate_loss, clipped_surrogate
from agentrl_plugins.recipe import load_recipe

from agentrl_verl.config import NO_DUAL_CLIP, default_paths, hydra_overrides
from agentrl_verl.verl_plugin.estimators import row_scale

NORM = 64.0
FILTERED = [2, 5]


def inputs(seed: int = 0):
    """float64 log-probs with ratios far outside the clip range (some above 3), mixed-sign advantages, a mask."""
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(8, 12, generator=g, dtype=torch.float64) * 3
    logp = old + torch.randn(8, 12, generator=g, dtype=torch.float64) * 0.8
    advantages = torch.randn(8, generator=g, dtype=torch.float64)
    lengths = torch.tensor([12, 7, 5, 9, 3, 10, 12, 1])
    mask = (torch.arange(12)[None, :] < lengths[:, None]).to(torch.float64)
    mask[FILTERED] = 0
    return old, logp, advantages, mask


def actor_config(mode: str, clip_c: float = NO_DUAL_CLIP, **global_batch_info) -> ActorConfig:
    config = ActorConfig(strategy="fsdp", rollout_n=8, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=clip_c,
                         loss_agg_mode=mode, loss_scale_factor=NORM if mode == "seq-mean-token-sum-norm" else None,
                         ppo_micro_batch_size_per_gpu=1)
    config.global_batch_info.update(loss_scale_factor=config.loss_scale_factor, **global_batch_info)
    return config


def verl_loss(mode: str, advantages: torch.Tensor, old, logp, mask, config: ActorConfig) -> float:
    loss, _ = get_policy_loss_fn("vanilla")(old, logp, advantages[:, None] * mask, mask.bool(), mode, config, None)
    return loss.item()


def core_loss(mode: str, advantages, old, logp, mask, clip_c=None) -> float:
    surrogate = clipped_surrogate(logp, old, advantages, mask, clip_low=0.2, clip_high=0.28, clip_c=clip_c)
    return aggregate_loss(surrogate.per_token_loss, mask, mode, norm_constant=NORM).item()


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_a_micro_batch_equals_the_core_reference(mode):
    old, logp, advantages, mask = inputs()
    assert (torch.exp(logp - old)[advantages < 0] > 3).any()
    ours = verl_loss(mode, advantages, old, logp, mask, actor_config(mode))
    assert ours == pytest.approx(core_loss(mode, advantages, old, logp, mask), abs=1e-6)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_the_trainers_global_denominators_equal_the_core_with_the_estimators_row_scale(mode):
    old, logp, advantages, mask = inputs(1)
    valid = mask.sum(-1) > 0
    trainer = actor_config(mode, dp_size=1, batch_num_tokens=mask.sum().item(), global_batch_size=len(mask))
    scaled = advantages * row_scale(mode, valid)
    assert verl_loss(mode, scaled, old, logp, mask, trainer) == pytest.approx(
        core_loss(mode, advantages, old, logp, mask), abs=1e-6)
    if mode.startswith("seq-mean"):
        unscaled = verl_loss(mode, advantages, old, logp, mask, trainer)
        assert unscaled == pytest.approx(core_loss(mode, advantages, old, logp, mask) * 6 / 8, abs=1e-6)


def test_a_recipe_dual_clip_is_native():
    old, logp, advantages, mask = inputs(2)
    mode = "token-mean"
    ours = verl_loss(mode, advantages, old, logp, mask, actor_config(mode, clip_c=3.0))
    assert ours == pytest.approx(core_loss(mode, advantages, old, logp, mask, clip_c=3.0), abs=1e-6)
    assert ours != pytest.approx(core_loss(mode, advantages, old, logp, mask), abs=1e-6)


def test_the_launcher_sets_what_these_tests_use():
    recipe = load_recipe("deepswe_grpopp")
    overrides = hydra_overrides(recipe, default_paths(recipe))
    actor = "actor_rollout_ref.actor."
    assert overrides[actor + "clip_ratio_low"] == 0.2 and overrides[actor + "clip_ratio_high"] == 0.28
    assert overrides[actor + "clip_ratio_c"] == recipe.loss.clip_c == 3.0
    without = hydra_overrides(load_recipe("grpo"), default_paths(recipe))
    assert without[actor + "clip_ratio_c"] == NO_DUAL_CLIP
    assert overrides[actor + "loss_agg_mode"] == "seq-mean-token-sum"
    assert overrides[actor + "ppo_mini_batch_size"] == overrides["data.train_batch_size"]
