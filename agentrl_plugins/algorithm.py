"""The recipe's algorithm, resolved once from the registries: advantages with compact filtering, and corrections.

Adapters call this instead of re-implementing the math, so every framework
trains on the same numbers.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from agentrl_plugins.algorithms.aggregation import aggregate_loss
from agentrl_plugins.algorithms.corrections import CorrectionResult
from agentrl_plugins.algorithms.filtering import compact_filter
from agentrl_plugins.algorithms.policy_loss import SurrogateResult, clipped_surrogate
from agentrl_plugins.recipe_schema import Recipe

CORRECTION_PARAMETERS = ("cap", "low", "high")
"""The recipe's correction parameters; each correction takes the ones its signature names."""


@dataclass(frozen=True)
class Advantages:
    """One advantage per trajectory (0 for filtered ones) and which trajectories stay in the loss."""

    values: Tensor
    valid: Tensor

    @property
    def filtered_fraction(self) -> float:
        return 1.0 - self.valid.float().mean().item() if self.valid.numel() else 0.0


@dataclass(frozen=True)
class RecipeAlgorithm:
    """The estimator and correction a recipe names, with the recipe's filter and correction settings."""

    recipe: Recipe
    estimator: Callable[..., Tensor]
    correction: Callable[..., CorrectionResult]

    @classmethod
    def from_recipe(cls, recipe: Recipe, plugin_manager: Any = None) -> RecipeAlgorithm:
        if plugin_manager is None:
            from agentrl_plugins.plugins import get_plugin_manager

            plugin_manager = get_plugin_manager()
        return cls(
            recipe,
            plugin_manager.get("advantage", recipe.advantage.estimator).compute,
            plugin_manager.get("correction", recipe.correction.name).compute,
        )

    def valid(self, terminations: Sequence[str]) -> Tensor:
        """True for trajectories that stay in the loss after compact filtering."""
        if not self.recipe.filtering.compact:
            return torch.ones(len(terminations), dtype=torch.bool)
        return compact_filter(terminations, self.recipe.filtering.reasons)

    def advantages(self, rewards: Tensor, group_ids: Tensor, terminations: Sequence[str]) -> Advantages:
        valid = self.valid(terminations)
        values = self.estimator(rewards, group_ids, valid, masked_in_baseline=self.recipe.advantage.masked_in_baseline)
        return Advantages(values, valid)

    def correction_params(self) -> dict[str, float]:
        """The recipe's ``correction.cap``/``low``/``high`` that the correction takes, by name."""
        accepted = inspect.signature(self.correction).parameters
        return {key: getattr(self.recipe.correction, key) for key in CORRECTION_PARAMETERS if key in accepted}

    def correct(self, learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor) -> CorrectionResult:
        """Per-token weights for the sampler/learner mismatch; the recipe's cap/low/high go to whichever it takes."""
        return self.correction(learner_logp, sampler_logp, mask, **self.correction_params())

    def surrogate(self, logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor,
                  weights: Tensor | None = None) -> SurrogateResult:
        """The clipped surrogate per token with the recipe's clip range and dual clip, and the correction's
        ``weights``."""
        loss = self.recipe.loss
        return clipped_surrogate(logprobs, old_logprobs, advantages, mask, clip_low=loss.clip_low,
                                 clip_high=loss.clip_high, clip_c=loss.clip_c, weights=weights)

    def loss(self, logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor,
             weights: Tensor | None = None) -> Tensor:
        """The recipe's whole policy loss on one batch: the surrogate, aggregated as ``loss.aggregation`` says (a
        framework with its own micro-batch denominators aggregates :meth:`surrogate` itself)."""
        per_token = self.surrogate(logprobs, old_logprobs, advantages, mask, weights).per_token_loss
        loss = self.recipe.loss
        return aggregate_loss(per_token, mask, loss.aggregation, norm_constant=loss.norm_constant)
