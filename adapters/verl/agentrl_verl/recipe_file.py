"""The recipe inside verl's processes: one Hydra key naming the run folder's ``recipe.toml``.

verl hands every worker its config, so the launcher adds ``+agentrl.recipe=RUN_DIR/recipe.toml``
and the agent loop and the estimators read the recipe through the core's
:func:`~agentrl_plugins.runs.rundir.read_recipe_file` (a top-level key, because extra keys under
``algorithm`` break verl's dataclass conversion). The policy loss gets only the actor's config, so an
injected loss finds the same path under ``actor_rollout_ref.actor.policy_loss.rollout_correction``
(appended with ``+``; that mapping is not in verl's struct). One file, one loader: no settings list,
no values re-encoded for the trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import read_recipe_file

from agentrl_verl.names import SETTINGS_KEY

RECIPE_KEY = f"{SETTINGS_KEY}.recipe"
LOSS_RECIPE_KEY = "actor_rollout_ref.actor.policy_loss.rollout_correction.agentrl_recipe"
UNLAUNCHED = Path("RUN_DIR") / "recipe.toml"
"""What the overrides name before a launch has chosen its run folder (``agentrl recipes show``)."""


def recipe_overrides(recipe_file: Path, injected_loss: bool) -> dict[str, str]:
    """The overrides that point verl's processes at ``recipe_file``."""
    overrides = {f"+{RECIPE_KEY}": str(recipe_file)}
    if injected_loss:
        overrides[f"+{LOSS_RECIPE_KEY}"] = str(recipe_file)
    return overrides


def select(config: Any, key: str) -> Any:
    """``key`` (dotted, from the root) of the Hydra config that ``config`` is a node of; None without one."""
    if not isinstance(config, DictConfig):
        return None
    return OmegaConf.select(config._get_root(), key, default=None)


def checked_path(path: Any, where: str) -> Path:
    """``path`` as the recipe file's path; a clear error naming the key when verl's config lacks it."""
    if path is None:
        raise AgentRLError(f"verl's config has no {where}: launch with `agentrl run RECIPE --framework verl`, or add "
                           f"+{RECIPE_KEY}=RUN_DIR/recipe.toml (a run folder's recipe file) to verl's command")
    return Path(str(path))


def recipe_path(config: Any) -> Path:
    """The recipe file that ``agentrl.recipe`` at the root of ``config`` (any node of verl's config) names."""
    return checked_path(select(config, RECIPE_KEY), RECIPE_KEY)


def recipe_from_config(config: Any) -> Recipe:
    return read_recipe_file(recipe_path(config))


def recipe_from_actor_config(actor: Any) -> Recipe:
    """The recipe an injected policy loss reads: the path carried in the actor's policy-loss config."""
    carried = actor.policy_loss.rollout_correction
    path = carried.get("agentrl_recipe") if isinstance(carried, Mapping) else getattr(carried, "agentrl_recipe", None)
    return read_recipe_file(checked_path(path, LOSS_RECIPE_KEY))
