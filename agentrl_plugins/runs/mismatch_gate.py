"""The recipe's gate on the sampler/learner mismatch, checked on every recorded step in every framework."""

from __future__ import annotations

import warnings

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe_schema import MismatchSection
from agentrl_plugins.runs.metrics import StepMetrics


class MismatchGateError(AgentRLError):
    """A step's sampler/learner correlation fell below the recipe's ``mismatch.min_pearson`` (gate ``stop``)."""


class MismatchWarning(UserWarning):
    """A step's sampler/learner correlation fell below the recipe's ``mismatch.min_pearson`` (gate ``warn``)."""


def check_mismatch(row: StepMetrics, gate: MismatchSection) -> None:
    """Warn or stop when ``row``'s correlation is below the gate's threshold (nothing when it was not measured)."""
    pearson = row.mismatch_pearson
    if gate.gate == "off" or pearson is None or pearson >= gate.min_pearson:
        return
    message = (f"step {row.step}: the sampler's and the learner's token probabilities correlate at {pearson:.6f}, "
               f"below mismatch.min_pearson = {gate.min_pearson} (k3 KL {row.mismatch_k3_kl:.3g}, largest log-prob "
               f"gap {row.mismatch_gap_max:.3g}): the sampler is not serving the learner's policy (stale weights, a "
               f"different tokenizer or precision)")
    if gate.gate == "stop":
        raise MismatchGateError(message + "; the run stops (mismatch.gate = 'stop'); the step's row is kept")
    warnings.warn(message + " (mismatch.gate = 'warn'; 'stop' ends the run here)", MismatchWarning, stacklevel=2)
