"""The ``verl`` adapter: describe a recipe as ``main_ppo`` Hydra overrides, or launch it."""

from __future__ import annotations

from pathlib import Path

from agentrl_plugins.adapter import FrameworkConfig, RunOptions
from agentrl_plugins.loggers import check_loggers
from agentrl_plugins.recipe_schema import Recipe

from agentrl_verl.config import describe
from agentrl_verl.verl_plugin.registration import check_registration


class VerlAdapter:
    def __init__(self):
        check_registration()

    def describe(self, recipe: Recipe) -> FrameworkConfig:
        return describe(recipe)

    def run(self, recipe: Recipe, options: RunOptions) -> Path | None:
        from agentrl_verl.launch import launch

        check_loggers(options.report_to)
        return launch(recipe, options)
