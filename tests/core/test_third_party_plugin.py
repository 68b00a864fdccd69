"""A real plugin distribution, installed into a fresh environment, shows up and works by name."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentrl_plugins.testing import fresh_environment

FIXTURE = Path(__file__).parents[1] / "fixtures" / "agentrl-demo-plugin"
USE_BY_NAME = textwrap.dedent("""
    import asyncio, json, torch
    from agentrl_plugins.episode import run_episodes
    from agentrl_plugins.plugins import get_plugin_manager
    from agentrl_plugins.recipe import load_recipe
    from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
    from agentrl_plugins.types import Limits
    from agentrl_plugins.verifiers import build_verifier

    manager = get_plugin_manager()
    recipe = load_recipe("demo_guess")
    env = manager.get("environment", recipe.environment.name).factory()
    verifier = build_verifier(recipe.verifier.names, recipe.verifier.combine, manager)
    tokenizer = ByteChatTokenizer()
    trajectories = asyncio.run(run_episodes(
        env, env.tasks(), ScriptedGenerate(["kiwi", "pear"], tokenizer), tokenizer,
        Limits(max_turns=recipe.rollout.max_turns), group_size=recipe.rollout.group_size, verifier=verifier))
    rewards = torch.tensor([t.reward for t in trajectories])
    groups = torch.tensor([t.group_id for t in trajectories])
    advantages = manager.get("advantage", recipe.advantage.estimator).compute(rewards, groups)
    print(json.dumps({"rewards": rewards.tolist(), "advantages": advantages.tolist()}))
""")


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory) -> Path:
    """A new virtual environment that sees the core's environment, with the demo plugin pip-installed."""
    return fresh_environment(tmp_path_factory.mktemp("fresh-env"), FIXTURE)


def test_the_fixture_is_not_visible_to_the_test_environment_itself():
    listing = subprocess.run([sys.executable, "-m", "agentrl_plugins", "plugins", "--json"],
                             capture_output=True, text=True, check=True).stdout
    assert "agentrl-demo-plugin" not in listing


def test_installed_plugin_appears_in_agentrl_plugins(fresh_python):
    listing = json.loads(subprocess.run([fresh_python, "-m", "agentrl_plugins", "plugins", "--json"],
                                        capture_output=True, text=True, check=True).stdout)
    demo = {(row["kind"], row["name"]) for row in listing if row["distribution"] == "agentrl-demo-plugin"}
    assert demo == {("environment", "guess"), ("verifier", "exact_guess"), ("advantage", "half_baseline"),
                    ("recipe", "demo_guess"), ("experiment", "demo_baselines"), ("model", "demo_tiny")}
    assert all(row["status"] == "ok" for row in listing)


def test_installed_plugin_components_are_usable_by_name_from_a_recipe(fresh_python):
    result = subprocess.run([fresh_python, "-c", USE_BY_NAME], capture_output=True, text=True, check=True)
    numbers = json.loads(result.stdout)
    assert numbers["rewards"] == [1.0, 0.0, 1.0, 0.0]
    assert numbers["advantages"] == [0.25, -0.25, 0.25, -0.25]


def test_an_installed_plugins_experiment_is_read_by_name(fresh_python):
    read = ("import json; from agentrl_plugins.compare.experiments import experiment; "
            "chosen = experiment('demo_baselines'); "
            "print(json.dumps([chosen.recipes, chosen.overrides, chosen.predictions[0].higher]))")
    done = subprocess.run([fresh_python, "-c", read], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [["demo_guess", "grpo"], ["train.steps=2"], "demo_guess"]


RESOLVE = textwrap.dedent("""
    import json, sys
    from agentrl_plugins.models import run_model
    from agentrl_plugins.recipe import load_recipe

    recipe = load_recipe("demo_guess", {"train.model": "demo_tiny", "train.seed": 3})
    named = run_model(recipe, None, prepare=False)
    existed = named.exists()
    built = run_model(recipe, None, prepare=True)
    local = run_model(recipe, sys.argv[1], prepare=True)
    print(json.dumps({"named": str(named), "existed": existed, "built": str(built),
                      "config": json.loads((built / "config.json").read_text()), "local": str(local)}))
""")


def test_a_registered_model_resolves_by_name_and_a_local_folder_by_path(fresh_python, tmp_path):
    local = tmp_path / "my-model"
    local.mkdir()
    done = subprocess.run([fresh_python, "-c", RESOLVE, str(local)], capture_output=True, text=True, check=True,
                          env={"AGENTRL_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"})
    resolved = json.loads(done.stdout)
    assert resolved["named"] == resolved["built"] == str(tmp_path / "cache" / "demo-tiny-seed3")
    assert resolved["existed"] is False and resolved["config"] == {"model_type": "demo", "seed": 3}
    assert resolved["local"] == str(local)
