"""The episode runner: exact token bookkeeping and every termination reason, with scripted generation."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from agentrl_plugins import hookimpl
from agentrl_plugins.chat import ChatCodec
from agentrl_plugins.environment import StepResult
from agentrl_plugins.episode import run_episode, run_episodes
from agentrl_plugins.plugins import PluginManager
from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.types import Generation, Limits, Task, Verdict

TOKENIZER = ByteChatTokenizer()
TASK = Task("t0", "echo", "train", "say done")


@dataclass
class EchoSession:
    """Echoes each message; 'done' ends the episode, 'boom' makes the environment fail."""

    prompt: str = "say done"
    said_done: bool = False

    def step(self, action: str) -> StepResult:
        if action == "boom":
            raise RuntimeError("environment failure")
        self.said_done = action == "done"
        return StepResult(f"echo:{action}", self.said_done)

    def outcome(self):
        return self.said_done

    def close(self):
        pass


class EchoEnv:
    system_prompt = "sys"

    def tasks(self, split=None):
        return [TASK]

    def start(self, task):
        return EchoSession()


def verify(said_done: bool) -> Verdict:
    return Verdict(float(said_done), said_done)


async def play(texts, limits=Limits(), generate=None, **kw):
    generate = generate or ScriptedGenerate(texts, TOKENIZER)
    trajectory = await run_episode(EchoEnv(), TASK, generate, TOKENIZER, limits, verifier=verify, **kw)
    return trajectory, generate


async def test_trained_ids_are_exactly_the_sampled_ids():
    trajectory, generate = await play(["hello", "again", "done"])
    assert trajectory.termination == "submitted" and trajectory.reward == 1.0
    assert trajectory.num_turns == 3
    for (start, end), sampled in zip(trajectory.turn_spans, generate.outputs):
        assert trajectory.response_ids[start:end] == sampled
        assert trajectory.response_mask[start:end] == [1] * len(sampled)
        assert trajectory.logprobs[start:end] == [-0.5] * len(sampled)
    for prompt in generate.prompts[1:]:
        assert trajectory.token_ids[: len(prompt)] == prompt
    policy_positions = {i for start, end in trajectory.turn_spans for i in range(start, end)}
    for i, (mask, logprob) in enumerate(zip(trajectory.response_mask, trajectory.logprobs)):
        assert mask == (i in policy_positions)
        assert logprob == (-0.5 if mask else 0.0)
    assert TOKENIZER.decode(trajectory.response_ids).count("echo:") == 2


async def test_observation_tokens_follow_the_chat_template_once():
    trajectory, _ = await play(["hello", "done"])
    codec = ChatCodec(TOKENIZER, "sys")
    first_end = trajectory.turn_spans[0][1]
    observation = trajectory.response_ids[first_end: trajectory.turn_spans[1][0]]
    assert observation == codec.observation_ids("echo:hello", turn_ended_with_eos=True)
    assert observation[0] == TOKENIZER.ROLES["user"] and observation[-1] == TOKENIZER.ROLES["assistant"]
    without_eos = codec.observation_ids("echo:hello", turn_ended_with_eos=False)
    assert without_eos == [TOKENIZER.eos_token_id] + observation


async def test_max_turns():
    trajectory, _ = await play(["a"], Limits(max_turns=4))
    assert trajectory.termination == "max_turns" and trajectory.num_turns == 4 and trajectory.reward == 0.0


async def test_max_context_when_generation_is_cut():
    prompt = len(ChatCodec(TOKENIZER, "sys").prompt_ids("say done"))
    trajectory, generate = await play(["a long message"], Limits(max_context_tokens=prompt + 5))
    assert trajectory.termination == "max_context"
    assert len(trajectory.token_ids) == prompt + 5
    assert generate.outputs[0] == TOKENIZER.encode("a lon")


async def test_max_context_when_the_observation_does_not_fit():
    prompt = len(ChatCodec(TOKENIZER, "sys").prompt_ids("say done"))
    trajectory, _ = await play(["hi"], Limits(max_context_tokens=prompt + 6))
    assert trajectory.termination == "max_context"
    assert trajectory.response_mask == [1, 1, 1]


async def test_a_prompt_that_leaves_no_room_is_not_sampled_nor_kept():
    prompt = len(ChatCodec(TOKENIZER, "sys").prompt_ids("say done"))
    trajectory, generate = await play(["hi"], Limits(max_context_tokens=prompt))
    assert trajectory.termination == "max_context" and generate.prompts == []
    assert trajectory.prompt_ids == [] and trajectory.response_ids == [] and trajectory.reward == 0.0


async def test_timeout_while_generating():
    async def slow(token_ids, sampling):
        await asyncio.sleep(5)
        return Generation([7], [0.0])

    trajectory, _ = await play([], Limits(timeout_s=0.2), generate=slow)
    assert trajectory.termination == "timeout" and trajectory.response_ids == []


async def test_environment_failure_ends_with_error_not_an_exception():
    trajectory, _ = await play(["boom"])
    assert trajectory.termination == "error" and trajectory.verdict is None
    assert "environment failure" in trajectory.messages[-1]["content"]


async def test_generate_returning_misaligned_logprobs_is_an_error():
    async def bad(token_ids, sampling):
        return Generation([7, 8], [0.0])

    trajectory, _ = await play([], generate=bad)
    assert trajectory.termination == "error"
    assert "2 tokens but 1 log-probs" in trajectory.messages[-1]["content"]


async def test_episode_end_hook_and_concurrent_groups():
    ended = []

    class Monitor:
        @hookimpl
        def agentrl_episode_end(self, trajectory):
            ended.append(trajectory.group_id)

    manager = PluginManager(load_entry_points=False)
    manager.add_plugin(Monitor(), "monitor", "tests")
    tasks = [TASK, Task("t1", "echo", "train", "again")]
    trajectories = await run_episodes(EchoEnv(), tasks, ScriptedGenerate(["done"], TOKENIZER), TOKENIZER, Limits(),
                                      group_size=3, verifier=verify, hooks=manager.hook)
    assert [t.group_id for t in trajectories] == [0, 0, 0, 1, 1, 1]
    assert sorted(ended) == [0, 0, 0, 1, 1, 1]
    assert all(t.termination == "submitted" for t in trajectories)


def test_template_that_is_not_prefix_stable_is_rejected():
    class Unstable(ByteChatTokenizer):
        def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True):
            return [len(messages)] + super().apply_chat_template(messages, add_generation_prompt, tokenize)

    with pytest.raises(ValueError, match="prefix"):
        ChatCodec(Unstable()).observation_ids("x", True)
