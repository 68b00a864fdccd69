"""A real plugin distribution, installed into a fresh environment, shows up and works by name."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

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
    root = tmp_path_factory.mktemp("fresh-env")
    venv.create(root, with_pip=True)
    python = root / "bin" / "python"
    site_packages = Path(subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True).strip())
    (site_packages / "core_env.pth").write_text(f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(FIXTURE)],
                   check=True)
    return python


def test_the_fixture_is_not_visible_to_the_test_environment_itself():
    listing = subprocess.run([sys.executable, "-m", "agentrl_plugins", "plugins", "--json"],
                             capture_output=True, text=True, check=True).stdout
    assert "agentrl-demo-plugin" not in listing


def test_installed_plugin_appears_in_agentrl_plugins(fresh_python):
    listing = json.loads(subprocess.run([fresh_python, "-m", "agentrl_plugins", "plugins", "--json"],
                                        capture_output=True, text=True, check=True).stdout)
    demo = {(row["kind"], row["name"]) for row in listing if row["distribution"] == "agentrl-demo-plugin"}
    assert demo == {("environment", "guess"), ("verifier", "exact_guess"), ("advantage", "half_baseline"),
                    ("recipe", "demo_guess")}
    assert all(row["status"] == "ok" for row in listing)


def test_installed_plugin_components_are_usable_by_name_from_a_recipe(fresh_python):
    result = subprocess.run([fresh_python, "-c", USE_BY_NAME], capture_output=True, text=True, check=True)
    numbers = json.loads(result.stdout)
    assert numbers["rewards"] == [1.0, 0.0, 1.0, 0.0]
    assert numbers["advantages"] == [0.25, -0.25, 0.25, -0.25]
