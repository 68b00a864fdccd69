"""The ``verl`` adapter: describe a recipe as ``main_ppo`` Hydra overrides, or launch it."""

from __future__ import annotations

from pathlib import Path

from agentrl_plugins.adapter import FrameworkConfig, RunOptions
from agentrl_plugins.loggers import check_loggers
from agentrl_plugins.recipe_schema import Recipe

from agentrl_verl.config import describe
from agentrl_verl.registration import check_registration


class VerlAdapter:
    """Describing a recipe checks first that ``import verl`` registers agentrl's names; a launch checks it while
    verl starts (:func:`agentrl_verl.launch.launch`)."""

    def describe(self, recipe: Recipe) -> FrameworkConfig:
        check_registration()
        return describe(recipe)

    def run(self, recipe: Recipe, options: RunOptions) -> Path | None:
        from agentrl_verl.launch import launch

        check_loggers(options.report_to)
        return launch(recipe, options)
