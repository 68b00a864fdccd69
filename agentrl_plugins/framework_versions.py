"""The framework versions an adapter supports, declared once and checked where the adapter is imported.

An adapter declares its range as the extra named after its framework (``agentrl-trl[trl]`` requires
``trl>=1.10,!=1.15.*,<1.17``). The framework is not a hard dependency, so installing the adapter into an existing
setup never upgrades or downgrades the user's framework; a version outside the range is an
:class:`UnsupportedFrameworkError` that names the range and what to run instead.
"""

from __future__ import annotations

import importlib.metadata

from packaging.requirements import Requirement
from packaging.version import Version

from agentrl_plugins.errors import AgentRLError


class UnsupportedFrameworkError(AgentRLError, ImportError):
    """The installed framework is missing or outside the versions its adapter supports."""


def supported_range(adapter: str, framework: str) -> Requirement:
    """The requirement on ``framework`` that the installed ``adapter`` distribution declares in its extra."""
    for line in importlib.metadata.requires(adapter) or ():
        requirement = Requirement(line)
        if requirement.name == framework and requirement.marker and requirement.marker.evaluate({"extra": framework}):
            return requirement
    raise AgentRLError(f"{adapter} declares no [{framework}] extra with the {framework} versions it supports")


def check_framework(adapter: str, framework: str) -> Version:
    """The installed ``framework`` version; raises :class:`UnsupportedFrameworkError` when it is outside the
    range ``adapter`` declares, or missing."""
    supported = supported_range(adapter, framework)
    lower_first = sorted(supported.specifier, key=lambda clause: (not clause.operator.startswith(">"), str(clause)))
    wanted = framework + ",".join(map(str, lower_first))
    adapter_version = importlib.metadata.version(adapter)
    try:
        installed = Version(importlib.metadata.version(framework))
    except importlib.metadata.PackageNotFoundError:
        raise UnsupportedFrameworkError(
            f"{adapter} {adapter_version} runs inside {wanted}, which is not installed here: "
            f"pip install '{adapter}[{framework}]' (or '{wanted}')") from None
    if not supported.specifier.contains(installed, prereleases=True):
        raise UnsupportedFrameworkError(
            f"{adapter} {adapter_version} supports {wanted}; this environment has {framework} {installed}, "
            f"which was left as it was. Install a supported one (pip install '{wanted}'), or an {adapter} "
            f"release that supports {framework} {installed}.")
    return installed
