"""Registers the ``openrlhf`` adapter and the ``agentrl openrlhf`` commands."""

from agentrl_plugins import hookimpl
from agentrl_plugins.components import Adapter


def _adapter():
    from agentrl_openrlhf.adapter import OpenRLHFAdapter

    return OpenRLHFAdapter()


def _parity():
    from agentrl_openrlhf.parity import compute

    return compute


@hookimpl
def agentrl_register_adapters(register):
    register(Adapter("openrlhf", _adapter,
                     "OpenRLHF 0.11.2 train_ppo_ray with an episode-runner agent executor and in-worker patches.",
                     parity=_parity))


@hookimpl
def agentrl_register_commands(cli):
    from agentrl_openrlhf.cli import openrlhf_app

    cli.add_typer(openrlhf_app, name="openrlhf")
