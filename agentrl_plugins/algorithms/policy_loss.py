"""Policy losses per token: the PPO / DAPO clipped surrogate (``ppo_clip``), GSPO's sequence ratio and CISPO's
clipped importance weight. Each takes a :class:`PolicyLossInputs` and the recipe's loss parameters it names, and
returns per-token loss terms; the recipe's aggregation reduces them (:mod:`agentrl_plugins.algorithms.aggregation`).

They run on every micro-batch of a trainer's step, so they do no more than the math: no masking the
aggregation does anyway, no multiplying by weights of one, and figures that stay tensors on the device until the
step gathers them (:meth:`PolicyLossResult.figures`), so no host sync. Their inputs come with the padding cleared
(:class:`PolicyLossInputs`), so whatever a framework's padding holds never reaches a loss or its gradient.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

LOG_RATIO_BOUND = 20.0
"""Log-ratios are clamped to [-20, 20] before ``exp``, as verl and OpenRLHF do for the token ratio."""


@dataclass(frozen=True)
class PolicyLossInputs:
    """One batch as every policy loss sees it, each tensor [B, T]: the learner's log-probs (with gradient), the
    log-probs before the update (``old``) and the sampler's, per-token advantages, the loss mask and the
    correction's per-token weights (detached). Without a correction ``weighted`` is False and ``weights`` a
    broadcast view of ones, which a loss may skip (multiplying by it changes nothing).

    Off the mask every tensor holds 0, set with ``torch.where`` when the inputs are made: padding that holds NaN
    or inf (a framework's padded log-probs, advantages or weights) reaches neither a loss's value nor, through
    0 * inf, its gradient."""

    logp: Tensor
    old_logp: Tensor
    sampler_logp: Tensor
    advantages: Tensor
    mask: Tensor
    weights: Tensor
    weighted: bool = True

    def __post_init__(self) -> None:
        on = self.mask.to(torch.bool)
        for name in ("logp", "old_logp", "sampler_logp", "advantages"):
            object.__setattr__(self, name, torch.where(on, getattr(self, name), 0.0))
        if self.weighted:
            object.__setattr__(self, "weights", torch.where(on, self.weights.detach(), 0.0))


Figure = float | Tensor
"""A figure over the masked-in tokens: a float, or a 0-dim tensor without gradient left on the device."""


@dataclass(frozen=True)
class PolicyLossResult:
    """Per-token loss terms [B, T] and figures over the masked-in tokens (:data:`Figure`); ``clip_fraction``
    (the share of tokens whose update the loss's clip limits) is always among them. Loss values off the mask
    are never read: the aggregation masks them, NaN included."""

    per_token_loss: Tensor
    metrics: dict[str, Figure] = field(default_factory=dict)

    def figures(self) -> dict[str, float]:
        """The figures as floats, with one host sync for all the tensors among them."""
        tensors = {name: value for name, value in self.metrics.items() if isinstance(value, Tensor)}
        values = dict(zip(tensors, torch.stack([value.double() for value in tensors.values()]).tolist()
                          if tensors else []))
        return {name: values[name] if name in values else float(value) for name, value in self.metrics.items()}


def _shares(on: Tensor, dtype: torch.dtype, **hits: Tensor) -> dict[str, Figure]:
    """For each of ``hits``, the share of the masked-in tokens where it holds (0 with none): a ratio of counts
    in the loss's ``dtype``, left on the device."""
    total = torch.count_nonzero(on).clamp(min=1).to(dtype)
    return {name: torch.count_nonzero(hit & on).to(dtype) / total for name, hit in hits.items()}


def _clipped(ratio: Tensor, advantages: Tensor, clip_low: float, clip_high: float) -> tuple[Tensor, Tensor]:
    """max(-A*r, -A*clip(r, 1 - clip_low, 1 + clip_high)) per token, and where the clip binds: the clipped term
    above the other, i.e. the ratio below ``1 - clip_low`` where A < 0 or above ``1 + clip_high`` where A > 0
    (``advantages`` broadcasts against ``ratio``). The ``clip_fraction`` figure of every framework is its share of
    the loss tokens."""
    negated = -advantages
    unclipped, clipped = negated * ratio, negated * ratio.clamp(1 - clip_low, 1 + clip_high)
    return torch.maximum(unclipped, clipped), clipped > unclipped


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
) -> PolicyLossResult:
    """loss = -min(r*A, clip(r, 1 - clip_low, 1 + clip_high)*A), r = exp(clamp(logp - old_logp, -20, 20)).

    With ``clip_c``, tokens with A < 0 take min(loss, -clip_c*A) (dual clip). The loss is then
    multiplied by the detached ``weights`` where given. Same per-token numbers (on the mask) as verl 0.9.1
    ``compute_policy_loss_vanilla`` (which always dual-clips, ``clip_ratio_c`` 3.0) and its
    ``pg_clipfrac`` / ``pg_clipfrac_lower`` (``clip_fraction``, ``dual_clip_fraction``), whose denominators add
    1e-8 to the token count. ``advantages`` is [B] (one per row) or [B, T]; padding is cleared as
    :class:`PolicyLossInputs` clears it.
    """
    adv = (advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages).expand_as(logp)
    unweighted = torch.ones((), dtype=logp.dtype, device=logp.device).expand_as(logp)
    inputs = PolicyLossInputs(logp, old_logp, old_logp, adv, mask, unweighted if weights is None else weights,
                              weighted=weights is not None)
    return ppo_clip(inputs, clip_low=clip_low, clip_high=clip_high, clip_c=clip_c)


def ppo_clip(inputs: PolicyLossInputs, *, clip_low: float, clip_high: float, clip_c: float | None) -> PolicyLossResult:
    """The clipped token surrogate with the recipe's clip range and dual clip (:func:`clipped_surrogate`)."""
    if clip_c is not None and clip_c <= 1.0:
        raise ValueError(f"clip_c must be greater than 1, got {clip_c}")
    on, adv = inputs.mask.to(torch.bool), inputs.advantages
    ratio = (inputs.logp - inputs.old_logp).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND).exp()
    loss, binds = _clipped(ratio, adv, clip_low, clip_high)
    if clip_c is None:
        metrics = {**_shares(on, loss.dtype, clip_fraction=binds), "dual_clip_fraction": 0.0}
    else:
        bound = adv * -clip_c
        held = (adv < 0) & (loss > bound)  # where the dual clip holds the loss at -clip_c * A
        metrics = _shares(on, loss.dtype, clip_fraction=binds, dual_clip_fraction=held)
        loss = torch.where(held, bound, loss)
    return PolicyLossResult(_weighted(loss, inputs), metrics)


