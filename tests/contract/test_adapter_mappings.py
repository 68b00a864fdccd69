"""The mapping contract, over every framework adapter registered where these tests run (each framework's own
environment runs them) and every registered recipe, with and without the laptop profile: exactly one row per
recipe key, with the recipe's value and a known status, and no framework setting decided twice."""

from __future__ import annotations

import pytest

from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.testing import mapping_problems

MANAGER = get_plugin_manager()
ADAPTERS = [entry.record for entry in MANAGER.registry("adapter")]
RECIPES = [(entry.record.name, profile) for entry in MANAGER.registry("recipe")
           for profile in (None, *(["laptop"] if "laptop" in load_recipe(entry.record.name).profiles else []))]


def test_an_adapter_is_registered_here():
    assert ADAPTERS, "these tests run in a framework's environment, where its adapter is installed"


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda adapter: adapter.name)
@pytest.mark.parametrize(("recipe", "profile"), RECIPES)
def test_one_row_per_recipe_key(adapter, recipe, profile):
    assert mapping_problems(adapter.factory(), load_recipe(recipe, profile=profile)) == []
