"""An agent program's later segments as rows of OpenRLHF's step, by the core's one rule
(:mod:`agentrl_plugins.segments`): each is a row of the loss with its episode's advantage; group statistics count
episodes.

OpenRLHF 0.11.2 has one sample per episode throughout (its groups are ``index // n_samples_per_prompt``, its replay
buffer cuts a fixed number of micro-batches per optimizer step), so the rows travel in four places:

- the agent executor puts each episode's later segments in its response, under :data:`SEGMENTS`, and marks every
  row it makes with the ``segment`` log (0 for the episode's, 1 for a later segment's);
- ``SamplesGenerator._process_response_into_experience`` makes each of them an ``Experience`` as OpenRLHF makes the
  episode's, carried on the episode's (:func:`process_response_method`);
- ``RemoteExperienceMaker.make_experience_batch`` appends them after the step's episodes and keeps which episode
  each belongs to (:class:`RowEpisodes`), for the estimator (:func:`agentrl_openrlhf.patches.advantages_method`)
  and the recorder (:func:`make_experience_method`);
- ``ActorPPOTrainer.ppo_train`` reads a rank's rows as the micro-batches OpenRLHF would cut from its episodes alone,
  so its optimizer steps are the ones it takes without segments, each with its share of the rows
  (:func:`ppo_train_method`).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from agentrl_plugins.algorithm import Advantages
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.segments import UntrainedSegmentsWarning, with_later_segments

SEGMENTS = "agentrl_segments"
"""The executor response's key for its episode's later segments (each an executor response of its own), and the
episode ``Experience``'s attribute for them once OpenRLHF has made them."""
SEGMENT_LOG = "segment"
"""The executor's per-row log: 1.0 on a later segment's row, 0.0 on an episode's; OpenRLHF's logged mean is the
share of rows that are later segments."""
ROWS = "agentrl_rows"
"""The experience maker's attribute holding the step's :class:`RowEpisodes`."""


def episode_rows(info: dict[str, Any], size: int) -> Tensor:
    """Which of ``size`` rows (an ``Experience``'s ``info``) are episodes rather than later segments."""
    if SEGMENT_LOG not in info:
        return torch.ones(size, dtype=torch.bool)
    return info[SEGMENT_LOG].reshape(-1) == 0


@dataclass(frozen=True)
class RowEpisodes:
    """A step's rows by their ``Experience.index``: below ``episodes`` the episodes in rollout order, then the later
    segments, ``later[j]`` being the episode of row ``episodes + j``."""

    episodes: int
    later: Tensor

    @classmethod
    def of(cls, maker: Any, rows: int) -> RowEpisodes:
        """What ``make_experience_batch`` kept on ``maker`` for this step, or ``rows`` episodes and no segment."""
        return getattr(maker, ROWS, None) or cls(rows, torch.zeros(0, dtype=torch.long))

    def is_episode(self, index: Tensor) -> Tensor:
        return index < self.episodes

    def row_values(self, advantages: Advantages, index: Tensor) -> Tensor:
        """Each row's advantage (rows in ``index``'s order) from ``advantages``, the episode rows' in that order."""
        episode = index[self.is_episode(index)]
        values = advantages.values.new_zeros((self.episodes, *advantages.values.shape[1:]))
        valid = advantages.valid.new_zeros(self.episodes)
        values[episode], valid[episode] = advantages.values, advantages.valid
        return with_later_segments(Advantages(values, valid), self.later).values[index]


def process_response_method(original: Callable[..., Any]) -> Callable[..., Any]:
    """``SamplesGenerator._process_response_into_experience`` also making the response's later segments, by the
    same code, carried on the episode's ``Experience``."""

    @functools.wraps(original)
    def _process_response_into_experience(self, response, **generate_kwargs):
        experience = original(self, response, **generate_kwargs)
        setattr(experience, SEGMENTS, [original(self, segment, **generate_kwargs)
                                       for segment in response.get(SEGMENTS, ())])
        return experience

    return _process_response_into_experience


