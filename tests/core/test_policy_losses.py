"""Policy losses as plugins: the built-ins against formulas written from the papers, a third-party loss through
``agentrl_register_policy_losses``, and what a loss that breaks its contract gets."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from agentrl_plugins import hookimpl
from agentrl_plugins.algorithm import RecipeAlgorithm, UnusedSettingWarning
from agentrl_plugins.algorithms.aggregation import LOSS_AGG_MODES, aggregate_loss
from agentrl_plugins.algorithms.policy_loss import PolicyLossResult
from agentrl_plugins.components import PolicyLoss
from agentrl_plugins.errors import AgentRLError, UnknownNameError
from agentrl_plugins.plugins import PluginManager, get_plugin_manager
from agentrl_plugins.recipe import load_recipe

F64 = torch.float64


def batch(seed: int = 0, rows: int = 6, length: int = 9):
    generator = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, length, generator=generator, dtype=F64) * 3
    logp = old + torch.randn(rows, length, generator=generator, dtype=F64) * 0.4
    advantages = torch.randn(rows, generator=generator, dtype=F64)
    lengths = torch.randint(2, length + 1, (rows,), generator=generator)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(F64)
    return logp, old, advantages, mask


def algorithm(policy: str, manager=None, **settings) -> RecipeAlgorithm:
    recipe = load_recipe("grpo", {"loss.policy": policy, **settings}, plugin_manager=manager)
    return RecipeAlgorithm.from_recipe(recipe, manager)


def test_the_builtins_are_registered_through_the_hook():
    registry = get_plugin_manager().registry("policy_loss")
    assert {"ppo_clip", "gspo", "cispo"} <= set(registry.names())
    assert registry.entry("gspo").distribution == "agentrl-plugins"


def test_gspo_is_the_papers_sequence_level_objective_with_seq_mean_token_mean():
    logp, old, advantages, mask = batch()
    settings = {"loss.clip_low": 0.05, "loss.clip_high": 0.08, "loss.aggregation": "seq-mean-token-mean"}
    learner = logp.clone().requires_grad_()
    loss = algorithm("gspo", **settings).loss(learner, old, advantages, mask)
    (gradient,) = torch.autograd.grad(loss, learner)
    # Zheng et al. 2025, eq. 5-7: s_i = (pi/pi_old)^(1/|y_i|); J = mean_i min(s_i A_i, clip(s_i, 1-e_l, 1+e_h) A_i)
    paper = logp.clone().requires_grad_()
    s = (((paper - old) * mask).sum(-1) / mask.sum(-1)).exp()
    objective = torch.minimum(s * advantages, s.clamp(1 - 0.05, 1 + 0.08) * advantages).mean()
    (paper_gradient,) = torch.autograd.grad(-objective, paper)
    assert loss.item() == pytest.approx(-objective.item(), abs=1e-12)
    torch.testing.assert_close(gradient, paper_gradient, atol=1e-12, rtol=0)
    clipped = ((s < 0.95) & (advantages < 0)) | ((s > 1.08) & (advantages > 0))
    assert 0 < clipped.sum() < len(s)  # the batch has clipped and unclipped sequences
    result = algorithm("gspo", **settings).policy_loss(logp, old, advantages, mask)
    expected = (clipped[:, None].double() * mask).sum() / mask.sum()
    assert result.figures()["clip_fraction"] == pytest.approx(expected.item())


def test_cispo_clips_the_weight_not_the_update_so_every_token_keeps_its_gradient():
    logp, old, advantages, mask = batch(seed=1)
    learner = logp.clone().requires_grad_()
    result = algorithm("cispo", **{"loss.clip_high": 0.3}).policy_loss(learner, old, advantages, mask)
    (gradient,) = torch.autograd.grad(aggregate_loss(result.per_token_loss, mask, "token-sum"), learner)
    # MiniMax-M1 (2025), eq. 4: J = sg(r_hat) A log pi; r_hat = min(r, 1 + e_high) with no lower bound here
    ratio = (logp - old).exp()
    weight = ratio.clamp(max=1.3)
    torch.testing.assert_close(result.per_token_loss * mask, -(weight * advantages[:, None] * logp) * mask,
                               atol=1e-12, rtol=0)
    torch.testing.assert_close(gradient, -(weight * advantages[:, None]) * mask, atol=1e-12, rtol=0)
    assert bool(((gradient != 0) == mask.bool()).all())  # every masked-in token has a gradient, capped or not
    capped = (ratio > 1.3) & mask.bool()
    assert capped.any() and result.figures()["clip_fraction"] == pytest.approx((capped.sum() / mask.sum()).item())


def test_ppo_clip_is_the_clipped_surrogate_with_dual_clip():
    logp, old, advantages, mask = batch(seed=2)
    logp = torch.where(advantages[:, None] < 0, logp + 1.1, logp)  # ratios near 3 where A < 0: the dual clip binds
    result = algorithm("ppo_clip", **{"loss.clip_c": 3.0}).policy_loss(logp, old, advantages, mask)
    ratio = (logp - old).exp()
    a = advantages[:, None]
    expected = torch.maximum(-a * ratio, -a * ratio.clamp(0.8, 1.2))
    expected = torch.where(a < 0, torch.minimum(expected, -3.0 * a), expected) * mask
    torch.testing.assert_close(result.per_token_loss * mask, expected, atol=1e-12, rtol=0)
    assert set(result.metrics) == {"clip_fraction", "dual_clip_fraction"}
    dual = (a < 0) & (torch.maximum(-a * ratio, -a * ratio.clamp(0.8, 1.2)) > -3.0 * a) & mask.bool()
    assert dual.any() and result.figures()["dual_clip_fraction"] == pytest.approx((dual.sum() / mask.sum()).item())


@pytest.mark.parametrize("policy", ["ppo_clip", "gspo", "cispo"])
def test_a_loss_on_a_micro_batch_leaves_its_figures_on_the_device_and_ignores_what_is_off_the_mask(policy):
    """No host sync per micro-batch: the figures are 0-dim tensors until the step gathers them; the loss does not
    mask (the aggregation does), so what lies off the mask reaches neither the loss nor its gradient."""
    logp, old, advantages, mask = batch(seed=4)
    result = algorithm(policy).policy_loss(logp, old, advantages, mask)
    assert isinstance(result.metrics["clip_fraction"], torch.Tensor) and result.metrics["clip_fraction"].dim() == 0
    assert result.figures().keys() == result.metrics.keys()
    off = ~mask.bool()
    shifted = torch.where(off, logp + 5.0, logp).requires_grad_()  # off the mask, ratios of e^5
    loss = algorithm(policy).loss(shifted, old, advantages, mask)
    (gradient,) = torch.autograd.grad(loss, shifted)
    clean = logp.clone().requires_grad_()
    expected = algorithm(policy).loss(clean, old, advantages, mask)
    assert off.any() and loss.item() == expected.item() and not gradient[off].any()
    torch.testing.assert_close(gradient, torch.autograd.grad(expected, clean)[0], atol=0, rtol=0)


def corrected_loss(recipe_algorithm, logp, old, sampler, advantages, mask, soil=lambda weights: weights):
    """The loss, its gradient and the correction of a batch, with the correction's weights passed through ``soil``."""
    learner = logp.clone().requires_grad_()
    corrected = recipe_algorithm.correct(learner.detach(), sampler, mask)
    loss = recipe_algorithm.loss(learner, old, advantages, mask, soil(corrected.weights))
    return loss.item(), torch.autograd.grad(loss, learner)[0], corrected


