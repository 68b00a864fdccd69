"""Registers the BugFix environment, its verifiers and the ``agentrl gym`` commands."""

import inspect

from agentrl_plugins import hookimpl
from agentrl_plugins.components import Environment, Verifier

from bugfix_gym import verifiers
from bugfix_gym.env import BugFixGym


@hookimpl
def agentrl_register_environments(register):
    register(Environment("bugfix", BugFixGym, "Small Python functions with one bug each; tools read/test/edit/submit.",
                         turn_states=True))
    register(Environment("bugfix_agent", _agent_gym,
                         "The BugFix tasks played by an agent program through the gateway: the shipped openai-client "
                         "loop (option keep_turns: a sliding context window), or your own program with option "
                         "command (run confined; option confine = false runs it as it is)."))


def _agent_gym(**options):
    """The ``bugfix_agent`` suite (imported on use: it needs the ``agent`` extra)."""
    from bugfix_gym.agent import BugFixAgentGym

    return BugFixAgentGym(**options)


_GYM_OPTIONS = inspect.signature(BugFixGym)
_agent_gym.__signature__ = _GYM_OPTIONS.replace(  # type: ignore[attr-defined]  # its options, checked by name
    parameters=[inspect.Parameter("command", inspect.Parameter.KEYWORD_ONLY, default=None),
                inspect.Parameter("keep_turns", inspect.Parameter.KEYWORD_ONLY, default=None),
                inspect.Parameter("confine", inspect.Parameter.KEYWORD_ONLY, default=True),
                *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in _GYM_OPTIONS.parameters.values())])


@hookimpl
def agentrl_register_verifiers(register):
    register(Verifier("hidden_tests", lambda: verifiers.hidden_tests,
                      "Reward 1 iff the submission passes every public and hidden test."))
    register(Verifier("public_tests", lambda: verifiers.public_tests,
                      "Reward 1 iff the submission passes the public tests (exploitable on purpose)."))
    register(Verifier("partial_credit", lambda: verifiers.partial_credit,
                      "Reward = fraction of hidden tests the submission passes."))


@hookimpl
def agentrl_register_commands(cli):
    from bugfix_gym.cli import gym_app

    cli.add_typer(gym_app, name="gym")
