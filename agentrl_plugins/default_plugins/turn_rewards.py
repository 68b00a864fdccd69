"""Registers the built-in turn rewards."""

from agentrl_plugins.algorithms import turn_rewards
from agentrl_plugins.components import TurnReward
from agentrl_plugins.hookspecs import hookimpl


@hookimpl
def agentrl_register_turn_rewards(register):
    register(TurnReward("none", turn_rewards.no_turn_reward, "No turn reward: each turn keeps the environment's."))
    register(TurnReward("potential", turn_rewards.potential,
                        "Potential-based shaping gamma Phi(s') - Phi(s), Phi a state signal, 0 at the episode's end."))