CORRECTIONS = ("none", "token_tis", "sequence_tis", "icepop", "geometric_sequence_mask")
POLICIES = {"ppo_clip": {}, "ppo_clip+dual_clip": {"loss.clip_c": 3.0}, "gspo": {}, "cispo": {}}


@pytest.mark.parametrize("garbage", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("policy", POLICIES)
def test_nan_or_inf_in_the_padding_of_any_input_reaches_neither_the_loss_nor_its_gradient(policy, mode, garbage):
    """A framework's padding (log-probs, the sampler's, per-token advantages, weights) may hold anything: with
    every correction, the loss, its gradient and the correction are those of the same batch padded with 0."""
    logp, old, advantages, mask = batch(seed=5)
    generator = torch.Generator().manual_seed(5)
    sampler = old + torch.randn(old.shape, generator=generator, dtype=F64) * 0.2
    advantages = advantages[:, None] * (0.5 + torch.rand(old.shape, generator=generator, dtype=F64))
    off = ~mask.bool()
    assert off.any()

    def soiled(values):
        return torch.where(off, torch.full_like(values, garbage), values)

    settings = {"loss.aggregation": mode, **POLICIES[policy]}
    settings |= {"loss.norm_constant": 9} if mode == "seq-mean-token-sum-norm" else {}
    inputs = {"logp": logp, "old": old, "sampler": sampler, "advantages": advantages}
    for correction in CORRECTIONS:
        recipe_algorithm = algorithm(policy.split("+")[0], **settings, **{"correction.name": correction})
        clean = corrected_loss(recipe_algorithm, **inputs, mask=mask)
        # one input at a time (a clamp's gradient stops NaN where it is out of range, hiding another's), then all
        for name in [*inputs, "weights", "all"]:
            dirty = corrected_loss(recipe_algorithm, **{key: soiled(value) if name in (key, "all") else value
                                                        for key, value in inputs.items()}, mask=mask,
                                   soil=soiled if name in ("weights", "all") else lambda weights: weights)
            where = f"{correction}, {name}"
            assert dirty[0] == clean[0] and math.isfinite(clean[0]), where
            assert torch.equal(dirty[1], clean[1]), where
            assert not dirty[1][off].any() and clean[1][~off].any(), where
            assert torch.equal(dirty[2].weights, clean[2].weights) and dirty[2].metrics == clean[2].metrics, where


def test_a_large_change_at_a_few_tokens_of_a_long_episode_trips_the_token_clip_and_not_the_sequence_one():
    length = 2000
    old = torch.full((1, length), -1.0, dtype=F64)
    logp = old.clone()
    logp[0, 0] += 0.5  # one token e^0.5 = 1.65 times likelier
    mask, advantage = torch.ones(1, length, dtype=F64), torch.tensor([1.0], dtype=F64)
    token = algorithm("ppo_clip").policy_loss(logp, old, advantage, mask).figures()["clip_fraction"]
    sequence = algorithm("gspo", **{"loss.clip_low": 3e-4, "loss.clip_high": 4e-4})
    assert token == pytest.approx(1 / length)
    assert sequence.policy_loss(logp, old, advantage, mask).figures()["clip_fraction"] == 0.0  # s = e^(0.5/2000)
    assert sequence.policy_loss(logp + 1e-3, old, advantage, mask).figures()["clip_fraction"] == 1.0


class Reinforce:
    """A third-party loss: -A log pi on every token, no ratio."""

    @hookimpl
    def agentrl_register_policy_losses(self, register):
        register(PolicyLoss("reinforce", lambda inputs: PolicyLossResult(
            -inputs.advantages * inputs.logp * inputs.mask, {"clip_fraction": 0.0}), "Plain REINFORCE."))
        register(PolicyLoss("wrong_shape", lambda inputs: PolicyLossResult(inputs.logp.sum(-1), {
            "clip_fraction": 0.0}), "Returns one value per row."))
        register(PolicyLoss("not_finite", lambda inputs: PolicyLossResult(inputs.logp * float("nan"), {
            "clip_fraction": 0.0}), "Returns NaN."))
        register(PolicyLoss("tensor_figure", lambda inputs: PolicyLossResult(inputs.logp * 0, {
            "clip_fraction": inputs.logp[0]}), "Returns a figure per token of the first row."))


@pytest.fixture(scope="module")
def manager():
    manager = PluginManager()
    manager.add_plugin(Reinforce(), "reinforce-plugin", "reinforce-dist")
    return manager


def test_a_plugins_policy_loss_runs_through_the_recipe(manager):
    logp, old, advantages, mask = batch(seed=3)
    assert manager.registry("policy_loss").entry("reinforce").distribution == "reinforce-dist"
    loss = algorithm("reinforce", manager, **{"loss.aggregation": "token-sum"}).loss(logp, old, advantages, mask)
    assert loss.item() == pytest.approx(aggregate_loss(-advantages[:, None] * logp, mask, "token-sum").item())


@pytest.mark.parametrize("name, message", [
    ("wrong_shape", r"policy loss 'wrong_shape': per_token_loss must be a tensor of the log-probs' shape \(6, 9\)"),
    ("not_finite", r"policy loss 'not_finite': the loss is nan, not finite on the loss mask"),
    ("tensor_figure", r"policy loss 'tensor_figure': metrics must be floats or 0-dim tensors without gradient.*"
                      r"'clip_fraction': 'Tensor of shape \(9,\)'"),
])
def test_a_loss_that_breaks_the_contract_is_named_with_what_was_expected(manager, name, message):
    with pytest.raises(AgentRLError, match=message):
        algorithm(name, manager).loss(*batch())


def test_an_unknown_loss_lists_close_matches_and_an_unused_setting_is_said():
    with pytest.raises(UnknownNameError, match="gspo"):
        algorithm("gpso")
    with pytest.warns(UnusedSettingWarning, match=r"loss.clip_c = 3.0 has no effect with loss.policy = 'gspo'"):
        algorithm("gspo", **{"loss.clip_c": 3.0})


def test_every_loss_parameter_a_loss_does_not_take_is_said_and_one_left_at_its_default_is_not(manager):
    with pytest.warns(UnusedSettingWarning, match=r"cispo: loss.clip_low = 0.1 has no effect with loss.policy = "
                                                  r"'cispo', which takes clip_high"):
        RecipeAlgorithm.from_recipe(load_recipe("cispo", {"loss.clip_low": 0.1}))
    with pytest.warns(UnusedSettingWarning) as said:
        algorithm("reinforce", manager, **{"loss.clip_high": 0.28, "loss.clip_c": 3.0})
    assert [str(warning.message).split(" has")[0] for warning in said] == [
        "grpo: loss.clip_high = 0.28", "grpo: loss.clip_c = 3.0"]
    assert "which takes none" in str(said[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnusedSettingWarning)
        RecipeAlgorithm.from_recipe(load_recipe("cispo"))  # clip_low at its default: nothing to say
        algorithm("reinforce", manager)
