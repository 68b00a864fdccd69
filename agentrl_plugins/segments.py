"""An episode's training rows: its first segment, then each later one of an agent program whose conversation
stopped extending the tokens sampled before (:attr:`~agentrl_plugins.types.Trajectory.segments`).

The one definition every adapter follows (verl's own, for an agent loop that returns several outputs): a
segment is a row of the loss, trained on exactly the tokens its sampler saw, with its episode's reward,
termination and advantage; group statistics count episodes, not rows, so an episode that drifted weighs in
its group's baseline once. A turn- or token-level estimator places its values on the first segment's turns
only; its episodes' later segments are not trained, and a warning says so (:func:`training_segments`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from agentrl_plugins.algorithm import Advantages
from agentrl_plugins.types import Trajectory


class UntrainedSegmentsWarning(UserWarning):
    """An episode's later segments carry no loss (a turn- or token-level estimator, or a framework path
    without them)."""


def trains_segments(level: str) -> bool:
    """Whether an estimator of ``level`` trains later segments: a trajectory-level one gives each episode one
    value, which every segment carries; a turn- or token-level one has values for the first segment's turns."""
    return level == "trajectory"


def training_segments(trajectory: Trajectory, level: str) -> list[Trajectory]:
    """The rows an episode trains with an estimator of ``level``: its first segment, then its later ones where
    that estimator trains them (else they are dropped, with a warning)."""
    if trajectory.segments and not trains_segments(level):
        warnings.warn(f"task {trajectory.task_id!r}: {len(trajectory.segments)} later segment(s) of an agent "
                      f"program's episode are not trained: a {level}-level estimator places its advantages on an "
                      "episode's first segment only", UntrainedSegmentsWarning, stacklevel=2)
        return [trajectory]
    return [trajectory, *trajectory.segments]


@dataclass(frozen=True)
class LaterSegments:
    """The later segments of a batch of episodes, episode by episode, and each one's episode index: the rows a
    framework adds to its one row per episode."""

    rows: tuple[Trajectory, ...]
    episode: Tensor

    @classmethod
    def of(cls, episodes: Sequence[Trajectory], level: str = "trajectory") -> LaterSegments:
        rows: list[Trajectory] = []
        episode: list[int] = []
        for index, trajectory in enumerate(episodes):
            later = training_segments(trajectory, level)[1:]
            rows += later
            episode += [index] * len(later)
        return cls(tuple(rows), torch.tensor(episode, dtype=torch.long))


def with_later_segments(advantages: Advantages, episode: Tensor) -> Advantages:
    """The episodes' advantages followed by each later segment's (``episode``: each one's episode index, as
    :attr:`LaterSegments.episode`): its episode's value and filtering."""
    if not len(episode):
        return advantages
    if advantages.values.dim() != 1:
        raise ValueError("a later segment carries its episode's one advantage; a turn- or token-level estimator's "
                         "episodes have no later segments to train (training_segments)")
    values, valid = advantages.values, advantages.valid
    return Advantages(torch.cat([values, values[episode.to(values.device)]]),
                      torch.cat([valid, valid[episode.to(valid.device)]]))
