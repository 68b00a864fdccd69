"""Your own verl config against the recipe: the core's one rule (:mod:`agentrl_plugins.user_config`), applied
in ``main_ppo``'s driver before Ray starts (:func:`check_in_driver`), else in verl's trainer.

For each setting the recipe or the adapter decides (:func:`agentrl_verl.config.decided`): not among your
overrides and at verl's default, the recipe's value is set; equal to it, nothing happens; any other value, or
one you typed (Hydra's override list), whatever it equals, is a
:class:`~agentrl_plugins.user_config.ConfigConflictError` naming every such setting. verl's defaults are its
own ``ppo_trainer`` config, composed by Hydra with no overrides. A default that follows a changed setting
(``rollout.response_length`` follows ``data.max_response_length``) is re-derived and listed too, unless you
typed it. The origin table lists each setting as the recipe's, yours, verl's default or the prepared command's
(``run.json``'s ``command``: the CPU backend's choices and the launch's paths).
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.runs.rundir import RunDir, read_recipe_file
from agentrl_plugins.user_config import (
    CPU,
    LAUNCH,
    Setting,
    SettingChange,
    origins,
    own_words,
    reconcile,
    same,
    settings_table,
)

from agentrl_verl.cluster import fit_cluster
from agentrl_verl.config import ENTRYPOINT, decided
from agentrl_verl.cpu.overrides import cpu_overrides
from agentrl_verl.names import SETTINGS_KEY
from agentrl_verl.recipe_file import RECIPE_KEY, select

CHECKED_KEY = f"{SETTINGS_KEY}.checked_in_driver"
"""Set by :func:`check_in_driver` once the driver has applied the rule: verl's trainer leaves the config as it is."""
WHERE = "verl config"
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


def followers(changes: list[SettingChange], config: DictConfig, defaults: DictConfig,
              typed: Collection[str] = ()) -> list[SettingChange]:
    """The defaults that interpolate a changed setting, where ``config`` still holds their old value and the user
    did not type them."""
    if not changes:
        return []
    updated = defaults.copy()
    with open_dict(updated):
        for change in changes:
            OmegaConf.update(updated, change.name, change.value, force_add=True)
    found = []
    for key, text in interpolations(defaults):
        if key in typed:
            continue
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


def typed_overrides(words: Sequence[str]) -> dict[str, str]:
    """Each setting Hydra's override ``words`` set (its key, without ``+``, ``++`` or ``~``) and the word that set it
    last."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return {o.key_or_group: o.input_line or "" for o in OverridesParser.create().parse_overrides(list(words))}


def reconcile_config(config: DictConfig, recipe: Recipe, typed: Collection[str] = ()) -> list[SettingChange]:
    """Apply the rule to ``config`` in place; returns what changed, or raises naming every conflict. ``typed``: the
    settings the user's overrides set (each the user's, whatever it equals)."""
    settings = decided(recipe)
    defaults = verl_defaults()
    changes = reconcile(settings, {s.name: value_at(config, s.name) for s in settings},
                        {s.name: value_at(defaults, s.name) for s in settings},
                        where=WHERE, recipe=recipe.name, remedy=CONFLICT_REMEDY, typed=typed)
    changes += followers(changes, config, defaults, typed)
    with open_dict(config):
        for change in changes:
            OmegaConf.update(config, change.name, change.value, force_add=True)
    return changes


def project_origins(recipe: Recipe, typed: dict[str, str], yours: Collection[str]) -> dict[str, str]:
    """The typed settings only the prepared command's words set (not among ``yours``, the keys the user's own words
    set): the CPU backend's choices and the launch's."""
    cpu = {key.lstrip("+") for key in cpu_overrides(recipe.train.seed, rollout="vllm")}
    return {key: CPU if key in cpu else LAUNCH for key in typed if key not in yours}


def setting_rows(config: DictConfig, recipe: Recipe, changes: list[SettingChange], typed: dict[str, str],
                 yours: Collection[str] = ()) -> list[Setting]:
    """The origin table of ``config`` after the rule: the recipe's settings, the defaults that follow them, then
    every other typed setting (``yours``: the keys the user's own words set, the others are the prepared
    command's)."""
    settings, defaults = decided(recipe), verl_defaults()
    values = {key: plain_at(config, key) for key in typed}
    return origins(settings, {key: plain_at(defaults, key) for key in [*values, *(s.name for s in settings)]},
                   values, project_origins(recipe, typed, yours),
                   [c for c in changes if c.source.startswith("follows ")])


def plain_at(config: DictConfig, key: str) -> Any:
    """:func:`value_at`, or the text of an interpolation that cannot be resolved on its own."""
    try:
        return value_at(config, key)
    except OmegaConfBaseException:
        return str(OmegaConf.select(config, key, default=None, throw_on_resolution_failure=False))


def record(run: RunDir, recipe: Recipe, changes: list[SettingChange], rows: list[Setting],
           words: Sequence[str] = ()) -> None:
    """Print the origin table where the user looks and keep it (and the changes, and the command as it ran with
    its override ``words``) in ``run.json``."""
    print(settings_table(rows, WHERE, recipe.name), file=sys.stderr, flush=True)
    if run.run_file.is_file():
        run.update_info(config_changes=[[c.name, repr(c.default), repr(c.value), c.source] for c in changes],
                        settings=[row.row() for row in rows], command_as_run=[sys.executable, *ENTRYPOINT[1:], *words])


def prepared_words(run: RunDir) -> list[str]:
    """The override words of the command ``agentrl verl prepare`` wrote for ``run`` (none for a command of one's
    own)."""
    command = run.run_info().get("command") if run.run_file.is_file() else None
    return list(command[len(ENTRYPOINT):]) if command else []


def check_in_driver(config: DictConfig) -> bool:
    """In ``main_ppo``'s driver, before Ray starts: the rule on ``config`` with the overrides the user typed
    (Hydra's task overrides), the origin table printed and recorded; whether it ran (a config naming a recipe, in a
    Hydra job). A conflict is raised here, in the driver, as a ``ConfigConflictError``; then the Ray cluster is
    fitted and checked (:func:`~agentrl_verl.cluster.fit_cluster`)."""
    from hydra.core.hydra_config import HydraConfig

    path = select(config, RECIPE_KEY)
    if path is None or select(config, CHECKED_KEY) or not HydraConfig.initialized():
        return False
    recipe, run = read_recipe_file(Path(str(path))), RunDir(Path(str(path)).parent)
    words = list(HydraConfig.get().overrides.task)
    typed = typed_overrides(words)
    changes = reconcile_config(config, recipe, typed)
    yours = set(typed_overrides(own_words(words, prepared_words(run))))
    record(run, recipe, changes, setting_rows(config, recipe, changes, typed, yours), words)
    fit_cluster(config, yours)
    with open_dict(config):
        OmegaConf.update(config, CHECKED_KEY, True, force_add=True)
    return True
