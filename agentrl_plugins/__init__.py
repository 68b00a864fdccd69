"""agentrl-plugins: one plugin layer for agentic RL over verl, TRL and OpenRLHF."""

from agentrl_plugins.hookspecs import hookimpl

__version__ = "0.1.0"
__all__ = ["hookimpl", "__version__"]
