"""Models as a plugin kind: registered names resolve through their plugin, anything else is a local folder."""

from __future__ import annotations

import pytest

from agentrl_plugins.errors import ModelUnavailableError
from agentrl_plugins.models import resolve_model, run_model
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import load_recipe

TINY_MODEL = """
from pathlib import Path
from agentrl_plugins import hookimpl
from agentrl_plugins.components import Model

CALLS = []

def resolve(*, seed, prepare):
    CALLS.append((seed, prepare))
    return Path(__file__).with_name(f"tiny-seed{seed}")

@hookimpl
def agentrl_register_models(register):
    register(Model("tiny_lm", resolve, "A tiny model for tests."))
"""


def test_a_registered_model_gets_the_runs_seed_and_whether_to_prepare(fake_distribution):
    root = fake_distribution("fake-models", {"tiny": TINY_MODEL})
    manager = PluginManager()
    recipe = load_recipe("grpo", {"train.model": "tiny_lm", "train.seed": 7}, plugin_manager=manager)
    assert run_model(recipe, None, prepare=False, plugin_manager=manager) == (root / "tiny-seed7").resolve()
    import fake_models_tiny

    assert fake_models_tiny.CALLS == [(7, False)]
    assert manager.registry("model").entry("tiny_lm").distribution == "fake-models"


def test_a_local_folder_is_the_default_resolver_and_overrides_the_recipe(tmp_path):
    manager = PluginManager(load_entry_points=False)
    recipe = load_recipe("grpo", {"train.model": str(tmp_path)}, plugin_manager=manager)
    assert run_model(recipe, None, prepare=True, plugin_manager=manager) == tmp_path.resolve()
    other = tmp_path / "other"
    other.mkdir()
    assert run_model(recipe, str(other), prepare=True, plugin_manager=manager) == other.resolve()


def test_an_unknown_model_names_the_registered_ones_and_the_close_match(fake_distribution, tmp_path):
    fake_distribution("fake-models", {"tiny": TINY_MODEL})
    manager = PluginManager()
    with pytest.raises(ModelUnavailableError, match=r"model 'tiny_llm': not a registered model \(tiny_lm\) and not a "
                                                    r"local model folder .*Did you mean 'tiny_lm'"):
        resolve_model("tiny_llm", seed=0, prepare=False, plugin_manager=manager)
    with pytest.raises(ModelUnavailableError, match="not a local model folder"):
        resolve_model(str(tmp_path / "missing"), seed=0, prepare=False, plugin_manager=manager)
