"""TRL's side of ``agentrl compare --parity``: the adapter's trainer and TRL's own loss vs the core reference."""

from __future__ import annotations

import dataclasses

import pytest
from trl import GRPOTrainer

from agentrl_plugins.compare.record import record_batch
from agentrl_plugins.compare.reference import reference
from agentrl_plugins.compare.side import mapping_rows
from agentrl_plugins.compare.table import parity_table
from agentrl_plugins.errors import RecipeError
from agentrl_plugins.recipe import load_recipe

from agentrl_trl.config import describe, grpo_config_kwargs
from agentrl_trl.parity import compute

VARIANTS = [
    ("deepswe_grpopp", {}),
    ("deepswe_grpopp", {"loss.clip_c": 1.5, "loss.aggregation": "seq-mean-token-mean"}),
    ("deepswe_grpopp", {"correction.name": "token_tis", "correction.cap": 1.5, "loss.clip_c": None}),
    ("grpo", {"loss.aggregation": "seq-mean-token-mean"}),
    ("dr_grpo", {"loss.aggregation": "token-mean", "correction.name": "icepop", "correction.low": 0.5,
                 "correction.high": 2.0}),
    ("gspo", {"loss.clip_low": 0.02, "loss.clip_high": 0.03}),
    ("gspo", {"loss.aggregation": "seq-mean-token-sum", "filtering.compact": True}),
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


@pytest.mark.parametrize("recipe", [load_recipe(name, overrides) for name, overrides in VARIANTS],
                         ids=[f"{name}{sorted(overrides.items())}" for name, overrides in VARIANTS])
def test_trl_computes_the_core_numbers_dual_clip_included(batch, recipe):
    scoring = GRPOTrainer._generate_and_score_completions
    result = compute(recipe, batch)
    assert GRPOTrainer._generate_and_score_completions is scoring
    table = parity_table(recipe, batch, [result])
    assert not table.mismatches, table.mismatches
    assert not table.unreported and not table.differences and not result.by_design
    noted = result.figure_notes and (recipe.correction.name == "icepop" or recipe.loss.policy == "cispo")
    assert [row.quantity for row in table.figure_differences] == (["figure clip_fraction"] if noted else [])


@pytest.mark.parametrize("clip_c", [3.0, 1.5])
def test_the_dual_clip_binds_on_the_batch_and_reaches_trl_as_delta(batch, clip_c):
    """With the parity test above (both values among its variants), TRL's loss and gradient are the dual clip's."""
    recipe = load_recipe("deepswe_grpopp", {"loss.clip_c": clip_c})
    assert grpo_config_kwargs(recipe)["delta"] == clip_c
    assert {row["key"]: row["status"] for row in mapping_rows(describe(recipe))}["loss.clip_c"] == "mapped"
    without = reference(load_recipe("deepswe_grpopp", {"loss.clip_c": None}), batch)
    assert abs(reference(recipe, batch).loss - without.loss) > 1e-3, "the dual clip changes this batch's loss"


def test_a_dual_clip_inside_the_clip_range_is_refused_and_a_loss_without_one_passes_no_delta():
    with pytest.raises(RecipeError, match=r"loss.clip_c = 1.2 must exceed 1 \+ loss.clip_high = 1.28"):
        describe(load_recipe("deepswe_grpopp", {"loss.clip_c": 1.2}))
    assert grpo_config_kwargs(load_recipe("deepswe_grpopp", {"loss.clip_c": None}))["delta"] is None
    gspo = load_recipe("gspo", {"loss.clip_c": 3.0})
    assert grpo_config_kwargs(gspo)["delta"] is None, "gspo takes no dual clip: TRL must not clamp its ratio"


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
