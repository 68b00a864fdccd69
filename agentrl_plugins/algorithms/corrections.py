"""Corrections for the mismatch between the sampler's and the learner's log-probs.

Each function takes ``learner_logp``, ``sampler_logp`` and ``mask`` of shape [B, T]
(mask 1 = policy token) and returns a :class:`CorrectionResult`. With
d = learner_logp - sampler_logp on policy tokens (0 elsewhere), every exponent is
clamped to [-20, 20] first, as verl 0.9.1 ``rollout_corr_helper.py`` does with its
``SAFETY_BOUND`` (its ``k3_kl`` metric alone skips the clamp). Metric fractions are
over the policy tokens of the input mask, and 0 when there are none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

SAFETY_BOUND = 20.0


@dataclass(frozen=True)
class CorrectionResult:
    """Detached per-token loss weights (0 off the mask), the updated mask, and scalar metrics.

    ``mask`` drops rejected tokens. verl's IcePop and OpenRLHF's mask modes only zero their
    weight and keep them in the loss denominator: aggregate with the input mask to match them.
    """

    weights: Tensor
    mask: Tensor
    metrics: dict[str, float]


def _policy_log_ratio(learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Policy-token mask as bool, and d (0 off the mask, so padding never yields NaN)."""
    on = mask.to(torch.bool)
    return on, torch.where(on, learner_logp.detach() - sampler_logp.detach(), 0.0)


def limited_fraction(metrics: dict[str, float]) -> float:
    """The ``is_capped_fraction`` figure: the share of policy tokens a correction capped or rejected (its
    ``capped_fraction`` and ``masked_fraction``, which count disjoint tokens)."""
    return metrics["capped_fraction"] + metrics["masked_fraction"]


def _fraction(hit: Tensor, on: Tensor) -> float:
    """Share of the ``on`` tokens where ``hit`` holds."""
    return ((hit & on).sum() / on.sum().clamp(min=1)).item()


def _result(
    mask: Tensor, on: Tensor, d: Tensor, weights: Tensor, kept: Tensor, capped: Tensor
) -> CorrectionResult:
    """Zero weights and mask where not ``kept``; mismatch_kl = mean over policy tokens of exp(d) - 1 - d."""
    d = d.clamp(-SAFETY_BOUND, SAFETY_BOUND)
    metrics = {
        "capped_fraction": _fraction(capped, on),
        "masked_fraction": _fraction(~kept, on),
        "mismatch_kl": (torch.where(on, d.exp() - 1 - d, 0.0).sum() / on.sum().clamp(min=1)).item(),
    }
    return CorrectionResult(torch.where(on & kept, weights, 0.0), mask.masked_fill(~kept, 0), metrics)


def _check_band(low: float, high: float) -> None:
    if not 0 < low <= high:
        raise ValueError(f"need 0 < low <= high, got low={low}, high={high}")


def _check_cap(cap: float) -> None:
    if cap <= 0:
        raise ValueError(f"cap must be positive, got {cap}")


def none(learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor) -> CorrectionResult:
    """No correction: weight 1 on every policy token; still reports ``mismatch_kl``."""
    with torch.no_grad():
        on, d = _policy_log_ratio(learner_logp, sampler_logp, mask)
        return _result(mask, on, d, torch.ones_like(d), torch.ones_like(on), torch.zeros_like(on))


def token_tis(learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor, cap: float = 2.0) -> CorrectionResult:
    """w_t = min(exp(d_t), cap); verl ``rollout_is="token"``, ``rollout_is_threshold=cap`` (no lower clip)."""
    _check_cap(cap)
    with torch.no_grad():
        on, d = _policy_log_ratio(learner_logp, sampler_logp, mask)
        ratio = d.clamp(-SAFETY_BOUND, SAFETY_BOUND).exp()
        return _result(mask, on, d, ratio.clamp(max=cap), torch.ones_like(on), ratio > cap)


def sequence_tis(
    learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor, cap: float = 2.0
) -> CorrectionResult:
    """w = min(exp(clamp(sum_t d_t, -20, 20)), cap) per sequence, on each of its policy tokens.

    verl ``rollout_is="sequence"``, ``rollout_is_threshold=cap`` (product of token ratios).
    ``capped_fraction`` counts tokens; verl's ``rollout_is_ratio_fraction_high`` counts sequences.
    """
    _check_cap(cap)
    with torch.no_grad():
        on, d = _policy_log_ratio(learner_logp, sampler_logp, mask)
        ratio = d.sum(dim=-1, keepdim=True).clamp(-SAFETY_BOUND, SAFETY_BOUND).exp().expand_as(d)
        return _result(mask, on, d, ratio.clamp(max=cap), torch.ones_like(on), ratio > cap)


def icepop(
    learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor, low: float = 0.5, high: float = 5.0
) -> CorrectionResult:
    """w_t = exp(d_t) if low <= exp(d_t) <= high; else w_t = 0 and the token leaves the mask.

    Kept tokens keep their ratio as weight, as in verl ``rollout_is="token"`` with
    ``rollout_is_threshold="0.5_5.0"`` and in OpenRLHF's token-level ``mask`` mode.
    """
    _check_band(low, high)
    with torch.no_grad():
        on, d = _policy_log_ratio(learner_logp, sampler_logp, mask)
        ratio = d.clamp(-SAFETY_BOUND, SAFETY_BOUND).exp()
        return _result(mask, on, d, ratio, (ratio >= low) & (ratio <= high), torch.zeros_like(on))


def geometric_sequence_mask(
    learner_logp: Tensor, sampler_logp: Tensor, mask: Tensor, low: float = 0.5, high: float = 2.0
) -> CorrectionResult:
    """Keep a sequence (weight 1) iff ln(low) <= sum_t clamp(d_t, -20, 20) / n <= ln(high).

    n is the sequence's policy-token count. verl ``rollout_rs="seq_mean_k1"`` with threshold
    f"{1/high}_{1/low}" decides the same (its k1 is -d; the default "2.0" means [0.5, 2]) but
    adds 1e-8 to n. OpenRLHF's ``seq`` + ``mask`` gates the unclamped mean (default band
    [0.5, 5]) and also multiplies kept tokens by their token ratios.
    """
    _check_band(low, high)
    with torch.no_grad():
        on, d = _policy_log_ratio(learner_logp, sampler_logp, mask)
        count = on.sum(dim=-1, keepdim=True).clamp(min=1)
        mean = d.clamp(-SAFETY_BOUND, SAFETY_BOUND).sum(dim=-1, keepdim=True) / count
        kept = ((mean >= math.log(low)) & (mean <= math.log(high))).expand_as(on)
        return _result(mask, on, d, torch.ones_like(d), kept, torch.zeros_like(on))

