"""Every hook a plugin can implement: registration hooks and monitor events.

Registration hooks receive a ``register`` callback; call it once per component
with the matching record from :mod:`agentrl_plugins.components`. The manager
notes which plugin and distribution each record came from.
"""

import pluggy

PROJECT = "agentrl"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def agentrl_register_environments(register):
    """Register environments: ``register(Environment(name, factory, description))``."""


@hookspec
def agentrl_register_verifiers(register):
    """Register verifiers: ``register(Verifier(name, factory, description))``."""


@hookspec
def agentrl_register_advantages(register):
    """Register advantage estimators: ``register(AdvantageEstimator(name, compute, description))``."""


@hookspec
def agentrl_register_corrections(register):
    """Register mismatch corrections: ``register(Correction(name, compute, description))``."""


@hookspec
def agentrl_register_recipes(register):
    """Register recipe files: ``register(RecipeFile(name, path, description))``."""


@hookspec
def agentrl_register_adapters(register):
    """Register framework adapters: ``register(Adapter(name, factory, description))``."""


@hookspec
def agentrl_episode_end(trajectory):
    """Called after each episode with its finished :class:`~agentrl_plugins.types.Trajectory`."""


@hookspec
def agentrl_step_end(step, metrics):
    """Called after each training step with the step number and its metrics dict."""


@hookspec
def agentrl_register_commands(cli):
    """Add subcommands to the ``agentrl`` command; ``cli`` is its :class:`typer.Typer` app."""
