"""The verifier: reward 1 for the exact answer, 0 otherwise (no answer scores 0)."""

from agentrl_plugins.types import Verdict

from agentrl_example_plugin.environment import Answer


def exact_answer(outcome: Answer) -> Verdict:
    correct = outcome.given == outcome.expected
    return Verdict(reward=float(correct), passed=correct, flags={"answered": outcome.given is not None},
                   verifier="exact_answer")
