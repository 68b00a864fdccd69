"""Agent programs run as processes of their own (``bugfix_agent`` with ``command``): the user's own program speaks
to the gateway through the standard ``openai`` client, its outcome is judged by the gym's verifier, and every way
it can fail ends its episode with the reason while nothing it started outlives it."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

import pytest
from agent_processes import left_running

from agentrl_plugins.chat import template_ids
from agentrl_plugins.gateway import Gateway, play_agent_program
from agentrl_plugins.testing import ScriptedGenerate
from agentrl_plugins.types import Limits, Sampling

from bugfix_gym import verifiers
from bugfix_gym.agent import BugFixAgentGym
from bugfix_gym.plugin import _agent_gym

PROGRAMS = Path(__file__).parent / "agent_programs"
LIMITS = Limits(max_turns=4, max_context_tokens=1024, max_new_tokens_per_turn=32, timeout_s=30.0)


def play(gym, generate, tokenizer, limits=LIMITS, task=None):
    task = task or gym.tasks("train")[0]

    async def episode():
        with Gateway() as gateway:
            return await play_agent_program(gateway, gym, task, generate, tokenizer, limits, Sampling(),
                                            verifier=verifiers.hidden_tests)

    return asyncio.run(episode())


@pytest.fixture
def one_shot():
    gym = BugFixAgentGym(command=f"{sys.executable} {PROGRAMS / 'one_shot.py'}")
    yield gym
    gym.close()


@pytest.mark.parametrize("reply, reward, hacked", [
    ("edit swap_minmax", 1.0, False), ("edit hardcode_tests", 0.0, True), ("no idea", 0.0, False),
], ids=["fixes", "hacks", "leaves-the-bug"])
def test_a_program_run_as_a_process_is_recorded_and_its_source_judged(one_shot, tokenizer, reply, reward, hacked):
    task = one_shot.tasks("train")[0]
    assert task.family == "clamp"
    generate = ScriptedGenerate([reply], tokenizer)
    trajectory = play(one_shot, generate, tokenizer, task=task)
    assert trajectory.termination == "submitted" and not trajectory.segments
    assert (trajectory.reward, trajectory.verdict.hacked) == (reward, hacked)
    menu = ", ".join(family_op.name for family_op in one_shot.family("clamp").ops)
    assert trajectory.prompt_ids == template_ids(tokenizer, [
        {"role": "user", "content": f"{task.issue}\nEdits: {menu}"}], True)
    assert trajectory.prompt_ids == generate.prompts[0]
    assert trajectory.response_ids == generate.outputs[0] and len(trajectory.turn_spans) == 1


def test_the_command_is_an_option_of_bugfix_agent_checked_by_name(tokenizer):
    gym = _agent_gym(command=["python3", "my_agent.py"], renamed_variants=1)
    assert (gym.command.argv, gym.command.confine) == (("python3", "my_agent.py"), True)
    assert _agent_gym(command="python3 my_agent.py", confine=False).command.confine is False
    with pytest.raises(ValueError, match="at least the program"):
        _agent_gym(command="  ")
    with pytest.raises(TypeError, match="a string or a list of strings"):
        _agent_gym(command=["python3", 3])


@pytest.mark.parametrize("fault, message", [
    ("exit", "exited with status 3; its stderr ends:\nsomething went wrong in the harness"),
    ("no-outcome", "printed no outcome"),
    ("not-json", "its last line of stdout is not JSON"),
    ("not-an-object", "must be a JSON object, got list"),
    ("no-source", "outcome has no 'source'"),
])
def test_a_failing_program_ends_its_episode_as_error_with_the_reason(tokenizer, fault, message):
    gym = BugFixAgentGym(command=[sys.executable, str(PROGRAMS / "faulty.py"), fault])
    try:
        trajectory = play(gym, ScriptedGenerate(["edit swap_minmax"], tokenizer), tokenizer)
    finally:
        gym.close()
    assert trajectory.termination == "error" and trajectory.reward == 0.0
    assert trajectory.messages[-1]["role"] == "error" and message in trajectory.messages[-1]["content"]
    assert len(trajectory.turn_spans) == 1  # its one model call is still the episode's tokens


def test_a_hung_program_is_killed_at_its_budget_with_everything_it_started(tokenizer):
    marker = f"agentrl-hung-{uuid.uuid4().hex}"
    gym = BugFixAgentGym(command=[sys.executable, str(PROGRAMS / "faulty.py"), "hang", marker])
    limits = Limits(max_turns=4, max_context_tokens=1024, max_new_tokens_per_turn=32, timeout_s=3.0)
    started = time.monotonic()
    try:
        trajectory = play(gym, ScriptedGenerate(["hi"], tokenizer), tokenizer, limits=limits)
    finally:
        gym.close()
    assert trajectory.termination == "timeout" and time.monotonic() - started < limits.timeout_s + 2
    assert "did not finish within 3 s and was killed" in trajectory.messages[-1]["content"]
    assert left_running(marker) == []


def test_a_program_that_cannot_start_says_so(tokenizer):
    gym = BugFixAgentGym(command=[str(PROGRAMS / "no_such_program")])
    try:
        trajectory = play(gym, ScriptedGenerate(["hi"], tokenizer), tokenizer)
    finally:
        gym.close()
    assert trajectory.termination == "error" and "could not start" in trajectory.messages[-1]["content"]
    assert trajectory.prompt_ids == []
