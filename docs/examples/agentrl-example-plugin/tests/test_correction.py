"""The band-clip correction: weights on known ratios, and the recipe's band reaching it."""

import torch

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.recipe import load_recipe

from agentrl_example_plugin.correction import band_clip

SAMPLER = torch.log(torch.tensor([[0.5, 0.5, 0.5, 0.5]]))
LEARNER = torch.log(torch.tensor([[0.5, 1.0, 0.1, 0.4]]))  # ratios 1, 2, 0.2, 0.8
MASK = torch.tensor([[1, 1, 1, 0]])  # the last token is an observation


def test_ratios_are_clamped_into_the_band_and_observations_weigh_zero():
    result = band_clip(LEARNER, SAMPLER, MASK, low=0.5, high=1.5)
    assert torch.allclose(result.weights, torch.tensor([[1.0, 1.5, 0.5, 0.0]]))
    assert result.metrics["capped_fraction"] == 2 / 3


def test_the_recipe_band_reaches_the_correction(manager):
    algorithm = RecipeAlgorithm.from_recipe(load_recipe("arithmetic_median", plugin_manager=manager), manager)
    assert torch.allclose(algorithm.correct(LEARNER, SAMPLER, MASK).weights, torch.tensor([[1.0, 1.25, 0.8, 0.0]]))
