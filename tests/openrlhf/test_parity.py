"""OpenRLHF's side of ``agentrl compare --parity``: its own CLI, estimator and ``PolicyLoss`` vs the core reference.

The variants call the side in this process (it restores the OpenRLHF classes it patches, which a test checks);
one case runs it as ``agentrl compare`` does, in a subprocess of this environment.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from agentrl_plugins.compare.batch import write_input
from agentrl_plugins.compare.record import record_batch
from agentrl_plugins.compare.runner import FrameworkEnv, run_side
from agentrl_plugins.compare.table import parity_table
from agentrl_plugins.recipe import load_recipe

from agentrl_openrlhf.cpu import use_shims_where_missing
from agentrl_openrlhf.parity import compute

HERE = FrameworkEnv("openrlhf", Path(sys.executable), "this test's environment")
VARIANTS = [
    ("deepswe_grpopp", {}),
    ("deepswe_grpopp", {"loss.aggregation": "token-mean", "correction.name": "token_tis", "correction.cap": 1.5}),
    ("grpo", {"correction.name": "icepop", "correction.low": 0.5, "correction.high": 2.0}),
    ("deepswe_grpopp", {"loss.entropy_coef": 0.01}),
    ("gspo", {"loss.clip_low": 0.02, "loss.clip_high": 0.03}),
    ("cispo", {"loss.clip_high": 0.1, "correction.name": "icepop", "correction.low": 0.5, "correction.high": 2.0}),
    ("gigpo", {"advantage.gamma": 0.5, "filtering.compact": True, "loss.aggregation": "seq-mean-token-sum"}),
    ("deepswe_grpopp", {"distillation.teacher": "teacher", "distillation.coef": 0.5}),
    ("grpo", {"distillation.teacher": "teacher", "distillation.task_reward": False}),
    ("gigpo", {"distillation.teacher": "teacher"}),
]


@pytest.fixture(scope="module")
def batch():
    return record_batch(load_recipe("deepswe_grpopp"), seed=0)


def side(tmp_path, recipe, batch):
    return run_side(HERE, write_input(tmp_path / "in.json", recipe, batch), tmp_path / "out.json")


def patched_methods() -> dict[str, object]:
    """Every method the side may patch, as its class holds it now."""
    from agentrl_openrlhf.patches import EXPERIENCE_MAKER, POLICY_LOSS, TRAINING_STEP, target

    use_shims_where_missing()
    return {f"{spec[1]}.{spec[2]}": target(*spec).__dict__.get(spec[2])
            for spec in (EXPERIENCE_MAKER, POLICY_LOSS, TRAINING_STEP)}


@pytest.mark.parametrize("name, overrides", VARIANTS)
def test_openrlhf_computes_the_core_numbers(batch, name, overrides):
    recipe = load_recipe(name, overrides)
    before = patched_methods()
    result = compute(recipe, batch)
    assert patched_methods() == before, "the side leaves OpenRLHF's classes as it found them"
    table = parity_table(recipe, batch, [result])
    assert not table.mismatches, table.mismatches
    assert not table.differences and not table.figure_differences
    unreported = [] if recipe.loss.entropy_coef else ["figure entropy"]
    assert [row.quantity for row in table.unreported] == unreported, "OpenRLHF logs entropy only with a coefficient"
    statuses = {row["key"]: row["status"] for row in result.mapping}
    if recipe.correction.name == "token_tis":
        assert statuses["loss.aggregation"] == statuses["correction.name"] == "native"
        assert (result.weights[batch.response_mask.bool() & (result.weights > 0)] < 1.5 + 1e-12).all()


@pytest.fixture(scope="module")
def shaped():
    """A batch recorded with potential shaping: its turns carry shaped rewards."""
    batch = record_batch(load_recipe("potential_shaping"), seed=0)
    assert any(turn.reward for row in batch.turns for turn in row)
    return batch


def test_grpo_turns_on_shaped_turn_rewards_through_openrlhf_is_the_core(shaped):
    recipe = load_recipe("potential_shaping")
    table = parity_table(recipe, shaped, [compute(recipe, shaped)])
    assert not table.mismatches and not table.differences, table.mismatches


def test_a_changed_upper_clip_reaching_openrlhf_is_reported_through_the_side_process(tmp_path, batch):
    recipe = load_recipe("deepswe_grpopp")
    wrong = side(tmp_path, load_recipe("deepswe_grpopp", {"loss.clip_high": 0.3}), batch)
    table = parity_table(recipe, batch, [wrong])
    assert {row.quantity for row in table.mismatches} == {"loss", "gradient", "gradient norm", "figure clip_fraction"}


@pytest.fixture(scope="module")
def two_ranks(batch):
    return dataclasses.replace(batch, ranks=2)


@pytest.mark.parametrize("name, overrides", VARIANTS)
def test_openrlhf_on_two_ranks_computes_the_one_rank_numbers(two_ranks, name, overrides):
    recipe = load_recipe(name, overrides)
    table = parity_table(recipe, two_ranks, [compute(recipe, two_ranks)])
    assert not table.mismatches, table.mismatches
    assert not table.differences
    noted = ["figure entropy"] if recipe.loss.entropy_coef else []
    assert [row.quantity for row in table.figure_differences] == noted
