"""Registering TinyAgent costs a command nothing: its plugin loads without torch's model stack (transformers), and
finding its cached warm start imports neither torch nor transformers."""

from __future__ import annotations

import os
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
    assert done.stdout.split() == ["['tinyagent',", "'tinyagent_fixer']", "False"]


CACHED_PROBE = """
import sys
from agentrl_tinyagent.cache import BASE_SEED, model_path
from agentrl_tinyagent.plugin import resolve
path = model_path(BASE_SEED)
path.mkdir(parents=True)
(path / "config.json").write_text("{}")
print(resolve(seed=7, prepare=True) == path, "torch" in sys.modules, "transformers" in sys.modules)
"""


def test_finding_the_cached_warm_start_imports_neither_torch_nor_transformers(tmp_path):
    env = {**os.environ, "AGENTRL_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CACHED_PROBE], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False"]


def test_the_teacher_is_a_build_of_its_own_that_never_saw_the_hack(tmp_path, monkeypatch):
    from agentrl_tinyagent.cache import FIXER_SETTINGS, WarmStartSettings
    from agentrl_tinyagent.plugin import resolve, resolve_fixer
    from agentrl_tinyagent.warmstart import curriculum
    from bugfix_gym import policies
    from bugfix_gym.families import FAMILIES

    monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path))
    assert resolve_fixer(seed=3, prepare=False) != resolve(seed=3, prepare=False), "its own cache folder"
    hack = policies.hacker(FAMILIES[0])[0]
    plays, warm = curriculum(FIXER_SETTINGS, seed=0)[1], curriculum(WarmStartSettings(), seed=0)[1]
    assert any(p.script[0] == hack for p in warm), "the warm start imitates the hack beside the fix"
    assert plays and not any(hack in p.script for p in plays), "the teacher never saw it"


def test_the_package_names_still_resolve_on_use():
    import agentrl_tinyagent

    assert agentrl_tinyagent.BASE_SEED == 0 and callable(agentrl_tinyagent.load_tinyagent)
    assert sorted(agentrl_tinyagent.__all__) == agentrl_tinyagent.__all__
