"""Registering TinyAgent costs a command nothing: its plugin loads without torch's model stack (transformers)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from agentrl_plugins.plugins import get_plugin_manager
names = [entry.record.name for entry in get_plugin_manager().registry("model")]
print(names, "transformers" in sys.modules)
"""


def test_the_model_registers_without_importing_transformers():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['tinyagent']", "False"]


def test_the_package_names_still_resolve_on_use():
    import agentrl_tinyagent

    assert agentrl_tinyagent.BASE_SEED == 0 and callable(agentrl_tinyagent.load_tinyagent)
    assert sorted(agentrl_tinyagent.__all__) == agentrl_tinyagent.__all__
