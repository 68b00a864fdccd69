"""Advantage estimators and compact filtering, against hand-computed numbers."""

import math

import pytest
import torch

from agentrl_plugins.algorithms import (
    COMPACT_FILTER_REASONS,
    compact_filter,
    dr_grpo,
    grpo,
    rloo,
)
from agentrl_plugins.plugins import PluginManager

BUILT_IN = PluginManager(load_entry_points=False).registry("advantage")
ESTIMATORS = {entry.record.name: entry.record.compute for entry in BUILT_IN if entry.record.level == "trajectory"}
"""The core's built-in trajectory-level estimators, as its default plugin registers them."""
DTYPES = [torch.float32, torch.float64]
STD_1001 = math.sqrt(1 / 3)  # unbiased std of [1, 0, 0, 1]


def close(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_group_by_hand(dtype):
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=dtype)
    ids = torch.tensor([4, 4, 4, 4])
    close(dr_grpo(rewards, ids), [0.5, -0.5, -0.5, 0.5])
    close(rloo(rewards, ids), [2 / 3, -2 / 3, -2 / 3, 2 / 3])
    scale = 1 / (STD_1001 + 1e-6)
    close(grpo(rewards, ids), [0.5 * scale, -0.5 * scale, -0.5 * scale, 0.5 * scale])
    assert grpo(rewards, ids).dtype == dtype


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("estimator", [grpo, dr_grpo, rloo])
def test_equal_rewards_give_exact_zeros(dtype, estimator):
    rewards = torch.tensor([0.1, 0.1, 0.1, 0.7, 0.7], dtype=dtype)
    ids = torch.tensor([0, 0, 0, 1, 1])
    assert torch.equal(estimator(rewards, ids), torch.zeros(5, dtype=dtype))


@pytest.mark.parametrize("estimator", [grpo, dr_grpo, rloo])
def test_singleton_group_gets_zero(estimator):
    rewards = torch.tensor([5.0, 1.0, 0.0])
    ids = torch.tensor([9, 2, 2])
    out = estimator(rewards, ids)
    assert not out.isnan().any()
    assert out[0].item() == 0.0
    assert out[1].item() > 0 > out[2].item()


def test_interleaved_non_contiguous_groups():
    rewards = torch.tensor([1.0, 2.0, 0.0, 4.0, 2.0, 0.0], dtype=torch.float64)
    ids = torch.tensor([10, -3, 10, -3, 10, -3])
    close(dr_grpo(rewards, ids), [0.0, 0.0, -1.0, 2.0, 1.0, -2.0])
    close(rloo(rewards, ids), [0.0, 0.0, -1.5, 3.0, 1.5, -3.0])
    # group 10 has std 1, group -3 has std 2
    close(grpo(rewards, ids), [0.0, 0.0, -1 / (1 + 1e-6), 2 / (2 + 1e-6), 1 / (1 + 1e-6), -2 / (2 + 1e-6)])


def test_masked_rows_in_or_out_of_the_baseline():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    ids = torch.tensor([0, 0, 0, 0])
    valid = torch.tensor([True, True, True, False])
    # the invalid row still counts: statistics of [1, 0, 0, 1]
    close(dr_grpo(rewards, ids, valid), [0.5, -0.5, -0.5, 0.0])
    close(rloo(rewards, ids, valid), [2 / 3, -2 / 3, -2 / 3, 0.0])
    s = STD_1001 + 1e-6
    close(grpo(rewards, ids, valid), [0.5 / s, -0.5 / s, -0.5 / s, 0.0])
    # the invalid row is left out: statistics of [1, 0, 0] (mean 1/3, unbiased std sqrt(1/3) again)
    close(dr_grpo(rewards, ids, valid, masked_in_baseline=False), [2 / 3, -1 / 3, -1 / 3, 0.0])
    close(rloo(rewards, ids, valid, masked_in_baseline=False), [1.0, -0.5, -0.5, 0.0])
    close(grpo(rewards, ids, valid, masked_in_baseline=False), [(2 / 3) / s, (-1 / 3) / s, (-1 / 3) / s, 0.0])


@pytest.mark.parametrize("estimator", [grpo, dr_grpo, rloo])
def test_lone_valid_row_has_no_baseline_when_masked_rows_are_excluded(estimator):
    rewards = torch.tensor([1.0, 0.0, 0.0])
    ids = torch.tensor([3, 3, 3])
    valid = torch.tensor([True, False, False])
    assert torch.equal(estimator(rewards, ids, valid, masked_in_baseline=False), torch.zeros(3))
    assert estimator(rewards, ids, valid)[0].item() > 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_rloo_is_scaled_dr_grpo_for_full_groups(dtype):
    gen = torch.Generator().manual_seed(0)
    for size in (2, 3, 8):
        rewards = torch.randn(5 * size, generator=gen).to(dtype)
        ids = torch.randperm(5 * size, generator=gen) % 5 * 7
        torch.testing.assert_close(rloo(rewards, ids), size / (size - 1) * dr_grpo(rewards, ids))


def test_advantages_are_detached_and_registry_is_complete():
    rewards = torch.tensor([1.0, 0.0], requires_grad=True)
    for name, estimator in ESTIMATORS.items():
        assert estimator(rewards, torch.tensor([0, 0])).requires_grad is False, name
    assert set(ESTIMATORS) == {"grpo", "dr_grpo", "rloo"}
    assert {entry.record.name: entry.record.level for entry in BUILT_IN if entry.record.name not in ESTIMATORS} == {
        "gigpo": "turn", "grpo_turns": "turn"}


def test_compact_filter_default_reasons():
    terminations = ["submitted", "max_context", "timeout", "max_turns", "error"]
    assert compact_filter(terminations).tolist() == [True, False, False, False, True]
    assert set(COMPACT_FILTER_REASONS) == {"max_context", "max_turns", "timeout"}


def test_compact_filter_custom_and_empty():
    assert compact_filter(["timeout", "max_turns"], reasons=["timeout"]).tolist() == [False, True]
    assert compact_filter(["error"], reasons=()).tolist() == [True]
    out = compact_filter([])
    assert out.dtype == torch.bool and out.shape == (0,)


def test_compact_filter_unknown_names_suggest_close_matches():
    with pytest.raises(ValueError, match="max_context"):
        compact_filter(["submitted"], reasons=["max_contxt"])
    with pytest.raises(ValueError, match="timeout"):
        compact_filter(["timeuot"])
