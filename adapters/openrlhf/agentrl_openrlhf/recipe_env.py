"""Which recipe the code inside OpenRLHF's processes follows, and which run folder it writes: two variables.

OpenRLHF loads the agent executor and the reward file by path, with no arguments, so the
recipe travels as ``AGENTRL_OPENRLHF_RECIPE``: a registered recipe name (``deepswe_grpopp``)
or the path of a run folder's ``recipe.toml`` (``agentrl run`` passes its own), read by the core's
:func:`~agentrl_plugins.runs.rundir.read_recipe_file` as every framework's workers read theirs.
The runtime-env hook forwards the variable to every Ray worker; a path must be readable where
the workers run, as OpenRLHF's own ``--train.agent_func_path`` must.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import read_recipe_file

RECIPE_ENV = "AGENTRL_OPENRLHF_RECIPE"
RUN_DIR_ENV = "AGENTRL_OPENRLHF_RUN_DIR"
"""The run folder that :mod:`agentrl_openrlhf.recorder` writes into (``agentrl run`` sets it)."""


def recipe_from_env() -> Recipe:
    """The recipe ``AGENTRL_OPENRLHF_RECIPE`` names; a clear error when it is unset."""
    value = os.environ.get(RECIPE_ENV)
    if not value:
        raise AgentRLError(
            f"{RECIPE_ENV} is not set: set it to a recipe name (e.g. deepswe_grpopp) or a recipe .toml path "
            "before launching OpenRLHF (agentrl run RECIPE --framework openrlhf sets it for you)"
        )
    return read_recipe_file(Path(value)) if value.endswith(".toml") else load_recipe(value)
