"""The ``trl`` adapter: describe a recipe as a GRPOConfig, or run it."""

from __future__ import annotations

import json
from pathlib import Path

from agentrl_plugins.adapter import FrameworkConfig, RunOptions
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe_schema import Recipe

from agentrl_trl.config import describe


class TRLAdapter:
    def describe(self, recipe: Recipe) -> FrameworkConfig:
        return describe(recipe)

    def run(self, recipe: Recipe, options: RunOptions) -> Path | None:
        if (options.ranks or 1, options.nodes) != (1, 1):
            raise AgentRLError(f"--ranks {options.ranks} --nodes {options.nodes}: agentrl's TRL adapter trains in one "
                               "process; several data-parallel ranks run through verl or OpenRLHF "
                               "(--framework verl|openrlhf)")
        if options.dry_run:
            print(json.dumps(describe(recipe).native, indent=2))
            return None
        from agentrl_trl.runner import run

        return run(recipe, options)
