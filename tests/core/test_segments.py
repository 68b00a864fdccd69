"""An episode's later segments as training rows: which are trained, and the advantage each carries."""

from __future__ import annotations

import pytest
import torch

from agentrl_plugins.algorithm import Advantages
from agentrl_plugins.runs.figures import EpisodeCounts
from agentrl_plugins.segments import LaterSegments, UntrainedSegmentsWarning, training_segments, with_later_segments
from agentrl_plugins.types import Trajectory


def episode(task: str, segments: int) -> Trajectory:
    def part(index: int) -> Trajectory:
        return Trajectory(task, [index], [1, 2], [1, 1], [-0.5, -0.5], [(0, 2)], "submitted")

    first = part(0)
    first.segments = [part(index) for index in range(1, segments + 1)]
    return first


def test_a_trajectory_level_estimator_trains_every_segment_and_each_carries_its_episodes_advantage():
    episodes = [episode("a", 2), episode("b", 0), episode("c", 1)]
    later = LaterSegments.of(episodes)
    assert later.rows == (*episodes[0].segments, *episodes[2].segments)
    assert later.episode.tolist() == [0, 0, 2]
    rows = with_later_segments(Advantages(torch.tensor([0.5, -1.0, 2.0]), torch.tensor([True, False, True])),
                               later.episode)
    assert rows.values.tolist() == [0.5, -1.0, 2.0, 0.5, 0.5, 2.0]
    assert rows.valid.tolist() == [True, False, True, True, True, True]


@pytest.mark.parametrize("level", ["turn", "token"])
def test_a_turn_level_estimator_trains_first_segments_only_and_says_so(level):
    with pytest.warns(UntrainedSegmentsWarning, match=f"task 'a': 2 later segment.*{level}-level estimator"):
        assert training_segments(episode("a", 2), level) == [episode("a", 2)]
    with pytest.warns(UntrainedSegmentsWarning):
        assert LaterSegments.of([episode("a", 2)], level).rows == ()


def test_per_token_advantages_cannot_reach_a_later_segment():
    later = LaterSegments.of([episode("a", 1)])
    with pytest.raises(ValueError, match="carries its episode's one advantage"):
        with_later_segments(Advantages(torch.zeros(1, 2), torch.tensor([True])), later.episode)


def test_an_episodes_sampled_tokens_count_every_segment():
    counts = EpisodeCounts.of(episode("a", 2))
    assert counts.policy_tokens == 6 and counts.drift == 2