def make_experience_method(original: Callable[..., Any]) -> Callable[..., Any]:
    """``RemoteExperienceMaker.make_experience_batch`` over the step's episodes followed by their later segments.

    OpenRLHF's dynamic batching sizes each optimizer step by ``train.batch_size`` samples and would drop the extra
    rows: under it the segments are not trained, and a warning says so."""

    @functools.wraps(original)
    def make_experience_batch(self, rollout_samples):
        later = [(episode, row) for episode, sample in enumerate(rollout_samples)
                 for row in getattr(sample, SEGMENTS, ())]
        if later and self.args.train.dynamic_batch_enable:
            warnings.warn(f"{len(later)} later segment(s) of agent programs' episodes are not trained: OpenRLHF's "
                          "dynamic batching (train.dynamic_batch_enable) sizes its optimizer steps by "
                          "train.batch_size samples", UntrainedSegmentsWarning, stacklevel=2)
            later = []
        setattr(self, ROWS, RowEpisodes(len(rollout_samples), torch.tensor([e for e, _ in later], dtype=torch.long)))
        return original(self, [*rollout_samples, *(row for _, row in later)])

    return make_experience_batch


@dataclass
class MicroBatches(torch.utils.data.Dataset):
    """A rank's replay-buffer rows read as ``len(parts)`` micro-batches (``parts``: indices into ``items``), in the
    replay buffer's place for ``ppo_train``'s data loader."""

    items: list[Any]
    parts: list[list[int]]
    packing_samples: bool
    sample_batch_size: int = 1

    def __len__(self) -> int:
        return len(self.parts)

    def __getitem__(self, index: int) -> list[Any]:
        return [self.items[row] for row in self.parts[index]]

    def collate_fn(self, batch: Sequence[list[Any]]) -> Any:
        from openrlhf.trainer.ppo_utils.replay_buffer import make_experience_batch

        return make_experience_batch(batch[0], self.packing_samples)


def spread(items: list[Any], count: int) -> tuple[list[Any], list[list[int]]]:
    """``items`` in ``count`` contiguous parts of near-equal size; where there are fewer rows than parts, the rest
    are copies of a row without loss tokens (a micro-batch OpenRLHF's step can run, contributing nothing)."""
    padded = items + [replace(items[0], action_mask=torch.zeros_like(items[0].action_mask))
                      for _ in range(count - len(items))]
    return padded, [part.tolist() for part in np.array_split(np.arange(len(padded)), count)]


def ppo_train_method(original: Callable[..., Any]) -> Callable[..., Any]:
    """``ActorPPOTrainer.ppo_train`` over every row of the rank in the micro-batches OpenRLHF cuts from the episodes
    alone (the episode rows of every rank over ranks and micro-batch size, as it assumes them evenly spread), so a
    step takes the optimizer steps it takes without segments, the segments spread over them."""

    @functools.wraps(original)
    def ppo_train(self, kl_ctl: float):
        buffer = self.replay_buffer
        if self.args.train.dynamic_batch_enable:
            return original(self, kl_ctl)
        episodes = sum(int(episode_rows(item.info, 1).item()) for item in buffer.items)
        totals = self.strategy.all_reduce({"rows": float(len(buffer.items)), "episodes": float(episodes)}, op="sum")
        if totals["rows"] == totals["episodes"]:
            return original(self, kl_ctl)
        if not buffer.items:
            raise AgentRLError("a trainer rank received no rows of the step: OpenRLHF's experience split left it none "
                               "(more ranks than micro-batches with later segments); use fewer ranks")
        count = max(1, int(totals["episodes"]) // self.strategy.world_size // buffer.sample_batch_size)
        items, parts = spread(buffer.items, count)
        self.replay_buffer = MicroBatches(items, parts, buffer.packing_samples)
        try:
            return original(self, kl_ctl)
        finally:
            self.replay_buffer = buffer

    return ppo_train
