"""The core's loss aggregation inside OpenRLHF's distributed step.

OpenRLHF computes each optimizer step's denominators once, over all its micro-batches and
data-parallel ranks, and hands them to ``PolicyLoss.forward``: ``batch_num_tokens`` (loss tokens)
and ``global_batch_size`` (sequences with at least one loss token), both divided by the
gradient-accumulation steps, with ``dp_size`` undoing DeepSpeed's averaging over ranks. Here
the core gives each micro-batch's numerator and those denominators divide it, so the step's
loss is the core's aggregate over the whole step. Without them (a direct call) the core's own
aggregate of the micro-batch is returned. A step whose every episode was compact-filtered has
no loss token and zero denominators; its loss is 0 (OpenRLHF's own ``aggregate_loss`` gives NaN).
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentrl_plugins.algorithms.aggregation import aggregate_loss
from agentrl_plugins.recipe_schema import LossSection

Count = Tensor | float | None


def _per(total: Tensor, count: Tensor | float, dp_size: int) -> Tensor:
    """``total / count * dp_size``, and 0 when the step has no loss token at all (``total`` is then 0 too). A
    number ``count`` (what OpenRLHF passes) folds into one multiplication, as OpenRLHF's own division costs."""
    if not isinstance(count, Tensor):
        return total * (dp_size / count if count > 0 else 0.0)
    count = torch.as_tensor(count, dtype=total.dtype, device=total.device)
    return total / torch.where(count > 0, count, 1.0) * dp_size


def step_loss(per_token_loss: Tensor, mask: Tensor, loss: LossSection, dp_size: int = 1,
              batch_num_tokens: Count = None, global_batch_size: Count = None) -> Tensor:
    """This micro-batch's share of the step loss under ``loss.aggregation``.

    token-sum has no OpenRLHF denominator to borrow: it is the micro-batch sum times ``dp_size``,
    exact only with one micro-batch per optimizer step (DeepSpeed divides by the accumulation steps).
    """
    mode = loss.aggregation
    if mode == "token-sum":
        return aggregate_loss(per_token_loss, mask, mode) * dp_size
    if mode == "token-mean" and batch_num_tokens is not None:
        return _per(aggregate_loss(per_token_loss, mask, "token-sum"), batch_num_tokens, dp_size)
    if mode == "seq-mean-token-mean" and global_batch_size is not None:
        rows = (mask.sum(dim=-1) > 0).sum()
        return _per(aggregate_loss(per_token_loss, mask, mode) * rows, global_batch_size, dp_size)
    if mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm") and global_batch_size is not None:
        total = _per(aggregate_loss(per_token_loss, mask, "token-sum"), global_batch_size, dp_size)
        return total / loss.norm_constant if mode == "seq-mean-token-sum-norm" else total
    return aggregate_loss(per_token_loss, mask, mode, norm_constant=loss.norm_constant)
