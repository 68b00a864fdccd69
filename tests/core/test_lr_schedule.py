"""The core's learning-rate schedules, against hand-computed factors."""

from __future__ import annotations

import pytest

from agentrl_plugins.algorithms import LR_SCHEDULES, lr_multiplier


def test_constant_keeps_the_learning_rate():
    assert [lr_multiplier("constant", step, 20, 0.5) for step in (0, 10, 20)] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("min_lr_ratio", [0.0, 0.1])
def test_cosine_falls_by_half_a_cosine_to_its_floor(min_lr_ratio):
    m = min_lr_ratio
    assert lr_multiplier("cosine", 0, 20, m) == 1.0
    assert lr_multiplier("cosine", 10, 20, m) == pytest.approx(m + (1 - m) / 2)
    assert lr_multiplier("cosine", 5, 20, m) == pytest.approx(m + (1 - m) * (2 + 2 ** 0.5) / 4)
    assert lr_multiplier("cosine", 20, 20, m) == pytest.approx(m)
    factors = [lr_multiplier("cosine", step, 20, m) for step in range(21)]
    assert factors == sorted(factors, reverse=True)


def test_unknown_schedules_are_named():
    assert LR_SCHEDULES == ("constant", "cosine")
    with pytest.raises(ValueError, match="unknown learning-rate schedule 'linear'"):
        lr_multiplier("linear", 0, 10)
