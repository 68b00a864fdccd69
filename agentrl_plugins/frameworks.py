"""Which frameworks exist and where each one's environment is: the registered adapters, and configuration.

The frameworks cannot share one Python environment, so the core often runs where a framework's
adapter is not installed (``agentrl compare`` runs each framework's side in that framework's own
environment). It learns about such frameworks from configuration; for each framework's Python the
first match wins:

1. ``AGENTRL_PYTHON_<FRAMEWORK>`` (e.g. ``AGENTRL_PYTHON_VERL=/opt/verl/bin/python``);
2. ``$AGENTRL_VENVS/<framework>/bin/python``;
3. the ``[frameworks.<name>]`` table of the configuration file: ``python`` (relative to the file),
   ``adapter`` (the adapter's distribution) and ``build`` (how to make that environment). The file is
   ``$AGENTRL_CONFIG``, else the first ``agentrl.toml`` in the working directory or above it;
4. this interpreter, when the framework's adapter is registered here.
"""

from __future__ import annotations

import os
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentrl_plugins.errors import AgentRLError

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

PYTHON_VARIABLE = "AGENTRL_PYTHON_{}"
VENVS_VARIABLE = "AGENTRL_VENVS"
CONFIG_VARIABLE = "AGENTRL_CONFIG"
CONFIG_FILE = "agentrl.toml"


@dataclass(frozen=True)
class FrameworkSetting:
    """One framework as the configuration file describes it."""

    name: str
    python: Path | None
    adapter: str
    build: str
    origin: Path


@dataclass(frozen=True)
class FrameworkEnv:
    """Where a framework's Python is and which setting named it."""

    framework: str
    python: Path
    found_by: str


def config_file() -> Path | None:
    """``$AGENTRL_CONFIG``, else the nearest ``agentrl.toml`` from the working directory up, else None."""
    if os.environ.get(CONFIG_VARIABLE):
        return Path(os.environ[CONFIG_VARIABLE])
    for folder in (Path.cwd(), *Path.cwd().parents):
        if (folder / CONFIG_FILE).is_file():
            return folder / CONFIG_FILE
    return None


def configured_frameworks() -> dict[str, FrameworkSetting]:
    """The ``[frameworks.*]`` tables of the configuration file, by name."""
    path = config_file()
    if path is None:
        return {}
    try:
        tables = tomllib.loads(path.read_text()).get("frameworks", {})
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise AgentRLError(f"{path}: not a readable agentrl configuration file: {error}") from None
    settings = {}
    for name, table in tables.items():
        if not isinstance(table, dict) or set(table) - {"python", "adapter", "build"}:
            raise AgentRLError(f"{path}: [frameworks.{name}] takes only python, adapter and build, got {table!r}")
        python = (path.parent / table["python"]) if "python" in table else None
        settings[name] = FrameworkSetting(name, python, table.get("adapter", ""), table.get("build", ""), path)
    return settings


def registered_adapters(plugin_manager: PluginManager | None = None) -> list[str]:
    from agentrl_plugins.plugins import get_plugin_manager

    return (plugin_manager or get_plugin_manager()).registry("adapter").names()


def known_frameworks(plugin_manager: PluginManager | None = None) -> list[str]:
    """Frameworks registered here, configured in the file, or given a Python by ``AGENTRL_PYTHON_<NAME>``."""
    prefix = PYTHON_VARIABLE.format("")
    named = {key[len(prefix):].lower() for key, value in os.environ.items() if key.startswith(prefix) and value}
    return sorted(set(registered_adapters(plugin_manager)) | set(configured_frameworks()) | named)


def adapter_distribution(framework: str) -> str:
    """The distribution of ``framework``'s adapter as the configuration names it, else a description."""
    setting = configured_frameworks().get(framework)
    return setting.adapter if setting and setting.adapter else f"the adapter of {framework}"


def install_hint(framework: str) -> str:
    """How to get ``framework``'s adapter and environment, from the configuration where it says."""
    setting = configured_frameworks().get(framework)
    adapter = f"pip install {setting.adapter}" if setting and setting.adapter else f"install the adapter of {framework}"
    hint = f"{adapter} into the environment where {framework} is installed"
    if setting and setting.build:
        hint += f" ({setting.origin.name} builds it with: {setting.build})"
    return hint


def python_of(framework: str, plugin_manager: PluginManager | None = None) -> FrameworkEnv | None:
    """The Python of ``framework``'s environment by the rules above, or None when nothing names one."""
    variable = PYTHON_VARIABLE.format(framework.upper())
    if os.environ.get(variable):
        return FrameworkEnv(framework, Path(os.environ[variable]), variable)
    if os.environ.get(VENVS_VARIABLE):
        return FrameworkEnv(framework, Path(os.environ[VENVS_VARIABLE]) / framework / "bin" / "python", VENVS_VARIABLE)
    setting = configured_frameworks().get(framework)
    if setting is not None and setting.python is not None:
        return FrameworkEnv(framework, setting.python, str(setting.origin))
    if framework in registered_adapters(plugin_manager):
        return FrameworkEnv(framework, Path(sys.executable), "this environment")
    return None
