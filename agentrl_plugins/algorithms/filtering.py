"""Compact filtering: drop from the loss the trajectories that ended for a budget reason."""

from __future__ import annotations

from typing import Iterable, Sequence

import torch
from torch import Tensor

from agentrl_plugins.errors import did_you_mean
from agentrl_plugins.types import TERMINATION_REASONS

COMPACT_FILTER_REASONS = ("max_context", "max_turns", "timeout")


def _check(kind: str, names: Iterable[str]) -> None:
    for name in names:
        if name not in TERMINATION_REASONS:
            hint = did_you_mean(name, TERMINATION_REASONS)
            raise ValueError(f"unknown {kind} {name!r}.{hint} Known: {', '.join(TERMINATION_REASONS)}.")


def compact_filter(terminations: Sequence[str], reasons: Iterable[str] = COMPACT_FILTER_REASONS) -> Tensor:
    """Bool tensor [B], True = keep: a trajectory is dropped when its termination is in ``reasons``.

    Both ``reasons`` and ``terminations`` must come from ``TERMINATION_REASONS``.
    """
    reasons = frozenset(reasons)
    _check("filter reason", reasons)
    _check("termination", terminations)
    return torch.tensor([t not in reasons for t in terminations], dtype=torch.bool)
