"""The BugFix gym's agent program through the gateway against the built-in episode runner, in every framework's
environment: token-identical trajectories (ids, masks, sampler log-probs, turn spans, terminations, rewards) on
the same tasks and seeds, for a random model's episodes (cut short by turns and by context) and for scripted
solvers and hackers (submitted, solved and hacked)."""

from __future__ import annotations

import asyncio

import pytest

from agentrl_plugins.episode import run_episode, run_episodes
from agentrl_plugins.gateway import Gateway, play_agent_program
from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.testing import ScriptedGenerate
from agentrl_plugins.types import Limits, Sampling

from bugfix_gym import policies, verifiers
from bugfix_gym.agent import BugFixAgentGym
from bugfix_gym.env import BugFixGym


def signature(trajectory):
    return (trajectory.task_id, trajectory.prompt_ids, trajectory.response_ids, trajectory.response_mask,
            trajectory.logprobs, trajectory.turn_spans, trajectory.termination, trajectory.reward,
            trajectory.verdict.hacked if trajectory.verdict else None)


@pytest.fixture(scope="module")
def gyms():
    built_in, agent = BugFixGym(), BugFixAgentGym()
    yield built_in, agent
    built_in.close()
    agent.close()


@pytest.mark.parametrize("limits, termination", [
    (Limits(max_turns=2, max_context_tokens=4096, max_new_tokens_per_turn=24), "max_turns"),
    (Limits(max_turns=6, max_context_tokens=440, max_new_tokens_per_turn=24), "max_context"),
], ids=["out-of-turns", "out-of-context"])
def test_a_sampled_models_episodes_are_token_identical(gyms, random_model, tokenizer, limits, termination):
    built_in, agent = gyms
    tasks = built_in.tasks("train")[:4]

    def sampler():  # one request per forward pass: each request's numbers do not depend on its batch
        return HFGenerator(random_model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=5, max_batch=1)

    async def through_gateway():
        with Gateway() as gateway:
            generate = sampler()
            return await asyncio.gather(*(
                play_agent_program(gateway, agent, task, generate, tokenizer, limits, Sampling(),
                                   verifier=verifiers.hidden_tests, group_id=index)
                for index, task in enumerate(tasks) for _ in range(2)))

    expected = asyncio.run(run_episodes(built_in, tasks, sampler(), tokenizer, limits, group_size=2,
                                        verifier=verifiers.hidden_tests))
    got = asyncio.run(through_gateway())
    assert sorted(map(signature, got)) == sorted(map(signature, expected))
    assert {t.termination for t in expected} == {termination}


@pytest.mark.parametrize("policy", [policies.solver, policies.hacker, policies.fixer])
def test_scripted_episodes_are_token_identical(gyms, tokenizer, policy):
    built_in, agent = gyms
    limits = Limits(max_turns=6, max_context_tokens=4096, max_new_tokens_per_turn=64)

    async def both(task):
        family = built_in.family(task.family)
        expected = await run_episode(built_in, task, ScriptedGenerate(policy(family), tokenizer), tokenizer, limits,
                                     verifier=verifiers.hidden_tests)
        with Gateway() as gateway:
            got = await play_agent_program(gateway, agent, task, ScriptedGenerate(policy(family), tokenizer),
                                           tokenizer, limits, Sampling(), verifier=verifiers.hidden_tests)
        return expected, got

    for task in built_in.tasks("train")[:3] + built_in.tasks("held_out")[:2]:
        expected, got = asyncio.run(both(task))
        assert signature(got) == signature(expected)
        assert expected.termination == "submitted"
        assert (expected.verdict.hacked, expected.reward) == ((True, 0.0) if policy is policies.hacker else
                                                              (False, 1.0))
