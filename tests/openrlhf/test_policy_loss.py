"""OpenRLHF's own ``PolicyLoss`` (native flags, or the hook's patched ``forward``) against the core reference.

Every case parses the adapter's flags with OpenRLHF's command line and builds ``PolicyLoss`` as
``ppo_actor`` does, in float64, with clip 0.2/0.28.
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import flags_of, parse_openrlhf_cli
from openrlhf.models.loss import PolicyLoss
from openrlhf.utils.loss_utils import _optimizer_step_loss_norm

from agentrl_plugins.algorithm import RecipeAlgorithm
from agentrl_plugins.algorithms import aggregate_loss, clipped_surrogate, geometric_sequence_mask
from agentrl_plugins.errors import AgentRLError

from agentrl_openrlhf.adapter import OpenRLHFAdapter
from agentrl_openrlhf.config import plan
from agentrl_openrlhf.patches import patches
from agentrl_openrlhf.recorder import save_logs_method

CORRECTIONS = ["none", "token_tis", "icepop", "sequence_tis", "geometric_sequence_mask"]
AGGREGATIONS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "token-sum"]
NATIVE = {"none", "token_tis", "icepop"}


def batch() -> dict[str, torch.Tensor]:
    """Four rows (one fully masked, as a compact-filtered episode) with clipped, capped and rejected tokens."""
    g = torch.Generator().manual_seed(7)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]]).bool()
    old = -torch.rand(4, 6, generator=g, dtype=torch.float64) * 3
    logp = old + (torch.rand(4, 6, generator=g, dtype=torch.float64) - 0.5) * 0.8
    rollout = old - torch.tensor([[1.2, -0.9, 0.1, 2.5, 0, 0], [0.4, 0.3, 0, 0, 0, 0], [0.0] * 6,
                                  [-0.2, 0.1, -0.1, 0.05, 0.0, 0.1]], dtype=torch.float64)
    advantages = torch.tensor([1.5, -0.75, 0.0, -1.0], dtype=torch.float64)[:, None] * mask
    return {"log_probs": logp.requires_grad_(), "old_log_probs": old, "advantages": advantages,
            "action_mask": mask, "rollout_log_probs": rollout}


def openrlhf_loss(recipe, monkeypatch) -> PolicyLoss:
    """``PolicyLoss`` as ``ppo_actor`` builds it from OpenRLHF's parsed arguments, with the recipe's patches."""
    for patch in patches(recipe):
        monkeypatch.setattr(patch.owner, patch.name, patch.replacement)
    args = parse_openrlhf_cli(flags_of(OpenRLHFAdapter().describe(recipe).command), monkeypatch)
    return PolicyLoss(
        clip_eps_low=args.actor.eps_clip_low_high[0],
        clip_eps_high=args.actor.eps_clip_low_high[1],
        dual_clip=args.actor.dual_clip,
        token_level_loss=args.actor.loss_agg_mode == "token-mean",
        policy_loss_type=args.actor.policy_loss_type,
        is_correction_level=args.algo.advantage.is_correction_level,
        is_correction_mode=args.algo.advantage.is_correction_mode,
        is_correction_gating=args.algo.advantage.is_correction_gating,
        is_correction_threshold=args.algo.advantage.is_correction_threshold,
    )


def core_loss(recipe, inputs, rows=slice(None)) -> torch.Tensor:
    """The core reference: correction weights, clipped surrogate, aggregation over the input mask."""
    parts = {key: value[rows] for key, value in inputs.items()}
    correction = RecipeAlgorithm.from_recipe(recipe).correct(parts["old_log_probs"], parts["rollout_log_probs"],
                                                             parts["action_mask"])
    surrogate = clipped_surrogate(parts["log_probs"], parts["old_log_probs"], parts["advantages"],
                                  parts["action_mask"], clip_low=recipe.loss.clip_low, clip_high=recipe.loss.clip_high,
                                  clip_c=recipe.loss.clip_c, weights=correction.weights)
    return aggregate_loss(surrogate.per_token_loss, parts["action_mask"], recipe.loss.aggregation,
                          norm_constant=recipe.loss.norm_constant)


def value_and_grad(loss: torch.Tensor, inputs) -> tuple[float, torch.Tensor]:
    (grad,) = torch.autograd.grad(loss, inputs["log_probs"])
    return loss.item(), grad


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("correction", CORRECTIONS)
def test_policy_loss_equals_the_core_reference(use_recipe, monkeypatch, correction, aggregation):
    recipe = use_recipe({"correction.name": correction, "correction.cap": 1.5, "correction.low": 0.5,
                         "correction.high": 2.0, "loss.aggregation": aggregation, "loss.norm_constant": 64})
    assert (recipe.loss.clip_low, recipe.loss.clip_high) == (0.2, 0.28)
    native = correction in NATIVE and aggregation in ("token-mean", "seq-mean-token-mean")
    assert plan(recipe).policy_loss == (not native)
    loss_fn = openrlhf_loss(recipe, monkeypatch)
    inputs = batch()
    loss, clip_ratio, *_ = loss_fn(**inputs)
    got, got_grad = value_and_grad(loss, inputs)
    expected, expected_grad = value_and_grad(core_loss(recipe, inputs), inputs)
    assert got == pytest.approx(expected, abs=1e-6) and torch.allclose(got_grad, expected_grad, atol=1e-6)
    assert 0 < clip_ratio.item() < 1


@pytest.mark.parametrize("aggregation", AGGREGATIONS[:4])
@pytest.mark.parametrize("correction", ["none", "icepop", "geometric_sequence_mask"])
def test_an_optimizer_step_of_two_micro_batches_is_the_core_loss_of_the_whole_batch(use_recipe, monkeypatch,
                                                                                     correction, aggregation):
    recipe = use_recipe({"correction.name": correction, "correction.low": 0.5, "correction.high": 2.0,
                         "loss.aggregation": aggregation, "loss.norm_constant": 64})
    loss_fn = openrlhf_loss(recipe, monkeypatch)
    inputs = batch()
    halves = [slice(0, 2), slice(2, 4)]
    norm = _optimizer_step_loss_norm([inputs["action_mask"][h] for h in halves], None, 1, 2)
    step = sum(loss_fn(**{k: v[h] for k, v in inputs.items()}, **norm)[0] for h in halves) / 2
    assert step.item() == pytest.approx(core_loss(recipe, inputs).item(), abs=1e-6)


@pytest.mark.parametrize("aggregation", AGGREGATIONS[:4])
def test_denominators_given_as_numbers_give_what_tensors_give(use_recipe, monkeypatch, aggregation):
    """OpenRLHF passes the step's counts as tensors or, with dynamic batches, as floats; an empty step as either
    is a zero loss (in the injected loss: a correction OpenRLHF lacks makes sure it is the one)."""
    recipe = use_recipe({"correction.name": "sequence_tis", "correction.cap": 1.5, "loss.aggregation": aggregation,
                         "loss.norm_constant": 64})
    assert plan(recipe).policy_loss
    loss_fn = openrlhf_loss(recipe, monkeypatch)
    inputs = batch()
    norm = _optimizer_step_loss_norm([inputs["action_mask"][:2], inputs["action_mask"][2:]], None, 1, 2)
    counts = [key for key, value in norm.items() if isinstance(value, torch.Tensor)]
    assert sorted(counts) == ["batch_num_tokens", "global_batch_size"]
    numbers = {**norm, **{key: float(norm[key]) for key in counts}}
    half = {k: v[:2] for k, v in inputs.items()}
    as_tensors, as_numbers = loss_fn(**half, **norm)[0], loss_fn(**half, **numbers)[0]
    assert as_numbers.item() == pytest.approx(as_tensors.item(), rel=1e-12)
    assert torch.allclose(value_and_grad(as_numbers, inputs)[1], value_and_grad(as_tensors, inputs)[1], rtol=1e-12)
    empty = {**inputs, "action_mask": torch.zeros(4, 6, dtype=torch.bool)}
    loss, grad = value_and_grad(loss_fn(**empty, **{**norm, **{key: 0.0 for key in counts}})[0], inputs)
    assert loss == 0.0 and torch.equal(grad, torch.zeros_like(grad))


def test_dual_clip_is_native_and_equal(use_recipe, monkeypatch):
    recipe = use_recipe({"loss.clip_c": 1.5, "loss.aggregation": "token-mean"})
    assert not plan(recipe).policy_loss
    loss_fn = openrlhf_loss(recipe, monkeypatch)
    assert loss_fn.dual_clip == 1.5
    inputs = batch()
    inputs["log_probs"] = (inputs["old_log_probs"] + 1.0).requires_grad_()
    assert loss_fn(**inputs)[0].item() == pytest.approx(core_loss(recipe, inputs).item(), abs=1e-6)


def test_openrlhf_sequence_masking_differs_from_the_core_by_the_token_ratios(use_recipe, monkeypatch):
    """By design (documented in the core): OpenRLHF's ``seq`` + ``mask`` also weighs kept tokens by their ratio."""
    recipe = use_recipe({"correction.name": "geometric_sequence_mask", "correction.low": 0.5,
                         "correction.high": 2.0, "loss.aggregation": "token-mean"})
    inputs = batch()
    native = PolicyLoss(0.2, 0.28, is_correction_level="seq", is_correction_mode="mask",
                        is_correction_threshold=[0.5, 2.0])(**inputs)[0]
    old, rollout, mask = inputs["old_log_probs"], inputs["rollout_log_probs"], inputs["action_mask"]
    kept = geometric_sequence_mask(old, rollout, mask, low=0.5, high=2.0)
    assert kept.metrics["masked_fraction"] > 0
    weights = kept.weights * (old - rollout).exp()
    surrogate = clipped_surrogate(inputs["log_probs"], old, inputs["advantages"], mask, weights=weights)
    assert native.item() == pytest.approx(aggregate_loss(surrogate.per_token_loss, mask, "token-mean").item(), abs=1e-6)
    assert not math.isclose(native.item(), core_loss(recipe, inputs).item(), abs_tol=1e-3)


