"""A step's trajectories as padded tensors: what every adapter hands to the recipe's algorithm."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from agentrl_plugins.types import Trajectory, TurnOutcome


@dataclass(frozen=True)
class TrajectoryBatch:
    """Rewards and group ids per trajectory; response mask and sampler log-probs right-padded to (B, T); each
    trajectory's turns and their token spans (for turn-level credit)."""

    rewards: Tensor
    group_ids: Tensor
    response_mask: Tensor
    sampler_logprobs: Tensor
    terminations: tuple[str, ...]
    hacked: Tensor
    turns: tuple[tuple[TurnOutcome, ...], ...] = ()
    turn_spans: tuple[tuple[tuple[int, int], ...], ...] = ()

    @classmethod
    def from_trajectories(cls, trajectories: Sequence[Trajectory], dtype: torch.dtype = torch.float32):
        width = max((len(t.response_ids) for t in trajectories), default=0)
        mask = torch.zeros(len(trajectories), width, dtype=dtype)
        logprobs = torch.zeros(len(trajectories), width, dtype=dtype)
        for row, trajectory in enumerate(trajectories):
            n = len(trajectory.response_ids)
            mask[row, :n] = torch.tensor(trajectory.response_mask, dtype=dtype)
            logprobs[row, :n] = torch.tensor(trajectory.logprobs, dtype=dtype)
        return cls(
            rewards=torch.tensor([t.reward for t in trajectories], dtype=dtype),
            group_ids=torch.tensor([t.group_id for t in trajectories], dtype=torch.long),
            response_mask=mask,
            sampler_logprobs=logprobs,
            terminations=tuple(t.termination for t in trajectories),
            hacked=torch.tensor([bool(t.verdict and t.verdict.hacked) for t in trajectories]),
            turns=tuple(tuple(t.turns) for t in trajectories),
            turn_spans=tuple(tuple(t.turn_spans) for t in trajectories),
        )
