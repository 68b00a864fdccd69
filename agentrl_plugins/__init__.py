"""agentrl-plugins: one plugin layer for agentic RL over verl, TRL and OpenRLHF."""

import importlib.metadata

from agentrl_plugins.hookspecs import HOOK_CONTRACT_VERSION, hookimpl

try:
    __version__ = importlib.metadata.version("agentrl-plugins")
except importlib.metadata.PackageNotFoundError:  # a source checkout on sys.path, not installed
    __version__ = "0+unknown"
__all__ = ["HOOK_CONTRACT_VERSION", "__version__", "hookimpl"]
