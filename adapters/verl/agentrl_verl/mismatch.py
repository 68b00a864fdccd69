"""The sampler/learner mismatch figures through verl's metrics: the core's sums, one verl metric each.

Where verl scores the old policy in a pass of its own, the driver takes the sums of that pass's log-probs against
the sampler's (:func:`driver_metrics`); where the on-policy update skips that pass, each micro-batch's loss takes
them from the update's own forward (:mod:`agentrl_verl.verl_plugin.on_policy`), as ``SUM`` metrics (``MAX`` for the
gap), which verl adds over micro-batches and averages over ranks: the figures do not change when every sum is
scaled alike. The recorder turns the logged sums back into the figures (:func:`figures_of`).
"""

from __future__ import annotations

from typing import Any

from agentrl_plugins.algorithms.mismatch import MISMATCH_FIGURES, MismatchSums

KEY = "agentrl/mismatch/"
"""The sums' metric names as a worker's loss logs them (verl prefixes ``actor/``)."""
LOGGED_KEY = "actor/" + KEY
"""The sums' names among the step's logged metrics."""


def driver_metrics(sums: MismatchSums) -> dict[str, float]:
    """The sums as the step's logged metrics."""
    return {LOGGED_KEY + name: getattr(sums, name) for name in MismatchSums.names()}


def figures_of(logged: dict[str, Any]) -> dict[str, float | None]:
    """The mismatch figures of a step's logged metrics (each None when the step logged no sums)."""
    if not all(LOGGED_KEY + name in logged for name in MismatchSums.names()):
        return dict.fromkeys(MISMATCH_FIGURES)
    return MismatchSums(*(float(logged[LOGGED_KEY + name]) for name in MismatchSums.names())).figures()
