"""Core corrections inside verl's policy loss (``agentrl_<correction>``), for corrections verl has no setting for.

The launcher turns on verl's token IS with a threshold above exp(20)
(``RAW_RATIO_THRESHOLD``), so verl hands the loss the untruncated ratios
exp(clamp(old_log_prob - rollout_log_prob, -20, 20)) as ``rollout_is_weights``.
The loss takes their log (the per-token log-ratio every core correction starts
from), runs the core correction with the recipe's cap and band (the run folder's
``recipe.toml``, whose path the actor's policy-loss config carries:
:mod:`agentrl_verl.recipe_file`), and gives the core's weights to verl's own
clipped surrogate, ``compute_policy_loss_vanilla``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, register_policy_loss

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.algorithms.corrections import limited_fraction
from agentrl_plugins.plugins import get_plugin_manager

from agentrl_verl.names import RAW_RATIO_THRESHOLD, policy_loss_name
from agentrl_verl.recipe_file import recipe_from_actor_config


def correction_algorithm(correction: str, config: Any) -> RecipeAlgorithm:
    """The recipe's algorithm for the policy loss of ``correction``, read from the path in the actor's config."""
    recipe = recipe_from_actor_config(config)
    if recipe.correction.name != correction:
        raise ValueError(f"policy loss {policy_loss_name(correction)!r} runs correction {correction!r}, but the "
                         f"recipe names {recipe.correction.name!r}: set actor_rollout_ref.actor.policy_loss.loss_mode="
                         f"{policy_loss_name(recipe.correction.name)}")
    return RecipeAlgorithm.from_recipe(recipe)


def correct_raw_ratios(correction: str, config: Any, rollout_is_weights: Tensor, response_mask: Tensor) -> Any:
    """The core ``correction`` applied to verl's raw token IS ratios (learner over sampler)."""
    on = response_mask.to(torch.bool)
    log_ratio = torch.where(on, rollout_is_weights.clamp(min=torch.finfo(rollout_is_weights.dtype).tiny).log(), 0.0)
    return correction_algorithm(correction, config).correct(log_ratio, torch.zeros_like(log_ratio),
                                                            response_mask.to(log_ratio.dtype))


def corrected_policy_loss(correction: str):
    """A verl policy loss: the core ``correction``'s weights on verl's vanilla clipped surrogate."""

    def loss(old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor, response_mask: Tensor,
             loss_agg_mode: str = "token-mean", config: Any = None,
             rollout_is_weights: Tensor | None = None) -> tuple[Tensor, dict[str, Any]]:
        if rollout_is_weights is None:
            raise ValueError(f"policy loss {policy_loss_name(correction)!r} needs verl's token IS ratios: set "
                             f"algorithm.rollout_correction.rollout_is=token and rollout_is_threshold="
                             f"{RAW_RATIO_THRESHOLD:g}, and rollout.calculate_log_probs=true")
        result = correct_raw_ratios(correction, config, rollout_is_weights, response_mask)
        pg_loss, metrics = compute_policy_loss_vanilla(old_log_prob, log_prob, advantages, response_mask,
                                                       loss_agg_mode, config, result.weights)
        metrics.update({f"agentrl/{key}": value for key, value in result.metrics.items()})
        metrics["agentrl/limited_fraction"] = limited_fraction(result.metrics)
        return pg_loss, metrics

    loss.__name__ = policy_loss_name(correction)
    return loss


def register_policy_losses() -> list[str]:
    """Register a policy loss for every correction of agentrl's registry; returns the verl names."""
    names = []
    for entry in get_plugin_manager().registry("correction"):
        name = policy_loss_name(entry.record.name)
        register_policy_loss(name)(corrected_policy_loss(entry.record.name))
        names.append(name)
    return names


POLICY_LOSSES = register_policy_losses()
