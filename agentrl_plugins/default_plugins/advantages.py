"""Registers the built-in advantage estimators."""

from agentrl_plugins.algorithms import advantages, credit
from agentrl_plugins.components import AdvantageEstimator
from agentrl_plugins.hookspecs import hookimpl


@hookimpl
def agentrl_register_advantages(register):
    register(AdvantageEstimator("grpo", advantages.grpo, "Group mean baseline divided by the group std (GRPO)."))
    register(AdvantageEstimator("dr_grpo", advantages.dr_grpo, "Group mean baseline, no std division (Dr. GRPO)."))
    register(AdvantageEstimator("rloo", advantages.rloo,
                                "Leave-one-out baseline: the mean of the other samples (RLOO)."))
    register(AdvantageEstimator("gigpo", credit.gigpo,
                                "GiGPO: GRPO's episode advantage plus a step advantage within equal anchor states.",
                                level="turn", needs_states=True))
    register(AdvantageEstimator("grpo_turns", credit.grpo_turns,
                                "GRPO on each turn's return-to-go (turn rewards and the outcome), group statistics "
                                "of whole returns.", level="turn"))
