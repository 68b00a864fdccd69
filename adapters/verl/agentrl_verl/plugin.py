"""Registers the ``verl`` adapter and the ``agentrl verl`` commands."""

from agentrl_plugins import hookimpl
from agentrl_plugins.components import Adapter


def _adapter():
    from agentrl_verl.adapter import VerlAdapter

    return VerlAdapter()


def _parity():
    from agentrl_verl.parity import compute

    return compute


@hookimpl
def agentrl_register_adapters(register):
    register(Adapter("verl", _adapter, "verl 0.9.1 main_ppo with an episode-runner agent loop per environment "
                                       "(GPU; on a machine without one, verl's cpu platform).", parity=_parity))


@hookimpl
def agentrl_register_commands(cli):
    from agentrl_verl.cli import verl_app

    cli.add_typer(verl_app, name="verl")
