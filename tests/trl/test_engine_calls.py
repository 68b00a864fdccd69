"""How the vLLM generator splits waiting requests into engine calls that each fit one engine step."""

from __future__ import annotations

import pytest

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.vllm_generator import StepBudget, engine_calls


def test_without_a_budget_every_request_goes_in_one_call():
    assert engine_calls([5000, 9000, 3], None) == [range(0, 3)]
    assert engine_calls([], None) == []


def test_calls_fit_the_token_budget_and_keep_the_requests_order():
    calls = engine_calls([300, 300, 300, 100, 400], StepBudget(requests=64, tokens=700))
    assert calls == [range(0, 2), range(2, 4), range(4, 5)]
    assert [i for call in calls for i in call] == list(range(5))


def test_calls_fit_the_sequence_budget():
    assert engine_calls([1] * 5, StepBudget(requests=2, tokens=4096)) == [range(0, 2), range(2, 4), range(4, 5)]


def test_a_prompt_longer_than_one_step_is_refused_with_the_way_out():
    with pytest.raises(AgentRLError, match=r"5000 tokens.*max_num_batched_tokens=4096.*rollout.max_context_tokens"):
        engine_calls([10, 5000], StepBudget(requests=8, tokens=4096))
