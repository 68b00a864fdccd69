"""The ``+agentrl.*`` Hydra settings: the recipe sections verl has no keys for.

The launcher writes them; the agent loop and the advantage estimators read them
back from verl's config. Under ``agentrl`` go ``recipe`` (the recipe's name) and
the recipe keys of ``SETTINGS``, validated by the core's recipe schema (unknown
keys are errors, missing ones take the schema's defaults). A top-level key,
because extra keys under ``algorithm`` break verl's dataclass conversion.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from agentrl_plugins.recipe import build_recipe, get_value
from agentrl_plugins.recipe_schema import Recipe

from agentrl_verl.names import SETTINGS_KEY

SETTINGS = (
    "environment.name", "environment.options", "verifier.names", "verifier.combine", "advantage.masked_in_baseline",
    "filtering.compact", "filtering.reasons",
    "rollout.max_turns", "rollout.max_new_tokens_per_turn", "rollout.max_context_tokens", "rollout.timeout_s",
)
"""The recipe keys verl has no setting for: the environment and its options, the episode runner's limits, the
verifier, filtering, the baseline."""


def settings_overrides(recipe: Recipe) -> dict[str, Any]:
    """``+agentrl.*`` overrides that carry ``recipe``'s agent-loop and estimator settings."""
    values = {key: get_value(recipe, key) for key in SETTINGS}
    return {f"+{SETTINGS_KEY}.{key}": value for key, value in {"recipe": recipe.name, **values}.items()}


def recipe_from_settings(settings: Any) -> Recipe:
    """The recipe that the ``agentrl`` settings describe (schema defaults where a key is absent)."""
    raw = dict(OmegaConf.to_container(settings, resolve=True) if isinstance(settings, DictConfig) else settings or {})
    name = raw.pop("recipe", SETTINGS_KEY)
    return build_recipe({"name": name, "description": f"+{SETTINGS_KEY} settings", **raw}, origin=f"+{SETTINGS_KEY}")


def select(config: Any, key: str) -> Any:
    """``key`` (dotted, from the root) of the Hydra config that ``config`` is a node of; None without one."""
    if not isinstance(config, DictConfig):
        return None
    return OmegaConf.select(config._get_root(), key, default=None)


def recipe_from_config(config: Any) -> Recipe:
    """The recipe under ``agentrl`` at the root of ``config`` (any node of verl's config, or None)."""
    return recipe_from_settings(select(config, SETTINGS_KEY))