@pytest.mark.parametrize("aggregation", ["seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_a_step_whose_every_episode_was_filtered_has_zero_loss_not_nan(use_recipe, monkeypatch, aggregation):
    recipe = use_recipe({"loss.aggregation": aggregation, "loss.norm_constant": 64})
    inputs = {**batch(), "action_mask": torch.zeros(4, 6, dtype=torch.bool)}
    norm = _optimizer_step_loss_norm([inputs["action_mask"]], None, 1, 1)
    assert norm["global_batch_size"].item() == norm["batch_num_tokens"].item() == 0
    native = PolicyLoss(token_level_loss=True)(**{**inputs, "log_probs": inputs["log_probs"].detach()}, **norm)[0]
    assert math.isnan(native.item()), "OpenRLHF's own token-mean divides 0 by 0 here"
    loss, grad = value_and_grad(openrlhf_loss(recipe, monkeypatch)(**inputs, **norm)[0], inputs)
    assert loss == 0.0 and torch.equal(grad, torch.zeros_like(grad))


def test_a_step_whose_gathered_policy_loss_is_not_finite_stops_and_names_the_loss(use_recipe):
    """The loss is checked once a step, on the figure OpenRLHF has already gathered, not on every micro-batch."""
    use_recipe({"loss.policy": "cispo", "loss.aggregation": "token-mean", "loss.clip_high": 4.0})
    logged = []
    save = save_logs_method(lambda self, step, logs, states: logged.append(step))
    with pytest.raises(AgentRLError, match=r"policy loss 'cispo': the loss is nan, not finite on the loss mask"):
        save(object(), 3, {"policy_loss": float("nan")})
    assert logged == [], "OpenRLHF saves no checkpoint of the step, which a resume would start from"
