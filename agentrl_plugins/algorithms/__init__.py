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
from agentrl_plugins.algorithms.policy_loss import SurrogateResult, clipped_surrogate

__all__ = [
    "COMPACT_FILTER_REASONS",
    "LOSS_AGG_MODES",
    "LR_SCHEDULES",
    "TERMINATION_REASONS",
    "CorrectionResult",
    "SurrogateResult",
    "aggregate_loss",
    "clipped_surrogate",
    "compact_filter",
    "dr_grpo",
    "geometric_sequence_mask",
    "grpo",
    "icepop",
    "lr_multiplier",
    "none",
    "rloo",
    "sequence_tis",
    "token_tis",
]