def sequence_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """Per row, the mean over its masked-in tokens of logp - old_logp: log of GSPO's s_i (0 for an empty row)."""
    m = mask.to(logp.dtype)
    return (torch.where(mask.to(torch.bool), logp - old_logp, 0.0) * m).sum(-1) / m.sum(-1).clamp(min=1)


def gspo(inputs: PolicyLossInputs, *, clip_low: float, clip_high: float) -> PolicyLossResult:
    """GSPO, the token variant (Zheng et al. 2025): s_i,t = sg[s_i] * pi(y_t) / sg[pi(y_t)] with s_i the
    length-normalised sequence ratio exp(mean_t(logp - old_logp)), clipped to [1 - clip_low, 1 + clip_high]:
    loss_t = -min(s_i,t * A_t, clip(s_i,t) * A_t), times the correction's weights.

    Each token's value is the sequence's ratio and its gradient s_i * grad log pi(y_t), so with one advantage
    per sequence and the seq-mean-token-mean aggregation this is the paper's sequence-level GSPO.
    ``clip_fraction``: the share of tokens whose sequence the clip limits.
    """
    log_s = sequence_log_ratio(inputs.logp, inputs.old_logp, inputs.mask).detach()[:, None]
    log_ratio = (log_s + inputs.logp - inputs.logp.detach()).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    ratio = log_ratio.exp()
    loss, binds = _clipped(ratio, inputs.advantages, clip_low, clip_high)
    return PolicyLossResult(_weighted(loss, inputs), _shares(inputs.mask.to(torch.bool), loss.dtype,
                                                             clip_fraction=binds))


def cispo(inputs: PolicyLossInputs, *, clip_high: float) -> PolicyLossResult:
    """CISPO (MiniMax-M1, 2025): loss_t = -sg[min(r_t, 1 + clip_high)] * A_t * logp_t, r_t the token ratio,
    times the correction's weights. The weight is clipped, never the update: every token keeps its gradient.
    No lower bound, as the report sets none. ``clip_fraction``: the share of tokens whose weight was capped.
    """
    ratio = (inputs.logp - inputs.old_logp).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND).exp().detach()
    weight = ratio.clamp(max=1 + clip_high)
    loss = _weighted(-weight * inputs.advantages * inputs.logp, inputs)
    return PolicyLossResult(loss, _shares(inputs.mask.to(torch.bool), loss.dtype, clip_fraction=ratio > 1 + clip_high))


def _weighted(loss: Tensor, inputs: PolicyLossInputs) -> Tensor:
    """``loss`` times the correction's detached weights, where there is a correction."""
    return loss * inputs.weights.detach() if inputs.weighted else loss
