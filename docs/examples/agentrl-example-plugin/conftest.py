"""Fixtures for the plugin's tests: a plugin manager with the built-ins and this plugin, as once installed."""

import pytest

from agentrl_plugins.plugins import PluginManager

from agentrl_example_plugin import plugin


@pytest.fixture
def manager() -> PluginManager:
    """What ``get_plugin_manager()`` holds after ``pip install`` of this package, without installing it."""
    manager = PluginManager(load_entry_points=False)
    assert manager.add_plugin(plugin, "arithmetic", "agentrl-example-plugin"), manager.infos["arithmetic"].error
    return manager
