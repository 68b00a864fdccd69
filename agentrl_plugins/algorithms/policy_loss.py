"""The PPO / DAPO clipped surrogate per token, with optional dual clip and correction weights."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class SurrogateResult:
    """Per-token loss [B, T] (0 off the mask) and the shares of masked-in tokens where each clip binds."""

    per_token_loss: Tensor
    clip_fraction: float
    dual_clip_fraction: float


def clip_binds(ratio: Tensor, advantages: Tensor, clip_low: float, clip_high: float) -> Tensor:
    """Per token, whether the PPO clip binds: the ratio below ``1 - clip_low`` where the advantage is
    negative, or above ``1 + clip_high`` where it is positive (``advantages`` broadcasts against ``ratio``).
    The ``clip_fraction`` figure of every framework is its share of the loss tokens."""
    return ((ratio < 1 - clip_low) & (advantages < 0)) | ((ratio > 1 + clip_high) & (advantages > 0))


def clipped_surrogate(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    clip_c: float | None = None,
    weights: Tensor | None = None,
) -> SurrogateResult:
    """loss = -min(r*A, clip(r, 1 - clip_low, 1 + clip_high)*A), r = exp(clamp(logp - old_logp, -20, 20)).

    With ``clip_c``, tokens with A < 0 take min(loss, -clip_c*A) (dual clip). The loss is then
    multiplied by the detached ``weights``. Same per-token numbers as verl 0.9.1
    ``compute_policy_loss_vanilla`` (which always dual-clips, ``clip_ratio_c`` 3.0) and its
    ``pg_clipfrac`` / ``pg_clipfrac_lower``, whose denominators add 1e-8 to the token count.
    """
    if clip_c is not None and clip_c <= 1.0:
        raise ValueError(f"clip_c must be greater than 1, got {clip_c}")
    on = mask.to(torch.bool)
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = (logp - old_logp).clamp(-20.0, 20.0).exp()
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1 - clip_low, 1 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    clip_hit = clip_binds(ratio, adv, clip_low, clip_high)
    dual_hit = torch.zeros_like(on)
    if clip_c is not None:
        bound = -adv * clip_c
        dual_hit = (adv < 0) & (loss > bound)
        loss = torch.where(adv < 0, torch.minimum(loss, bound), loss)
    if weights is not None:
        loss = loss * weights.detach()
    count = on.sum().clamp(min=1)
    return SurrogateResult(
        per_token_loss=torch.where(on, loss, 0.0),
        clip_fraction=((clip_hit & on).sum() / count).item(),
        dual_clip_fraction=((dual_hit & on).sum() / count).item(),
    )
