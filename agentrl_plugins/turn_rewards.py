"""The recipe's turn reward (``turn_reward.name``), bound to its parameters and added to the environment's own."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from agentrl_plugins.algorithm import named_params
from agentrl_plugins.errors import AgentRLError, RecipeError
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.types import TurnOutcome

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

TurnRewardFn = Callable[[Sequence[TurnOutcome], Mapping[str, float]], list[TurnOutcome]]
"""The episode's turns and its start state's signals in; the turns with their rewards out."""
TURN_REWARD_PARAMETERS = ("signal",)
"""The recipe's ``turn_reward`` parameters; each turn reward takes the ones its signature names (and the
``advantage.gamma`` of the returns, as ``gamma``, when it names that)."""


def _compute(recipe: Recipe, plugin_manager: PluginManager | None) -> Callable[..., Any]:
    if plugin_manager is None:
        from agentrl_plugins.plugins import get_plugin_manager

        plugin_manager = get_plugin_manager()
    return plugin_manager.get("turn_reward", recipe.turn_reward.name).compute


def turn_reward_params(recipe: Recipe, plugin_manager: PluginManager | None = None) -> dict[str, Any]:
    """The recipe parameters its turn reward takes, by name: ``turn_reward.*`` and ``advantage.gamma``."""
    compute = _compute(recipe, plugin_manager)
    params = named_params(compute, recipe.turn_reward, TURN_REWARD_PARAMETERS)
    params.update(named_params(compute, recipe.advantage, ("gamma",)))
    if "signal" in params and not params["signal"]:
        raise RecipeError(f"{recipe.name}: turn_reward.name = {recipe.turn_reward.name!r} reads a state signal: "
                          "name it with turn_reward.signal (one the environment emits per turn)")
    return params


def build_turn_reward(recipe: Recipe, plugin_manager: PluginManager | None = None) -> TurnRewardFn | None:
    """The recipe's turn reward; None when it names ``none``."""
    name = recipe.turn_reward.name
    if name == "none":
        return None
    compute, params = _compute(recipe, plugin_manager), turn_reward_params(recipe, plugin_manager)

    def rewarded(turns: Sequence[TurnOutcome], initial_signals: Mapping[str, float]) -> list[TurnOutcome]:
        rewards = list(compute(turns, initial_signals, **params))
        if len(rewards) != len(turns):
            raise AgentRLError(f"turn reward {name!r} returned {len(rewards)} rewards for {len(turns)} turns")
        bad = [value for value in rewards
               if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value))]
        if bad:
            raise AgentRLError(f"turn reward {name!r} must return a finite number or None per turn, got {bad[:3]}")
        return [dataclasses.replace(turn, reward=combined(turn.reward, value)) for turn, value in zip(turns, rewards)]

    return rewarded


def combined(environment: float | None, recipe: float | None) -> float | None:
    """The environment's reward for a turn plus the recipe's; None when neither gives one."""
    if environment is None or recipe is None:
        return recipe if environment is None else environment
    return environment + float(recipe)
