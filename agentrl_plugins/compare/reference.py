"""The core's parity numbers for a batch: advantages, correction weights, loss and its gradient, and the
step's figures by their definitions (:mod:`agentrl_plugins.runs.figures`).

Filtered trajectories lose every loss token; the loss is aggregated over that mask (a
correction's rejected tokens stay in the denominator with weight 0, as in verl and OpenRLHF).
"""

from __future__ import annotations

import torch

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.algorithms.corrections import limited_fraction
from agentrl_plugins.algorithms.credit import TurnRows
from agentrl_plugins.algorithms.mismatch import mismatch_figures
from agentrl_plugins.compare.batch import ParityBatch, ParityResult
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.figures import loss_token_mean


def reference(recipe: Recipe, batch: ParityBatch, plugin_manager=None) -> ParityResult:
    """The core reference (``agentrl_plugins.algorithms`` through the recipe's algorithm) in float64."""
    algorithm = RecipeAlgorithm.from_recipe(recipe, plugin_manager)
    advantages = algorithm.advantages(batch.rewards, batch.group_ids, batch.terminations, batch)
    if algorithm.distills:
        advantages = algorithm.distilled(advantages, TurnRows.of(batch.turn_records(recipe), batch.response_mask))
    mask = batch.response_mask * advantages.valid[:, None].to(batch.response_mask.dtype)
    correction = algorithm.correct(batch.old_logprobs, batch.sampler_logprobs, mask)
    logprobs = batch.logprobs.clone().requires_grad_()
    value = algorithm.loss(logprobs, batch.old_logprobs, advantages.values, mask, correction.weights)
    (gradient,) = torch.autograd.grad(value, logprobs)
    policy = algorithm.policy_loss(batch.logprobs, batch.old_logprobs, advantages.values, mask, correction.weights)
    figures = {
        "train_reward": batch.rewards.mean().item(),
        "hacked_fraction": batch.hacked.double().mean().item(),
        "filtered_fraction": advantages.filtered_fraction,
        "clip_fraction": policy.figures()["clip_fraction"],
        "is_capped_fraction": limited_fraction(correction.metrics),
        "entropy": loss_token_mean(batch.entropies, mask),
        "policy_tokens": float(mask.sum().item()),
        **mismatch_figures(batch.old_logprobs, batch.sampler_logprobs, mask),
    }
    return ParityResult("core", advantages.values.detach(), correction.weights, value.item(), gradient,
                        figures=figures)
