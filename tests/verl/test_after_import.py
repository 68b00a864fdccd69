"""Registrations wait for the part of verl they register into: run after it imports, never break it, never load it."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrl_verl import after_import as deferred
from agentrl_verl.after_import import DeferredRegistrationWarning, after_import, import_awaited


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh package ``pkg_<test>`` with a module ``part`` that marks when its body has finished."""
    name = f"pkg_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "part.py").write_text("started = True\nREGISTRY = {}\nfinished = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(deferred, "FAILURES", {})
    yield name
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


def test_a_function_runs_once_its_module_has_finished_importing_and_not_before(package):
    seen = []
    after_import(f"{package}.part", lambda module: seen.append(module.finished))
    assert seen == [] and f"{package}.part" not in sys.modules
    module = importlib.import_module(f"{package}.part")
    assert seen == [True]
    assert type(module.__loader__).__name__ == "SourceFileLoader", "the module keeps its own loader"
    assert module.__spec__.loader is module.__loader__
    importlib.reload(module)
    assert seen == [True], "once"


def test_a_module_already_imported_runs_the_function_at_once(package):
    module = importlib.import_module(f"{package}.part")
    after_import(f"{package}.part", lambda loaded: loaded.REGISTRY.update(name="value"))
    assert module.REGISTRY == {"name": "value"}


def test_a_failing_function_is_said_and_recorded_and_the_module_still_imports(package):
    def broken(module):
        raise KeyError("no such registry")

    after_import(f"{package}.part", broken)
    with pytest.warns(DeferredRegistrationWarning, match="no such registry"):
        module = importlib.import_module(f"{package}.part")
    assert module.finished
    (key,) = deferred.FAILURES
    assert key.startswith(f"{package}.part: ") and "broken" in key and "KeyError" in deferred.FAILURES[key]


def test_import_awaited_imports_what_functions_still_wait_for(package):
    seen = []
    after_import(f"{package}.part", lambda module: seen.append(module.__name__))
    import_awaited()
    assert seen == [f"{package}.part"]


PROBE = """
import json, sys
import verl
import agentrl_verl.cpu.rollout  # the rollout server's module
import verl.workers.rollout.router  # the load balancer's
loaded = {name: name in sys.modules for name in ("verl.experimental.agent_loop", "verl.trainer.ppo.v1",
                                                 "agentrl_verl.verl_plugin.agent_loop")}
from verl.workers.rollout.replica import get_rollout_replica_class
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
from agentrl_verl.after_import import FAILURES
print(json.dumps({"loaded": loaded, "replica": get_rollout_replica_class("agentrl_hf").__name__,
                  "loops": sorted(k for k in _agent_loop_registry if k.startswith("agentrl_")),
                  "trainer": TRAINER_REGISTRY["sync"].__name__, "failures": list(FAILURES)}))
"""


def test_the_rollout_server_and_load_balancer_processes_never_import_the_agent_loops():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=180,
                            env={**os.environ, "VERL_PLATFORM": "cpu"})
    assert result.returncode == 0, result.stderr[-4000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["loaded"] == {"verl.experimental.agent_loop": False, "verl.trainer.ppo.v1": False,
                             "agentrl_verl.verl_plugin.agent_loop": False}
    assert out["replica"] == "HFReplica", "the CPU rollout backend is registered with verl's replica module"
    assert out["loops"] == ["agentrl_bugfix", "agentrl_bugfix_agent"] and out["trainer"] == "AgentRLTrainer"
    assert out["failures"] == []
