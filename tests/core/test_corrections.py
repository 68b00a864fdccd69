"""Mismatch corrections on hand-made log-probs."""

import dataclasses
import math

import pytest
import torch

from agentrl_plugins.algorithms import (
    geometric_sequence_mask,
    icepop,
    none,
    sequence_tis,
    token_tis,
)
from agentrl_plugins.plugins import PluginManager

CORRECTIONS = {entry.record.name: entry.record.compute
               for entry in PluginManager(load_entry_points=False).registry("correction")}
"""The core's built-in corrections, as its default plugin registers them."""
DTYPES = [torch.float32, torch.float64]
ln = math.log


def logps(log_ratios, dtype):
    """Sampler log-probs and learner log-probs whose difference is ``log_ratios``."""
    d = torch.tensor(log_ratios, dtype=dtype)
    sampler = torch.full_like(d, -1.0)
    return sampler + d, sampler


def k3(*ratios):
    return sum(r - 1 - ln(r) for r in ratios)


def close(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_token_tis_caps_each_token(dtype):
    learner, sampler = logps([[ln(3), ln(0.5), 0.0, 0.0]], dtype)
    sampler[0, 3] = -math.inf  # padding may hold anything
    mask = torch.tensor([[1, 1, 1, 0]])
    out = token_tis(learner, sampler, mask)
    close(out.weights, [[2.0, 0.5, 1.0, 0.0]])
    assert out.weights.dtype == dtype
    assert torch.equal(out.mask, mask)
    assert out.metrics["capped_fraction"] == pytest.approx(1 / 3)
    assert out.metrics["masked_fraction"] == 0.0
    assert out.metrics["mismatch_kl"] == pytest.approx(k3(3, 0.5, 1) / 3, rel=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sequence_tis_uses_the_product_of_token_ratios(dtype):
    learner, sampler = logps([[ln(2), ln(3), 7.0], [ln(0.5), ln(0.8), 0.0]], dtype)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    out = sequence_tis(learner, sampler, mask)
    # row 0: 2 * 3 = 6, capped at 2; row 1: 0.5 * 0.8 * 1 = 0.4
    close(out.weights, [[2.0, 2.0, 0.0], [0.4, 0.4, 0.4]])
    assert out.metrics["capped_fraction"] == pytest.approx(2 / 5)
    assert out.metrics["masked_fraction"] == 0.0
    assert out.metrics["mismatch_kl"] == pytest.approx(k3(2, 3, 0.5, 0.8, 1) / 5, rel=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_icepop_zeroes_and_masks_tokens_outside_the_band(dtype):
    learner, sampler = logps([[ln(6), ln(0.25), ln(0.6), ln(4), ln(1.2), 9.0]], dtype)
    mask = torch.tensor([[True, True, True, True, True, False]])
    out = icepop(learner, sampler, mask)
    close(out.weights, [[0.0, 0.0, 0.6, 4.0, 1.2, 0.0]])
    assert out.mask.tolist() == [[False, False, True, True, True, False]]
    assert out.metrics["masked_fraction"] == pytest.approx(2 / 5)
    assert out.metrics["capped_fraction"] == 0.0
    assert out.metrics["mismatch_kl"] == pytest.approx(k3(6, 0.25, 0.6, 4, 1.2) / 5, rel=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_geometric_sequence_mask_drops_whole_sequences(dtype):
    learner, sampler = logps(
        [
            [ln(9), 0.0, 0.0],  # geometric mean 3: dropped
            [ln(1.5), ln(1 / 1.5), 0.0],  # 1: kept
            [ln(0.2), ln(2), ln(100)],  # sqrt(0.4) over its two policy tokens: kept
            [ln(0.1), 0.0, 0.0],  # sqrt(0.1): dropped
        ],
        dtype,
    )
    mask = torch.tensor([[1, 1, 0], [1, 1, 0], [1, 1, 0], [1, 1, 0]], dtype=dtype)
    out = geometric_sequence_mask(learner, sampler, mask)
    expected = [[0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    close(out.weights, expected)
    close(out.mask, expected)
    assert out.metrics["masked_fraction"] == pytest.approx(0.5)
    assert out.metrics["capped_fraction"] == 0.0
    ratios = (9, 1, 1.5, 1 / 1.5, 0.2, 2, 0.1, 1)
    assert out.metrics["mismatch_kl"] == pytest.approx(k3(*ratios) / 8, rel=1e-5)


def test_none_keeps_the_mask_and_reports_the_mismatch():
    learner, sampler = logps([[ln(2), 0.0], [ln(0.5), 3.0]], torch.float64)
    mask = torch.tensor([[1, 1], [1, 0]])
    out = none(learner, sampler, mask)
    close(out.weights, [[1.0, 1.0], [1.0, 0.0]])
    assert torch.equal(out.mask, mask)
    expected = {"capped_fraction": 0.0, "masked_fraction": 0.0, "mismatch_kl": k3(2, 1, 0.5) / 3}
    assert out.metrics == pytest.approx(expected)


@pytest.mark.parametrize("name", sorted(CORRECTIONS))
def test_weights_are_detached_and_empty_masks_are_safe(name):
    learner = torch.tensor([[-0.5, -50.0]], requires_grad=True)
    sampler = torch.tensor([[-1.0, -math.inf]])
    out = CORRECTIONS[name](learner, sampler, torch.tensor([[1, 0]]))
    assert not out.weights.requires_grad
    assert not out.weights.isnan().any()
    empty = CORRECTIONS[name](learner, sampler, torch.zeros(1, 2))
    assert torch.equal(empty.weights, torch.zeros(1, 2))
    assert empty.metrics == {"capped_fraction": 0.0, "masked_fraction": 0.0, "mismatch_kl": 0.0}


def test_result_is_frozen_and_registry_is_complete():
    out = none(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.weights = torch.zeros(1, 1)
    assert set(CORRECTIONS) == {"none", "token_tis", "sequence_tis", "icepop", "geometric_sequence_mask"}


def test_bad_thresholds_are_rejected():
    x, m = torch.zeros(1, 1), torch.ones(1, 1)
    with pytest.raises(ValueError):
        token_tis(x, x, m, cap=0.0)
    with pytest.raises(ValueError):
        icepop(x, x, m, low=2.0, high=1.0)
    with pytest.raises(ValueError):
        geometric_sequence_mask(x, x, m, low=0.0)
