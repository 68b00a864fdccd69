"""The recipe's algorithm: estimator, compact filtering and correction resolved by name."""

from __future__ import annotations

import math

import torch

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.batch import TrajectoryBatch
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.types import Trajectory

MANAGER = PluginManager(load_entry_points=False)


def algorithm(name, **overrides):
    return RecipeAlgorithm.from_recipe(load_recipe(name, overrides, plugin_manager=MANAGER), MANAGER)


def test_deepswe_masks_filtered_episodes_but_keeps_them_in_the_baseline():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    groups = torch.zeros(4, dtype=torch.long)
    terminations = ["submitted", "submitted", "max_turns", "submitted"]
    result = algorithm("deepswe_grpopp").advantages(rewards, groups, terminations)
    assert result.valid.tolist() == [True, True, False, True]
    assert torch.allclose(result.values, torch.tensor([1.0, -1 / 3, 0.0, -1 / 3]))
    assert result.filtered_fraction == 0.25
    excluded = algorithm("deepswe_grpopp", **{"advantage.masked_in_baseline": False})
    assert torch.allclose(excluded.advantages(rewards, groups, terminations).values,
                          torch.tensor([1.0, -0.5, 0.0, -0.5]))


def test_grpo_recipe_does_not_filter():
    result = algorithm("grpo").advantages(torch.tensor([1.0, 0.0]), torch.tensor([3, 3]), ["max_turns", "submitted"])
    assert result.valid.all() and result.values[0] > 0 > result.values[1]


def test_an_episode_without_a_verdict_never_enters_the_loss_whatever_the_filtering():
    terminations = ["submitted", "error", "max_turns", "submitted"]
    rewards, groups = torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.zeros(4, dtype=torch.long)
    assert algorithm("grpo").advantages(rewards, groups, terminations).valid.tolist() == [True, False, True, True]
    assert algorithm("deepswe_grpopp").valid(terminations).tolist() == [True, False, False, True]
    assert algorithm("dapo").valid(terminations).tolist() == [True, False, True, True]  # reasons: max_context only


def test_correction_receives_the_recipe_parameters():
    learner = torch.tensor([[math.log(3.0), 0.0]])
    sampler = torch.zeros(1, 2)
    mask = torch.ones(1, 2)
    capped = algorithm("grpo", **{"correction.name": "token_tis",
                                  "correction.cap": 1.5}).correct(learner, sampler, mask)
    assert torch.allclose(capped.weights, torch.tensor([[1.5, 1.0]]))
    band = algorithm("grpo", **{"correction.name": "icepop", "correction.high": 2.0}).correct(learner, sampler, mask)
    assert band.weights.tolist() == [[0.0, 1.0]] and band.metrics["masked_fraction"] == 0.5


def test_batch_pads_trajectories():
    def trajectory(mask, reward, group, termination):
        return Trajectory("t", [1], list(range(len(mask))), mask, [-0.5 * m for m in mask], [], termination, reward,
                          group_id=group)

    batch = TrajectoryBatch.from_trajectories([trajectory([1, 0, 1], 1.0, 0, "submitted"),
                                               trajectory([1], 0.0, 1, "max_turns")])
    assert batch.response_mask.tolist() == [[1, 0, 1], [1, 0, 0]]
    assert batch.sampler_logprobs.tolist() == [[-0.5, 0.0, -0.5], [-0.5, 0.0, 0.0]]
    assert batch.rewards.tolist() == [1.0, 0.0] and batch.group_ids.tolist() == [0, 1]
    assert batch.terminations == ("submitted", "max_turns")
