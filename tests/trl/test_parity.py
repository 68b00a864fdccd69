"""TRL's side of ``agentrl compare --parity``: the adapter's trainer and TRL's own loss vs the core reference."""

from __future__ import annotations

import dataclasses

import pytest
from trl import GRPOTrainer

from agentrl_plugins.compare.record import record_batch
from agentrl_plugins.compare.table import parity_table
from agentrl_plugins.errors import RecipeError
from agentrl_plugins.recipe import load_recipe

from agentrl_trl.parity import compute

VARIANTS = [
    ("deepswe_grpopp", {}),
    ("deepswe_grpopp", {"correction.name": "token_tis", "correction.cap": 1.5, "loss.clip_c": None}),
    ("grpo", {"loss.aggregation": "seq-mean-token-mean"}),
    ("dr_grpo", {"loss.aggregation": "token-mean", "correction.name": "icepop", "correction.low": 0.5,
                 "correction.high": 2.0}),
    ("gspo", {"loss.clip_low": 0.02, "loss.clip_high": 0.03}),
    ("gspo", {"loss.aggregation": "seq-mean-token-sum", "filtering.compact": True}),
    ("cispo", {"loss.clip_high": 0.1}),
    ("gigpo", {}),
    ("gigpo", {"advantage.gamma": 0.5, "filtering.compact": True, "loss.aggregation": "seq-mean-token-sum"}),
]


@pytest.fixture(scope="module")
def batch():
    return record_batch(load_recipe("deepswe_grpopp"), seed=0)


@pytest.mark.parametrize("recipe", [load_recipe(name, overrides) for name, overrides in VARIANTS],
                         ids=[f"{name}{sorted(overrides.items())}" for name, overrides in VARIANTS])
def test_trl_computes_the_core_numbers_apart_from_the_dual_clip(batch, recipe):
    scoring = GRPOTrainer._generate_and_score_completions
    result = compute(recipe, batch)
    assert GRPOTrainer._generate_and_score_completions is scoring
    table = parity_table(recipe, batch, [result])
    assert not table.mismatches, table.mismatches
    assert not table.unreported
    noted = result.figure_notes and (recipe.correction.name == "icepop" or recipe.loss.policy == "cispo")
    assert [row.quantity for row in table.figure_differences] == (["figure clip_fraction"] if noted else [])
    if recipe.loss.clip_c is None:
        assert not table.differences
    else:
        (difference,) = table.differences
        assert difference.overrides == {"loss.clip_c": None} and difference.sizes["loss"] > 1e-3


@pytest.fixture(scope="module")
def shaped():
    """A batch recorded with potential shaping: its turns carry shaped rewards."""
    batch = record_batch(load_recipe("potential_shaping"), seed=0)
    assert any(turn.reward for row in batch.turns for turn in row)
    return batch


def test_grpo_turns_on_shaped_turn_rewards_through_trl_is_the_core(shaped):
    recipe = load_recipe("potential_shaping")
    table = parity_table(recipe, shaped, [compute(recipe, shaped)])
    assert not table.mismatches and not table.differences, table.mismatches


def test_a_changed_upper_clip_reaching_trl_is_reported(batch):
    recipe = load_recipe("deepswe_grpopp", {"loss.clip_c": None})
    wrong = compute(load_recipe("deepswe_grpopp", {"loss.clip_c": None, "loss.clip_high": 0.3}), batch)
    table = parity_table(recipe, batch, [wrong])
    assert {row.quantity for row in table.mismatches} == {"loss", "gradient", "gradient norm", "figure clip_fraction"}


def test_several_trainer_ranks_are_refused_by_name(batch):
    with pytest.raises(RecipeError, match="TRL's side computes one trainer rank, not 2"):
        compute(load_recipe("deepswe_grpopp"), dataclasses.replace(batch, ranks=2))
