"""Your own verl config against the recipe: the core's one rule (:mod:`agentrl_plugins.user_config`), applied
in verl's trainer before anything is built.

For each setting the recipe or the adapter decides (:func:`agentrl_verl.config.decided`): left at verl's
default, the recipe's value is set and listed; equal to it, nothing happens; any other value is a
:class:`~agentrl_plugins.user_config.ConfigConflictError` naming every such setting. verl's defaults are its
own ``ppo_trainer`` config, composed by Hydra with no overrides. verl has resolved its interpolations by
then, so a default that follows a changed setting (``rollout.response_length`` follows
``data.max_response_length``) is re-derived and listed too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.user_config import SettingChange, reconcile, same

from agentrl_verl.config import decided

CONFLICT_REMEDY = ("Drop or change these settings in your command or config, or change the recipe instead "
                   "(agentrl verl prepare RECIPE -o KEY=VALUE, then the command it prints).")


@functools.cache
def verl_defaults() -> DictConfig:
    """verl's ``ppo_trainer`` config with no overrides, its interpolations unresolved."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return compose("ppo_trainer")
    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose("ppo_trainer")


def value_at(config: DictConfig, key: str) -> Any:
    """The plain value at dotted ``key`` (None when absent)."""
    value = OmegaConf.select(config, key, default=None)
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value


def interpolations(config: DictConfig, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Every leaf of ``config`` whose value is an interpolation: its dotted key and the interpolation's text."""
    for key in config.keys():
        path = f"{prefix}{key}"
        if OmegaConf.is_interpolation(config, key):
            yield path, str(config._get_node(key)._value())
        else:
            child = config._get_node(key)
            if isinstance(child, DictConfig):
                yield from interpolations(child, path + ".")


def followers(changes: list[SettingChange], config: DictConfig, defaults: DictConfig) -> list[SettingChange]:
    """The defaults that interpolate a changed setting, where ``config`` still holds their old value."""
    if not changes:
        return []
    updated = defaults.copy()
    with open_dict(updated):
        for change in changes:
            OmegaConf.update(updated, change.name, change.value, force_add=True)
    found = []
    for key, text in interpolations(defaults):
        source = next((c.name for c in changes if re.search(re.escape(c.name) + r"(?![\w.])", text)), None)
        if source is None:
            continue
        try:
            old, new = value_at(defaults, key), value_at(updated, key)
        except Exception:
            continue
        if not same(old, new) and same(value_at(config, key), old):
            found.append(SettingChange(key, old, new, f"follows {source}"))
    return found


def reconcile_config(config: DictConfig, recipe: Recipe) -> list[SettingChange]:
    """Apply the rule to ``config`` in place; returns what changed, or raises naming every conflict."""
    settings = decided(recipe)
    defaults = verl_defaults()
    changes = reconcile(settings, {s.name: value_at(config, s.name) for s in settings},
                        {s.name: value_at(defaults, s.name) for s in settings},
                        where="verl config", recipe=recipe.name, remedy=CONFLICT_REMEDY)
    changes += followers(changes, config, defaults)
    with open_dict(config):
        for change in changes:
            OmegaConf.update(config, change.name, change.value, force_add=True)
    return changes
