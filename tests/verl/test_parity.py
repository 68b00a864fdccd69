"""verl's side of ``agentrl compare --parity``: verl's own correction, estimator and loss vs the core reference."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn

from agentrl_plugins.compare.record import record_batch
from agentrl_plugins.compare.table import parity_table
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe import load_recipe

import agentrl_verl.parity as parity
from agentrl_verl.names import estimator_name

VARIANTS = [
    ("deepswe_grpopp", {}),
    ("deepswe_grpopp", {"correction.name": "token_tis", "correction.cap": 1.5}),
    ("deepswe_grpopp", {"correction.name": "icepop", "correction.low": 0.5, "correction.high": 2.0,
                        "loss.aggregation": "token-mean"}),
    ("deepswe_grpopp", {"correction.name": "geometric_sequence_mask", "correction.low": 0.9,
                        "correction.high": 1.2}),
    ("grpo", {"filtering.compact": False}),
    ("dr_grpo", {"loss.aggregation": "seq-mean-token-sum-norm", "loss.norm_constant": 256}),
    ("gspo", {"loss.clip_low": 0.02, "loss.clip_high": 0.03}),
    ("gspo", {"correction.name": "token_tis", "correction.cap": 1.5, "loss.aggregation": "token-mean"}),
    ("cispo", {"loss.clip_high": 0.1}),
    ("gigpo", {}),
    ("gigpo", {"advantage.gamma": 0.5, "filtering.compact": True, "loss.aggregation": "seq-mean-token-sum"}),
    ("deepswe_grpopp", {"distillation.teacher": "teacher", "distillation.coef": 0.5}),
    ("grpo", {"distillation.teacher": "teacher", "distillation.task_reward": False}),
    ("gigpo", {"distillation.teacher": "teacher"}),
]


@pytest.fixture(scope="module")
def batch():
    return record_batch(load_recipe("deepswe_grpopp"), seed=0)


@pytest.mark.parametrize("name, overrides", VARIANTS)
def test_verl_computes_the_core_numbers(batch, name, overrides):
    recipe = load_recipe(name, overrides)
    result = parity.compute(recipe, batch)
    table = parity_table(recipe, batch, [result])
    assert not table.mismatches, table.mismatches
    assert not table.differences and not table.figure_differences
    assert not table.unreported, "every figure of these recipes is one verl logs"
    if recipe.correction.name != "none":
        on = result.weights[batch.response_mask.bool()]
        assert (on != 1).any() and (on <= max(recipe.correction.cap, recipe.correction.high)).all()
        assert (on != 0).any(), "some tokens must keep a weight, or the check compares zeros"


@pytest.fixture(scope="module")
def shaped():
    """A batch recorded with potential shaping: its turns carry shaped rewards."""
    batch = record_batch(load_recipe("potential_shaping"), seed=0)
    assert any(turn.reward for row in batch.turns for turn in row)
    return batch


def test_grpo_turns_on_shaped_turn_rewards_through_verl_is_the_core(shaped):
    recipe = load_recipe("potential_shaping")
    table = parity_table(recipe, shaped, [parity.compute(recipe, shaped)])
    assert not table.mismatches and not table.differences, table.mismatches


def test_gigpo_through_verl_gives_per_token_advantages_that_differ_within_a_trajectory(batch):
    recipe = load_recipe("gigpo")
    result = parity.compute(recipe, batch)
    assert result.advantages.shape == batch.response_mask.shape
    on_policy = [row[mask.bool()] for row, mask in zip(result.advantages, batch.response_mask)]
    assert any(len(set(row.tolist())) > 1 for row in on_policy), "step groups credit one episode's turns apart"


def test_a_turn_level_estimator_outside_the_recording_trainer_is_a_clear_error(batch):
    """verl's own lookup finds agentrl_gigpo; called with no turns handed over, it says where it must run."""
    estimate = get_adv_estimator_fn(estimator_name("gigpo"))
    rows = len(batch.rewards)
    with pytest.raises(AgentRLError, match=rf"needs the turn records of all {rows} rows \(0 carried\): it runs inside "
                                           "agentrl's recording trainer"):
        estimate(parity.token_rewards(batch), batch.response_mask, None, [str(g) for g in batch.group_ids.tolist()])


def test_a_changed_upper_clip_in_the_mapping_is_reported(batch, monkeypatch):
    recipe = load_recipe("deepswe_grpopp")
    describe = parity.describe

    def wrong_clip(recipe, paths=None):
        config = describe(recipe, paths)
        config.native["actor_rollout_ref.actor.clip_ratio_high"] = 0.3
        return config

    monkeypatch.setattr(parity, "describe", wrong_clip)
    table = parity_table(recipe, batch, [parity.compute(recipe, batch)])
    assert {row.quantity for row in table.mismatches} == {"loss", "gradient", "gradient norm", "figure clip_fraction"}



@pytest.fixture(scope="module")
def two_ranks(batch):
    return dataclasses.replace(batch, ranks=2)


@pytest.mark.parametrize("name, overrides", VARIANTS)
def test_verl_on_two_ranks_computes_the_one_rank_numbers(two_ranks, name, overrides):
    recipe = load_recipe(name, overrides)
    table = parity_table(recipe, two_ranks, [parity.compute(recipe, two_ranks)])
    assert not table.mismatches, table.mismatches
    assert not table.differences
    assert {row.quantity for row in table.figure_differences} <= {"figure clip_fraction", "figure is_capped_fraction"}


def test_per_rank_denominators_would_be_caught(two_ranks, monkeypatch):
    """The control: each rank normalising the token-mean by its own tokens puts the loss and gradient off."""

    def local_denominators(batch, actor, logprobs, advantages, response_mask, is_weights):
        policy_loss, losses = get_policy_loss_fn(actor.policy_loss.loss_mode), []
        for rows in batch.rank_rows():
            mask = response_mask[rows]
            actor.global_batch_info.update(dp_size=1, batch_num_tokens=mask.sum().item(), global_batch_size=len(rows))
            loss, metrics = policy_loss(batch.old_logprobs[rows], logprobs[rows], advantages[rows], mask.bool(),
                                        actor.loss_agg_mode, actor, None)
            losses.append(loss)
        return torch.stack(losses).mean(), metrics

    recipe = load_recipe("deepswe_grpopp", {"loss.aggregation": "token-mean"})
    monkeypatch.setattr(parity, "ranks_loss", local_denominators)
    table = parity_table(recipe, two_ranks, [parity.compute(recipe, two_ranks)])
    assert {"loss", "gradient"} <= {row.quantity for row in table.mismatches}
