"""The median-baseline estimator on hand-checked numbers."""

import torch

from agentrl_example_plugin.advantage import median_baseline


def test_each_reward_minus_its_group_median():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.5, 1.0, 0.0])
    groups = torch.tensor([7, 7, 7, 3, 3, 3])
    assert median_baseline(rewards, groups).tolist() == [1.0, 0.0, 0.0, 0.0, 0.5, -0.5]


def test_filtered_rows_get_zero_and_count_in_the_median_only_when_masked_in_baseline():
    rewards, groups = torch.tensor([1.0, 1.0, 0.0, 0.0]), torch.zeros(4, dtype=torch.long)
    valid = torch.tensor([True, True, False, False])
    assert median_baseline(rewards, groups, valid, masked_in_baseline=True).tolist() == [1.0, 1.0, 0.0, 0.0]
    assert median_baseline(rewards, groups, valid, masked_in_baseline=False).tolist() == [0.0, 0.0, 0.0, 0.0]
