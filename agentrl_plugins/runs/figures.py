"""The step figures, by their one definition (:class:`StepMetrics`): the core's parity reference computes
them (the clip with :func:`~agentrl_plugins.algorithms.policy_loss.clip_binds`, means with
:func:`loss_token_mean`), and each adapter's parity side checks that its recorder, reading the framework's
own outputs, gets the same numbers."""

from __future__ import annotations

from torch import Tensor

FIGURES = ("train_reward", "hacked_fraction", "filtered_fraction", "clip_fraction", "is_capped_fraction", "entropy",
           "policy_tokens")
"""The ``metrics.jsonl`` figures a training step makes, checked per framework on the parity batch."""


def loss_token_mean(values: Tensor, mask: Tensor) -> float | None:
    """The mean of ``values`` over the loss tokens (``mask`` > 0); None when there is none."""
    count = (mask > 0).sum().item()
    return float((values * (mask > 0)).sum().item() / count) if count else None
