"""Outcome advantage estimators over a flat batch grouped by integer prompt ids.

Every estimator takes one scalar reward per trajectory and returns one detached
advantage per trajectory. ``valid`` marks trajectories that survived compact
filtering; invalid rows always get advantage 0. With ``masked_in_baseline=True``
invalid rows still count in their group's statistics (DeepSWE's verl run, and
verl's own estimators given an all-zero ``response_mask``); with ``False`` the
statistics use only the group's valid rows.

A row whose group statistics rest on fewer than two members has no baseline and
gets 0. Statistics use rewards shifted by the group minimum, so a group of equal
rewards gives exactly 0. Group ids may be any integers, in any order.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _group_sum(values: Tensor, inv: Tensor) -> Tensor:
    """Sum of ``values`` over each row's group, broadcast back to the rows."""
    return values.new_zeros(values.numel()).index_add(0, inv, values)[inv]


def _grouped(
    rewards: Tensor, group_ids: Tensor, valid: Tensor | None, masked_in_baseline: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Shifted rewards, statistics members, group index, member count per row, rows given an advantage."""
    keep = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid.to(torch.bool)
    member = torch.ones_like(keep) if masked_in_baseline else keep
    inv = torch.unique(group_ids, return_inverse=True)[1]
    low = rewards.new_zeros(rewards.numel()).scatter_reduce(
        0, inv[member], rewards[member], "amin", include_self=False
    )
    x = torch.where(member, rewards - low[inv], 0.0)
    n = _group_sum(member.to(rewards.dtype), inv)
    return x, member, inv, n, keep & (n > 1)


def grpo(
    rewards: Tensor,
    group_ids: Tensor,
    valid: Tensor | None = None,
    *,
    masked_in_baseline: bool = True,
    eps: float = 1e-6,
) -> Tensor:
    """(r - mean_g) / (std_g + eps), where std_g divides by n_g - 1 (Bessel, as torch.std).

    Same numbers as verl 0.9.1 ``compute_grpo_outcome_advantage`` (torch.std, eps 1e-6),
    except a singleton group: verl returns r / (1 + eps) there, this returns 0.
    """
    with torch.no_grad():
        centered, std, out = group_statistics(rewards, group_ids, valid, masked_in_baseline)
        return torch.where(out, centered / (std + eps), 0.0)


def group_statistics(rewards: Tensor, group_ids: Tensor, valid: Tensor | None,
                     masked_in_baseline: bool) -> tuple[Tensor, Tensor, Tensor]:
    """Per row: its reward minus its group's mean, the group's standard deviation (over n - 1), and whether the
    row gets an advantage (kept, in a group of at least two members): what :func:`grpo` divides."""
    x, member, inv, n, out = _grouped(rewards, group_ids, valid, masked_in_baseline)
    centered = x - _group_sum(x, inv) / n.clamp(min=1)
    var = _group_sum(torch.where(member, centered.square(), 0.0), inv) / (n - 1).clamp(min=1)
    return centered, var.sqrt(), out


def dr_grpo(
    rewards: Tensor,
    group_ids: Tensor,
    valid: Tensor | None = None,
    *,
    masked_in_baseline: bool = True,
) -> Tensor:
    """r - mean_g, no std scaling (Dr. GRPO); verl ``grpo`` with ``norm_adv_by_std_in_grpo=False``."""
    with torch.no_grad():
        x, _, inv, n, out = _grouped(rewards, group_ids, valid, masked_in_baseline)
        return torch.where(out, x - _group_sum(x, inv) / n.clamp(min=1), 0.0)


def rloo(
    rewards: Tensor,
    group_ids: Tensor,
    valid: Tensor | None = None,
    *,
    masked_in_baseline: bool = True,
) -> Tensor:
    """r_i - (sum_g - r_i) / (n_g - 1), the leave-one-out baseline; equals n_g / (n_g - 1) * dr_grpo.

    Same numbers as verl 0.9.1 ``compute_rloo_outcome_advantage``, except a singleton
    group: verl leaves its reward unchanged, this returns 0.
    """
    with torch.no_grad():
        x, _, inv, n, out = _grouped(rewards, group_ids, valid, masked_in_baseline)
        return torch.where(out, x - (_group_sum(x, inv) - x) / (n - 1).clamp(min=1), 0.0)
