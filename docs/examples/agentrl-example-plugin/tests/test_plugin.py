"""The package as the plugin manager sees it: entry point, registered names, and a recipe that uses them."""

import asyncio
import importlib
import tomllib
from pathlib import Path

import torch

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.episode import run_episodes
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.types import Limits
from agentrl_plugins.verifiers import build_verifier

from agentrl_example_plugin import plugin

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"


def test_the_agentrl_entry_point_names_the_plugin_module():
    entry_points = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["agentrl"]
    assert importlib.import_module(entry_points["arithmetic"]) is plugin


def test_every_component_is_registered_by_name(manager):
    ours = {(kind, entry.record.name) for kind in ("environment", "verifier", "advantage", "correction", "recipe")
            for entry in manager.registry(kind) if entry.distribution == "agentrl-example-plugin"}
    assert ours == {("environment", "arithmetic"), ("environment", "arithmetic_agent"), ("verifier", "exact_answer"),
                    ("advantage", "median_baseline"),
                    ("correction", "band_clip"), ("recipe", "arithmetic_median")}


def test_the_recipe_plays_scores_and_computes_advantages_with_the_plugin(manager):
    recipe = load_recipe("arithmetic_median", plugin_manager=manager)
    env = manager.get("environment", recipe.environment.name).factory()
    tokenizer = ByteChatTokenizer()
    trajectories = asyncio.run(run_episodes(
        env, env.tasks("train"), ScriptedGenerate(["answer 84", "answer 0"], tokenizer), tokenizer,
        Limits(max_turns=recipe.rollout.max_turns), group_size=recipe.rollout.group_size,
        verifier=build_verifier(recipe.verifier.names, recipe.verifier.combine, manager)))
    rewards = torch.tensor([t.reward for t in trajectories])
    groups = torch.tensor([t.group_id for t in trajectories])
    advantages = RecipeAlgorithm.from_recipe(recipe, manager).advantages(
        rewards, groups, [t.termination for t in trajectories])
    assert rewards.tolist() == [1.0, 0.0, 1.0, 0.0] + [0.0] * 8  # only 12 * 7 = 84 is answered right
    assert advantages.values.tolist() == [1.0, 0.0, 1.0, 0.0] + [0.0] * 8
