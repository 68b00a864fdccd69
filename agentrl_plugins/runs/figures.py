"""The step figures that come from the loss's tensors, by their one definition (:class:`StepMetrics`): the
core's parity reference computes them with these functions, and each adapter's parity side checks that its
recorder, reading the framework's own outputs, gets the same numbers."""

from __future__ import annotations

from torch import Tensor

from agentrl_plugins.algorithms.policy_loss import clip_binds

__all__ = ["EPISODE_FIGURES", "FIGURES", "LOSS_FIGURES", "clip_binds", "loss_token_mean"]

EPISODE_FIGURES = ("train_reward", "hacked_fraction", "filtered_fraction")
LOSS_FIGURES = ("clip_fraction", "is_capped_fraction", "entropy", "policy_tokens")
FIGURES = EPISODE_FIGURES + LOSS_FIGURES
"""The ``metrics.jsonl`` figures a training step makes, checked per framework on the parity batch."""


def loss_token_mean(values: Tensor, mask: Tensor) -> float | None:
    """The mean of ``values`` over the loss tokens (``mask`` > 0); None when there is none."""
    count = (mask > 0).sum().item()
    return float((values * (mask > 0)).sum().item() / count) if count else None
