"""Reduce a per-token loss [B, T] to a scalar, as verl 0.9.1 ``agg_loss`` does for one micro-batch.

TRL 1.10-1.16 ``loss_type`` correspondences, exact only with one micro-batch on one process
(no gradient accumulation, ``steps_per_generation=1``) and no fully masked row:
``bnpo`` and ``dapo`` = token-mean; ``grpo`` = seq-mean-token-mean; ``dr_grpo`` =
seq-mean-token-sum-norm with norm_constant = ``max_completion_length``. TRL's ``grpo``
and ``dr_grpo`` divide by all B rows, so they part from verl once compact filtering
empties a row; hence no mapping constant.
"""

from __future__ import annotations

from typing import Literal, cast, get_args

import torch
from torch import Tensor

from agentrl_plugins.errors import did_you_mean

LossAggregation = Literal[
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
]
LOSS_AGG_MODES: tuple[str, ...] = get_args(LossAggregation)


TrainerDivisor = Literal["1", "B", "B/R"]


def row_scale(trainer_divisor: TrainerDivisor, rows: int, nonempty_rows: int) -> float:
    """The factor on the advantages that makes a trainer's loss denominator the core's, for one batch of ``rows``
    rows of which ``nonempty_rows`` keep a loss token (the clipped surrogate is linear in a positive advantage
    scale): ``"1"`` where the two agree, ``"B"`` where the trainer divides a token sum by all rows, ``"B/R"`` where
    it divides a sequence mean by all rows and the core by the rows that keep a loss token."""
    return {"1": 1.0, "B": float(rows), "B/R": rows / max(nonempty_rows, 1)}[trainer_divisor]


def _safe_div(num: Tensor, den: Tensor) -> Tensor:
    """num / den, and 0 with zero gradient where den is 0 (num is then 0 too)."""
    return num / torch.where(den > 0, den, torch.ones_like(den))


def aggregate_loss(
    per_token_loss: Tensor, mask: Tensor, mode: str, *, norm_constant: float | None = None
) -> Tensor:
    """Scalar loss. With l the loss, m the mask and R the number of rows with sum_t m > 0:

    - token-mean: sum_bt m*l / sum_bt m
    - token-sum: sum_bt m*l
    - seq-mean-token-sum: sum_bt m*l / R (fully masked rows leave the denominator, as in a bare
      verl ``agg_loss`` call; verl's trainer and TRL divide by every row, so the adapters fold B / R
      into the advantages)
    - seq-mean-token-sum-norm: sum_bt m*l / R / norm_constant (required here; verl defaults it to T)
    - seq-mean-token-mean: sum over non-empty rows b of (sum_t m*l / sum_t m), / R
      (verl and OpenRLHF add 1e-8 to sum_t m: a relative difference below 1e-8)

    Mask entries weight tokens; loss values under m = 0, even NaN, never reach the result
    or the gradient. Where verl would divide by zero (no token or R = 0) this returns 0.
    """
    if mode not in LOSS_AGG_MODES:
        hint = did_you_mean(mode, LOSS_AGG_MODES)
        raise ValueError(f"unknown loss aggregation mode {mode!r}.{hint} Known: {', '.join(LOSS_AGG_MODES)}.")
    if mode == "seq-mean-token-sum-norm" and (norm_constant is None or norm_constant <= 0):
        raise ValueError(f"seq-mean-token-sum-norm needs a positive norm_constant, got {norm_constant}")
    m = mask.to(per_token_loss.dtype)
    masked = torch.where(mask.to(torch.bool), per_token_loss, 0.0)
    if mask.dtype != torch.bool:  # a weighting mask (a boolean one weighs every token 1)
        masked = masked * m
    if mode == "token-sum":
        return masked.sum()
    row_sums = masked.sum(dim=-1)
    counts = m.sum(dim=-1)
    if mode == "token-mean":
        return _safe_div(row_sums.sum(), counts.sum())
    rows = (counts > 0).sum().to(per_token_loss.dtype)
    if mode == "seq-mean-token-mean":
        return _safe_div(_safe_div(row_sums, counts).sum(), rows)
    loss = _safe_div(row_sums.sum(), rows)
    return loss / cast(float, norm_constant) if mode == "seq-mean-token-sum-norm" else loss  # checked above
