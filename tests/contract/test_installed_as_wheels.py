"""Each framework's environment is a user's: the project's packages installed from their wheels (not this
checkout), every dependency they declare satisfied by what pip resolved from those wheels alone, and the
framework inside the range its adapter declares. The tests beside this one therefore run the wheels."""

from __future__ import annotations

import importlib.metadata
import json
import sysconfig
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import agentrl_plugins
from agentrl_plugins.framework_versions import check_framework
from agentrl_plugins.plugins import get_plugin_manager

ADAPTERS = {entry.record.name: entry.distribution for entry in get_plugin_manager().registry("adapter")
            if entry.distribution.startswith("agentrl-")}
PROJECT = ["agentrl-plugins", "agentrl-bugfix-gym", "agentrl-tinyagent", *ADAPTERS.values()]


def unmet(distribution: str) -> list[str]:
    """The requirements of ``distribution`` outside its extras that the installed versions do not meet."""
    problems = []
    for line in importlib.metadata.requires(distribution) or ():
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{line}: not installed")
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{line}: {version} installed")
    return problems


@pytest.mark.parametrize("distribution", PROJECT)
def test_the_package_is_installed_from_its_wheel_with_what_it_declares(distribution):
    origin = json.loads(importlib.metadata.distribution(distribution).read_text("direct_url.json") or "{}")
    assert origin.get("url", "").endswith(".whl") and "dir_info" not in origin, origin
    assert unmet(distribution) == []


def test_the_code_under_test_is_the_installed_code():
    assert Path(agentrl_plugins.__file__).is_relative_to(sysconfig.get_path("purelib"))


@pytest.mark.parametrize(("framework", "distribution"), sorted(ADAPTERS.items()))
def test_the_framework_is_in_the_range_its_adapter_declares(framework, distribution):
    assert str(check_framework(distribution, framework)) == importlib.metadata.version(framework)
