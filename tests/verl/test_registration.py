"""``import verl`` registers agentrl's names through the ``verl.plugins`` entry point, and the check says why not."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from agentrl_plugins.errors import AgentRLError

from agentrl_verl.registration import RegistrationError, check_registration
from agentrl_verl.verl_plugin.trainer import AgentRLTrainer

PROBE = """
import json, verl
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
print(json.dumps([sorted(k for k in r if str(k).startswith("agentrl_"))
                  for r in (ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY, _agent_loop_registry)]
                 + [TRAINER_REGISTRY["sync"].__name__]))
"""


def test_a_bare_import_verl_registers_every_name_in_a_fresh_process():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    estimators, losses, loops, trainer = json.loads(result.stdout.strip().splitlines()[-1])
    assert trainer == "AgentRLTrainer"
    assert estimators == ["agentrl_dr_grpo", "agentrl_gigpo", "agentrl_grpo", "agentrl_grpo_turns", "agentrl_rloo"]
    assert losses == ["agentrl_geometric_sequence_mask", "agentrl_icepop", "agentrl_none", "agentrl_sequence_tis",
                      "agentrl_token_tis"]
    assert loops == ["agentrl_bugfix", "agentrl_bugfix_agent"]  # one per environment, agent programs included


def test_nothing_of_verls_is_shadowed():
    for name in ("grpo", "rloo", "gae"):
        assert not ADV_ESTIMATOR_REGISTRY[name].__module__.startswith("agentrl")
    assert not POLICY_LOSS_REGISTRY["vanilla"].__module__.startswith("agentrl")
    assert _agent_loop_registry["agentrl_bugfix"]["_target_"] == "agentrl_verl.verl_plugin.agent_loop.BugfixAgentLoop"


def test_verls_trainers_are_subclassed_and_the_other_modes_refuse_a_recipe():
    assert TRAINER_REGISTRY["sync"] is AgentRLTrainer and issubclass(AgentRLTrainer, PPOTrainerSync)
    for mode in ("colocate_async", "separate_async"):
        verls = TRAINER_REGISTRY[mode].__mro__[1]
        assert verls.__module__.startswith("verl.trainer.ppo.v1.") and verls.__name__ == TRAINER_REGISTRY[mode].__name__
        with pytest.raises(AgentRLError, match="trainer_mode=sync"):
            TRAINER_REGISTRY[mode](OmegaConf.create({"agentrl": {"recipe": "runs/x/recipe.toml"}}))


def test_the_check_passes_here_and_names_the_switch_that_turns_the_plugin_off(monkeypatch):
    check_registration()
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "none")
    with pytest.raises(RegistrationError, match="VERL_USE_EXTERNAL_PLUGINS"):
        check_registration()
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "someone_else,agentrl")
    check_registration()
