"""OpenRLHF's own ``RemoteExperienceMaker.compute_advantages_and_returns`` against the core estimators.

Episodes come from the shipped executor (scripted on a FakeLLMEngine), become OpenRLHF
``Experience`` micro-batches through its own code, and OpenRLHF's arguments are parsed by its
own command line from the flags the adapter builds.
"""

from __future__ import annotations

import pytest
import torch
from conftest import HACK, SOLVE, STALL, FakeLLMEngine, experience_of, flags_of, parse_openrlhf_cli, rollout
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.algorithms import rloo

from agentrl_openrlhf.adapter import OpenRLHFAdapter
from agentrl_openrlhf.patches import patches

SPAN_SOLVE = ["<tool>edit swap_minmax</tool>", "<tool>submit</tool>"]
SCRIPTS = {"clamp": [SOLVE, HACK, STALL, SOLVE], "span": [SPAN_SOLVE, STALL, STALL, HACK]}


async def step_experiences(recipe, model, tokenizer, monkeypatch):
    """One rollout step's micro-batches as OpenRLHF's trainer holds them before the advantage step."""
    args = parse_openrlhf_cli(flags_of(OpenRLHFAdapter().describe(recipe).command), monkeypatch)
    engine = FakeLLMEngine(model, tokenizer, SCRIPTS)
    responses = [r for task in SCRIPTS for r in await rollout(engine, tokenizer, task, recipe.rollout.group_size)]
    maker = RemoteExperienceMaker(None, None, None, None, FixedKLController(args.algo.kl.init_coef),
                                  type("Strategy", (), {"args": args})(), tokenizer)
    experiences = maker.split_rollout_samples([experience_of(r) for r in responses])
    for experience in experiences:
        experience.action_log_probs = torch.zeros(experience.action_mask.shape)
        experience.kl = torch.zeros(experience.action_mask.shape)
    return maker, experiences, responses


def per_sample_advantages(experiences) -> list[torch.Tensor]:
    """Each sample's advantages on its loss tokens, in rollout order."""
    rows = [(i, e.advantages[row][e.action_mask[row].bool()]) for e in experiences for row, i in enumerate(e.index)]
    return [values for _, values in sorted(rows, key=lambda item: item[0])]


async def test_native_rloo_equals_the_core_leave_one_out(use_recipe, model, tokenizer, monkeypatch):
    recipe = use_recipe()
    assert recipe.advantage.estimator == "rloo" and recipe.advantage.masked_in_baseline
    assert all(p.name != "compute_advantages_and_returns" for p in patches(recipe))
    maker, experiences, responses = await step_experiences(recipe, model, tokenizer, monkeypatch)
    rewards = torch.tensor([r["reward"] for r in responses])
    valid = torch.tensor([r["action_ranges"] != [] for r in responses])
    assert rewards.tolist() == [1, 0, 0, 1, 1, 0, 0, 0] and valid.tolist() == [1, 1, 0, 1, 1, 0, 0, 1]
    expected = rloo(rewards, torch.arange(8) // 4, valid, masked_in_baseline=True)
    maker.compute_advantages_and_returns(experiences)
    for row, values in enumerate(per_sample_advantages(experiences)):
        assert (values.numel() > 0) == bool(valid[row])
        assert torch.allclose(values, torch.full_like(values, expected[row].item()), atol=1e-6)


@pytest.mark.parametrize("overrides", [{"advantage.estimator": "grpo"},
                                       {"advantage.estimator": "rloo", "advantage.masked_in_baseline": False},
                                       {"advantage.estimator": "dr_grpo", "advantage.masked_in_baseline": False}])
async def test_patched_estimators_equal_the_core(use_recipe, model, tokenizer, monkeypatch, overrides):
    recipe = use_recipe(overrides)
    (patch,) = [p for p in patches(recipe) if p.name == "compute_advantages_and_returns"]
    monkeypatch.setattr(patch.owner, patch.name, patch.replacement)
    maker, experiences, responses = await step_experiences(recipe, model, tokenizer, monkeypatch)
    terminations = ["submitted" if r["extra_logs"]["termination_submitted"] else "max_turns" for r in responses]
    expected = RecipeAlgorithm.from_recipe(recipe).advantages(
        torch.tensor([r["reward"] for r in responses]), torch.arange(8) // 4, terminations).values
    maker.compute_advantages_and_returns(experiences)
    for row, values in enumerate(per_sample_advantages(experiences)):
        assert (values.numel() > 0) == (responses[row]["action_ranges"] != [])
        assert torch.allclose(values, torch.full_like(values, expected[row].item()), atol=1e-6)
