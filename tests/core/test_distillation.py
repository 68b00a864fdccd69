"""On-policy distillation's signal in the core: the per-token reverse KL, where it lands, how it combines with the
estimator's advantages, and the recipe keys that set it."""

from __future__ import annotations

import pytest
import torch

from agentrl_plugins.algorithm import Advantages, RecipeAlgorithm
from agentrl_plugins.algorithms.credit import TurnRecord, TurnRows
from agentrl_plugins.algorithms.distillation import dense_advantages, reverse_kl_signal
from agentrl_plugins.errors import AgentRLError, RecipeError
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.recipe import load_recipe
from agentrl_plugins.types import Trajectory

MANAGER = PluginManager(load_entry_points=False)


def algorithm(**overrides):
    return RecipeAlgorithm.from_recipe(load_recipe("deepswe_grpopp", overrides, plugin_manager=MANAGER), MANAGER)


def trajectory(mask, sampler, teacher, coef=1.0):
    spans, start = [], None
    for index, value in enumerate([*mask, 0]):
        if value and start is None:
            start = index
        if not value and start is not None:
            spans.append((start, index))
            start = None
    return Trajectory("t", [1, 2], list(range(len(mask))), list(mask), list(sampler), spans, "submitted",
                      teacher_logprobs=list(teacher), token_advantages=reverse_kl_signal(sampler, teacher, mask, coef))


def test_the_signal_is_minus_coef_times_the_log_ratio_on_policy_tokens_only():
    signal = reverse_kl_signal([-1.0, 0.0, -2.0, -0.5], [-0.5, -3.0, -1.0, -4.0], [1, 0, 1, 1], coef=2.0)
    assert signal == [1.0, 0.0, 2.0, -7.0]
    with pytest.raises(ValueError, match="one each per response token"):
        reverse_kl_signal([-1.0], [-1.0, -2.0], [1], 1.0)


def test_dense_values_land_on_their_spans_in_the_frameworks_coordinates():
    like = torch.zeros(2, 6, dtype=torch.float64)
    dense = dense_advantages([(1.0, 2.0, 3.0), ()], [((1, 3), (4, 5)), ()], like)
    assert dense.tolist() == [[0, 1, 2, 0, 3, 0], [0] * 6] and dense.dtype == torch.float64
    with pytest.raises(ValueError, match="2 per-token values for 3 policy tokens"):
        dense_advantages([(1.0, 2.0)], [((1, 3), (4, 5))], like[:1])
    with pytest.raises(ValueError, match="past the width"):
        dense_advantages([(1.0,)], [((6, 7),)], like[:1])


@pytest.mark.parametrize("task_reward", [True, False])
def test_the_signal_joins_the_estimators_advantage_and_filtered_rows_get_none(task_reward):
    rows = [trajectory([0, 1, 1, 0, 1], [0, -1, -2, 0, -0.5], [0, -0.5, -3, -9, -0.5]),
            trajectory([1, 1, 0, 0, 0], [-1, -1, 0, 0, 0], [-2, 0, -1, -1, -1])]
    records = [TurnRecord.of(t, offset=1) for t in rows]  # a framework whose responses start one token later
    mask = torch.tensor([[0, 0, 1, 1, 0, 1, 0], [0, 1, 1, 0, 0, 0, 0]], dtype=torch.float32)
    recipe = algorithm(**{"distillation.teacher": "teacher", "distillation.task_reward": task_reward})
    result = recipe.distilled(Advantages(torch.tensor([0.5, -0.5]), torch.tensor([True, False])),
                              TurnRows.of(records, mask))
    task = 0.5 if task_reward else 0.0
    assert result.values[0].tolist() == pytest.approx([0, 0, task + 0.5, task - 1.0, 0, task, 0]), "policy tokens only"
    own = -0.5 * task_reward
    assert result.values[1].tolist() == [0, own, own, 0, 0, 0, 0], "a filtered row carries no signal"
    assert result.valid.tolist() == [True, False]


def test_without_a_teacher_nothing_changes_and_a_row_the_teacher_never_scored_is_an_error():
    advantages = Advantages(torch.tensor([1.0]), torch.tensor([True]))
    unscored = Trajectory("t", [1], [5, 6], [1, 1], [-1.0, -1.0], [(0, 2)], "submitted")
    rows = TurnRows.of([TurnRecord.of(unscored)], torch.zeros(1, 2))
    assert algorithm().distilled(advantages, rows) is advantages
    assert not algorithm().needs_turns and algorithm(**{"distillation.teacher": "x"}).needs_turns
    with pytest.raises(AgentRLError, match=r"rows \[0\] carry no teacher signal"):
        algorithm(**{"distillation.teacher": "x"}).distilled(advantages, rows)


def test_turn_records_carry_the_values_through_plain_fields():
    record = TurnRecord.of(trajectory([1, 0, 1], [-1, 0, -2], [-2, 0, -1]))
    assert record.token_values == (-1.0, 1.0)
    assert TurnRecord.from_fields(record.as_fields()) == record
    legacy = {key: value for key, value in record.as_fields().items() if key != "token_values"}
    assert TurnRecord.from_fields(legacy).token_values == ()


def test_the_recipe_keys_are_checked():
    with pytest.raises(RecipeError, match="distillation.coef must be finite and > 0"):
        algorithm(**{"distillation.teacher": "x", "distillation.coef": 0.0})
    with pytest.raises(RecipeError, match="task_reward = false trains on the teacher's signal alone"):
        algorithm(**{"distillation.task_reward": False})
    with pytest.raises(RecipeError, match="must be one of \\['reverse_kl'\\]"):
        algorithm(**{"distillation.teacher": "x", "distillation.divergence": "forward_kl"})
