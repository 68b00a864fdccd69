"""Registers the BugFix environment, its verifiers and the ``agentrl gym`` commands."""

from agentrl_plugins import hookimpl
from agentrl_plugins.components import Environment, Verifier

from bugfix_gym import verifiers
from bugfix_gym.env import BugFixGym


@hookimpl
def agentrl_register_environments(register):
    register(Environment("bugfix", BugFixGym, "Small Python functions with one bug each; tools read/test/edit/submit.",
                         turn_states=True))


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
