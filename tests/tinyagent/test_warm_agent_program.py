"""The shipped agent program (``bugfix_agent``: a plain ``openai``-client loop) through the gateway yields the
built-in episode runner's trajectories token for token: ids, masks, sampler log-probs, turns, rewards and
terminations, with TinyAgent's warm start sampling on the same tasks and seeds."""

from __future__ import annotations

import asyncio

import pytest

from agentrl_plugins.episode import run_episodes
from agentrl_plugins.gateway import Gateway, play_agent_program
from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.types import Limits, Sampling

from bugfix_gym import verifiers
from bugfix_gym.agent import BugFixAgentGym
from bugfix_gym.env import BugFixGym

GROUP = 2


def signature(trajectory):
    """What the trainer receives from an episode."""
    return (trajectory.task_id, trajectory.prompt_ids, trajectory.response_ids, trajectory.response_mask,
            trajectory.logprobs, trajectory.turn_spans, trajectory.termination, trajectory.reward,
            trajectory.verdict.hacked if trajectory.verdict else None)


SOLVED, HACKED, CUT = ("submitted", 1.0, False), ("submitted", 0.0, True), ("max_context", 0.0, False)


@pytest.mark.parametrize("limits, covered", [
    (Limits(max_turns=6, max_context_tokens=2048, max_new_tokens_per_turn=16), {SOLVED, HACKED}),
    (Limits(max_turns=8, max_context_tokens=460, max_new_tokens_per_turn=16), {SOLVED, HACKED, CUT}),
], ids=["book", "tight-context"])
def test_the_agent_program_through_the_gateway_matches_the_episode_runner(warm, limits, covered):
    model, tokenizer = warm
    sampling = Sampling(temperature=1.0)
    built_in, agent = BugFixGym(), BugFixAgentGym()
    tasks = built_in.tasks("train")[:6] + built_in.tasks("held_out")[:2]

    def sampler():  # one request per forward pass: each request's numbers do not depend on its batch
        return HFGenerator(model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=3, max_batch=1)

    async def through_gateway():
        with Gateway() as gateway:
            generate = sampler()
            return await asyncio.gather(*(
                play_agent_program(gateway, agent, task, generate, tokenizer, limits, sampling,
                                   verifier=verifiers.hidden_tests, group_id=index)
                for index, task in enumerate(tasks) for _ in range(GROUP)))

    try:
        expected = asyncio.run(run_episodes(built_in, tasks, sampler(), tokenizer, limits, group_size=GROUP,
                                            verifier=verifiers.hidden_tests, sampling=sampling))
        got = asyncio.run(through_gateway())
    finally:
        built_in.close()
        agent.close()
    assert all(not t.segments for t in got)
    # Episodes of one group share their first prompt, so which of them drew which sample depends on arrival
    # order: compare each group's episodes as a set.
    assert sorted(map(signature, got)) == sorted(map(signature, expected))
    outcomes = {(t.termination, t.reward, t.verdict.hacked) for t in expected}
    assert covered <= outcomes, outcomes  # the comparison covers solved, hacked and cut-short episodes
