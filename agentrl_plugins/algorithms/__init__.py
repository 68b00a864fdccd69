"""Pure-torch reference algorithms that the framework adapters are checked against."""

from agentrl_plugins.algorithms.advantages import dr_grpo, grpo, rloo
from agentrl_plugins.algorithms.aggregation import LOSS_AGG_MODES, aggregate_loss
from agentrl_plugins.algorithms.corrections import (
    CorrectionResult,
    geometric_sequence_mask,
    icepop,
    none,
    sequence_tis,
    token_tis,
)
from agentrl_plugins.algorithms.filtering import COMPACT_FILTER_REASONS, TERMINATION_REASONS, compact_filter
from agentrl_plugins.algorithms.lr_schedule import LR_SCHEDULES, lr_multiplier
from agentrl_plugins.algorithms.policy_loss import (
    PolicyLossInputs,
    PolicyLossResult,
    cispo,
    clipped_surrogate,
    gspo,
    ppo_clip,
)

__all__ = [
    "COMPACT_FILTER_REASONS",
    "LOSS_AGG_MODES",
    "LR_SCHEDULES",
    "TERMINATION_REASONS",
    "CorrectionResult",
    "PolicyLossInputs",
    "PolicyLossResult",
    "aggregate_loss",
    "cispo",
    "clipped_surrogate",
    "compact_filter",
    "dr_grpo",
    "geometric_sequence_mask",
    "grpo",
    "gspo",
    "icepop",
    "lr_multiplier",
    "none",
    "ppo_clip",
    "rloo",
    "sequence_tis",
    "token_tis",
]
