"""A mismatch correction: each policy token's sampler/learner ratio, clamped into [low, high]."""

import torch
from torch import Tensor

from agentrl_plugins.algorithms.corrections import CorrectionResult


def band_clip(learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor,
              low: float = 0.5, high: float = 2.0) -> CorrectionResult:
    """w_t = clamp(exp(learner_logp - sampler_logp), low, high) on policy tokens, 0 elsewhere.

    The recipe's ``correction.low`` and ``correction.high`` arrive as ``low`` and ``high``.
    """
    with torch.no_grad():
        on = mask.to(torch.bool)
        log_ratio = torch.where(on, learner_logp - sampler_logp, 0.0).clamp(-20, 20)
        ratio = log_ratio.exp()
        tokens = on.sum().clamp(min=1)
        metrics = {  # the three figures every adapter reports
            "capped_fraction": (((ratio < low) | (ratio > high)) & on).sum().item() / tokens.item(),
            "masked_fraction": 0.0,
            "mismatch_kl": (torch.where(on, ratio - 1 - log_ratio, 0.0).sum() / tokens).item(),
        }
        return CorrectionResult(torch.where(on, ratio.clamp(low, high), 0.0), mask, metrics)
