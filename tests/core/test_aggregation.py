"""Loss aggregation and the clipped surrogate, against hand-computed numbers."""

import math

import pytest
import torch

from agentrl_plugins.algorithms import LOSS_AGG_MODES, aggregate_loss, clipped_surrogate

DTYPES = [torch.float32, torch.float64]
nan = math.nan


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 7 / 3),  # (1 + 2 + 4) / 3 tokens
        ("token-sum", 7.0),
        ("seq-mean-token-sum", 3.5),  # (3 + 4) / 2 non-empty rows
        ("seq-mean-token-sum-norm", 0.35),  # 3.5 / 10
        ("seq-mean-token-mean", 2.75),  # (1.5 + 4) / 2 non-empty rows
    ],
)
def test_modes_by_hand(dtype, mode, expected):
    loss = torch.tensor([[1.0, 2.0, nan], [4.0, nan, nan], [nan, 8.0, 9.0]], dtype=dtype)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    out = aggregate_loss(loss, mask, mode, norm_constant=10)
    assert out.dtype == dtype and out.dim() == 0
    assert out.item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_empty_mask_gives_zero_and_zero_gradient(mode):
    loss = torch.tensor([[1.0, nan]], requires_grad=True)
    out = aggregate_loss(loss, torch.zeros(1, 2), mode, norm_constant=4)
    out.backward()
    assert out.item() == 0.0
    assert torch.equal(loss.grad, torch.zeros(1, 2))


@pytest.mark.parametrize("garbage", [nan, math.inf, -math.inf])
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_nan_or_inf_off_the_mask_reaches_neither_the_result_nor_the_gradient(mode, garbage):
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], dtype=torch.float64)
    for mask in (torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]]).bool(),
                 torch.tensor([[1.0, 0.5, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)):
        soiled = torch.where(mask.bool(), values, garbage).requires_grad_()
        clean = torch.where(mask.bool(), values, 0.0).requires_grad_()
        out, expected = (aggregate_loss(x, mask, mode, norm_constant=10) for x in (soiled, clean))
        (gradient,), (clean_gradient,) = torch.autograd.grad(out, soiled), torch.autograd.grad(expected, clean)
        assert out.item() == expected.item() and math.isfinite(out.item())
        assert torch.equal(gradient, clean_gradient) and not gradient[~mask.bool()].any()


def test_unknown_mode_and_missing_norm_constant():
    loss, mask = torch.zeros(1, 1), torch.ones(1, 1)
    with pytest.raises(ValueError, match="token-mean"):
        aggregate_loss(loss, mask, "token_mean")
    with pytest.raises(ValueError, match="norm_constant"):
        aggregate_loss(loss, mask, "seq-mean-token-sum-norm")


def surrogate_inputs(dtype):
    ratios = torch.tensor([[1.5, 0.5, 1.1], [1.5, 0.5, 4.0], [2.0, 2.0, 2.0]], dtype=dtype)
    old = torch.full_like(ratios, -2.0)
    logp = (old + ratios.log()).requires_grad_()
    mask = torch.tensor([[1, 1, 1], [1, 1, 1], [0, 0, 0]])
    return logp, old, torch.tensor([1.0, -1.0, 2.0], dtype=dtype), mask


def close(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_clipped_surrogate_by_hand(dtype):
    logp, old, adv, mask = surrogate_inputs(dtype)
    out = clipped_surrogate(logp, old, adv, mask)
    # A > 0: -min(r, clip(r, 0.8, 1.28)); A < 0: max(r, clip(r, 0.8, 1.28)); masked row: 0
    close(out.per_token_loss * mask, [[-1.28, -0.5, -1.1], [1.5, 0.8, 4.0], [0.0, 0.0, 0.0]])
    assert out.figures() == {"clip_fraction": pytest.approx(2 / 6), "dual_clip_fraction": 0.0}
    dual = clipped_surrogate(logp, old, adv, mask, clip_c=3.0)
    close(dual.per_token_loss * mask, [[-1.28, -0.5, -1.1], [1.5, 0.8, 3.0], [0.0, 0.0, 0.0]])
    assert dual.figures()["dual_clip_fraction"] == pytest.approx(1 / 6)


def test_token_advantages_and_weights():
    logp, old, adv, mask = surrogate_inputs(torch.float64)
    weights = torch.tensor([[2.0, 1.0, 0.5], [0.0, 1.0, 1.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    out = clipped_surrogate(logp, old, adv.unsqueeze(-1).expand(3, 3), mask, weights=weights.requires_grad_())
    close(out.per_token_loss * mask, [[-2.56, -0.5, -0.55], [0.0, 0.8, 4.0], [0.0, 0.0, 0.0]])
    aggregate_loss(out.per_token_loss, mask, "token-sum").backward()
    assert weights.grad is None


def test_fully_masked_row_gets_exactly_zero_gradient():
    logp, old, adv, mask = surrogate_inputs(torch.float64)
    old = old.clone()
    old[2] = -math.inf  # garbage in padding must not leak
    out = clipped_surrogate(logp, old, adv, mask, clip_c=3.0)
    aggregate_loss(out.per_token_loss, mask, "seq-mean-token-sum").backward()
    assert torch.equal(logp.grad[2], torch.zeros(3, dtype=torch.float64))
    assert logp.grad[0, 1].item() != 0.0


def test_dual_clip_constant_must_exceed_one():
    logp, old, adv, mask = surrogate_inputs(torch.float32)
    with pytest.raises(ValueError):
        clipped_surrogate(logp, old, adv, mask, clip_c=1.0)
