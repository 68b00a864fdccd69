"""The environment and its verifier, played through the core episode runner with scripted replies."""

import asyncio

from agentrl_plugins.episode import run_episodes
from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.types import Limits

from agentrl_example_plugin.environment import ArithmeticEnv
from agentrl_example_plugin.verifier import exact_answer


def play(replies: list[str], split: str = "held_out", max_turns: int = 3):
    env, tokenizer = ArithmeticEnv(), ByteChatTokenizer()
    generate = ScriptedGenerate(replies, tokenizer)
    [trajectory] = asyncio.run(run_episodes(env, env.tasks(split), generate, tokenizer, Limits(max_turns=max_turns),
                                            verifier=exact_answer))
    return trajectory, tokenizer


def test_calculator_then_the_right_answer_scores_one():
    trajectory, tokenizer = play(["calc 23 * 4", "answer 92"])
    assert (trajectory.termination, trajectory.reward, trajectory.num_turns) == ("submitted", 1.0, 2)
    observed = [t for t, policy in zip(trajectory.response_ids, trajectory.response_mask) if not policy]
    assert "92" in tokenizer.decode(observed)  # the calculator's reply is in the context, with loss mask 0


def test_a_wrong_answer_scores_zero():
    trajectory, _ = play(["answer 91"])
    assert (trajectory.termination, trajectory.reward, trajectory.verdict.flags) == ("submitted", 0.0,
                                                                                    {"answered": True})


def test_bad_text_gets_an_error_and_the_episode_runs_out_of_turns():
    trajectory, _ = play(["what is this?"], max_turns=2)
    assert (trajectory.termination, trajectory.reward) == ("max_turns", 0.0)
    assert trajectory.messages[2] == {"role": "tool", "content": "ERROR: reply 'calc A OP B' or 'answer N'"}
