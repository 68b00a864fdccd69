"""``import verl`` registers agentrl's names through the ``verl.plugins`` entry point, and the check says why not."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY

from agentrl_verl.verl_plugin.registration import RegistrationError, check_registration

PROBE = """
import json, verl
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
print(json.dumps([sorted(k for k in r if str(k).startswith("agentrl_"))
                  for r in (ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY, _agent_loop_registry)]))
"""


def test_a_bare_import_verl_registers_every_name_in_a_fresh_process():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    estimators, losses, loops = json.loads(result.stdout.strip().splitlines()[-1])
    assert estimators == ["agentrl_dr_grpo", "agentrl_grpo", "agentrl_rloo"]
    assert losses == ["agentrl_geometric_sequence_mask", "agentrl_icepop", "agentrl_none", "agentrl_sequence_tis",
                      "agentrl_token_tis"]
    assert loops == ["agentrl_bugfix"]


def test_nothing_of_verls_is_shadowed():
    for name in ("grpo", "rloo", "gae"):
        assert not ADV_ESTIMATOR_REGISTRY[name].__module__.startswith("agentrl")
    assert not POLICY_LOSS_REGISTRY["vanilla"].__module__.startswith("agentrl")
    assert _agent_loop_registry["agentrl_bugfix"]["_target_"] == "agentrl_verl.verl_plugin.agent_loop.BugfixAgentLoop"


def test_the_check_passes_here_and_names_the_switch_that_turns_the_plugin_off(monkeypatch):
    check_registration()
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "none")
    with pytest.raises(RegistrationError, match="VERL_USE_EXTERNAL_PLUGINS"):
        check_registration()
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "someone_else,agentrl")
    check_registration()
