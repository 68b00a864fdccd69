"""Registers every experiment file shipped with the core (``recipes/experiments/``, beside the recipes)."""

from __future__ import annotations

from agentrl_plugins.components import ExperimentFile
from agentrl_plugins.default_plugins.recipes import recipes_dir
from agentrl_plugins.hookspecs import hookimpl
from agentrl_plugins.recipe import read_toml


@hookimpl
def agentrl_register_experiments(register):
    for path in sorted((recipes_dir() / "experiments").glob("*.toml")):
        register(ExperimentFile(path.stem, path, read_toml(path).get("description", path.stem).split("\n")[0]))
