"""The shipped agent program with a sliding context window (``keep_turns``): what it shows the model, and the
episode it yields through the gateway (a new segment each turn the window drops an exchange)."""

from __future__ import annotations

import asyncio

import pytest

from agentrl_plugins.environment import plays_agent_programs
from agentrl_plugins.gateway import Gateway, play_agent_program
from agentrl_plugins.recipe_schema import EnvironmentSection
from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.types import Limits, Sampling

from bugfix_gym.agent import BugFixAgentGym, windowed
from bugfix_gym.verifiers import hidden_tests

HISTORY = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
           {"role": "assistant", "content": "a1"}, {"role": "user", "content": "o1"},
           {"role": "assistant", "content": "a2"}, {"role": "user", "content": "o2"}]


def test_the_window_keeps_the_system_prompt_the_task_and_the_last_exchanges():
    assert windowed(HISTORY, None) == HISTORY and windowed(HISTORY, 2) == HISTORY
    assert windowed(HISTORY, 1) == HISTORY[:2] + HISTORY[4:]
    assert windowed(HISTORY, 0) == HISTORY[:2]


@pytest.mark.parametrize("keep_turns, message", [(-1, "keep_turns must be"), (True, "keep_turns must be"),
                                                 (1.5, "keep_turns must be")])
def test_a_bad_window_is_refused(keep_turns, message):
    with pytest.raises(ValueError, match=message):
        BugFixAgentGym(keep_turns=keep_turns)


def test_a_window_and_a_command_are_refused_together():
    with pytest.raises(ValueError, match="a command's program keeps its own"):
        BugFixAgentGym(command="true", keep_turns=1)


def test_each_dropped_exchange_starts_a_segment_trained_on_what_the_sampler_saw():
    tokenizer = ByteChatTokenizer()
    generate = ScriptedGenerate(["<tool>read</tool>", "<tool>run_tests</tool>", "<tool>edit swap_minmax</tool>",
                                 "<tool>submit</tool>"], tokenizer)
    gym = BugFixAgentGym(keep_turns=1)
    task = next(task for task in gym.tasks("train") if task.family == "clamp")
    try:
        with Gateway() as gateway:
            trajectory = asyncio.run(play_agent_program(
                gateway, gym, task, generate, tokenizer, Limits(8, 4096, 32, 30.0), Sampling(),
                verifier=hidden_tests))
    finally:
        gym.close()
    assert trajectory.termination == "submitted" and trajectory.reward == 1.0
    assert [part.num_turns for part in (trajectory, *trajectory.segments)] == [2, 1, 1]
    for part, prompt in zip(trajectory.segments, generate.prompts[2:]):
        assert part.prompt_ids == prompt and part.reward == 1.0
        assert prompt.count(ByteChatTokenizer.ROLES["assistant"]) == 2, "one kept exchange and the reply's turn"


@pytest.mark.parametrize(("name", "agent_program"), [("bugfix_agent", True), ("bugfix", False)])
def test_a_framework_can_ask_whether_an_environment_plays_agent_programs(name, agent_program):
    assert plays_agent_programs(EnvironmentSection(name=name, options={"keep_turns": 2} if agent_program else {})) \
        is agent_program
