"""The agent program through the gateway plays the episode the episode runner plays, token for token."""

import asyncio

from agentrl_plugins.episode import run_episode
from agentrl_plugins.gateway import Gateway, play_agent_program
from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.types import Limits, Sampling

from agentrl_example_plugin.agent import ArithmeticAgent
from agentrl_example_plugin.environment import ArithmeticEnv
from agentrl_example_plugin.verifier import exact_answer


def test_the_agent_program_yields_the_episode_runners_trajectory():
    tokenizer, limits = ByteChatTokenizer(), Limits(max_turns=3)
    task = ArithmeticEnv().tasks("train")[0]
    script = ["calc 12 * 7", "answer 84"]

    async def both():
        expected = await run_episode(ArithmeticEnv(), task, ScriptedGenerate(script, tokenizer), tokenizer, limits,
                                     verifier=exact_answer)
        with Gateway() as gateway:
            got = await play_agent_program(gateway, ArithmeticAgent(), task, ScriptedGenerate(script, tokenizer),
                                           tokenizer, limits, Sampling(), verifier=exact_answer)
        return expected, got

    expected, got = asyncio.run(both())
    assert (got.reward, got.termination) == (expected.reward, expected.termination) == (1.0, "submitted")
    assert (got.prompt_ids, got.response_ids, got.response_mask, got.logprobs) == (
        expected.prompt_ids, expected.response_ids, expected.response_mask, expected.logprobs)
