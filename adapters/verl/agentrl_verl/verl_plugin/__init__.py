"""verl's ``verl.plugins`` entry point: what agentrl-verl registers in verl on ``import verl``, in every process.

Every agentrl advantage estimator, a policy loss per correction, an agent loop
per environment, the on-policy update's loss (inert unless asked for) and the recording ``sync`` trainer;
with ``VERL_PLATFORM=cpu``, the CPU platform and rollout backend. ``import verl`` comes first: whichever of verl
or this package is imported first, verl finishes initialising (and its plugin loading finds this package
mid-import, harmlessly) before the modules below import its parts.
"""

import verl  # noqa: F401

from agentrl_verl import cpu
from agentrl_verl.verl_plugin.agent_loop import AGENT_LOOPS
from agentrl_verl.verl_plugin.estimators import register_estimators
from agentrl_verl.verl_plugin.losses import register_policy_losses
from agentrl_verl.verl_plugin.on_policy import install as install_on_policy_update

ESTIMATORS = register_estimators()
POLICY_LOSSES = register_policy_losses()
install_on_policy_update()
CPU_WORKAROUNDS = cpu.activate() if cpu.requested() else {}

# verl's trainer modules ask for the device when imported: after the CPU platform is registered.
from agentrl_verl.verl_plugin.trainer import register_trainer  # noqa: E402

TRAINER = register_trainer()

__all__ = ["AGENT_LOOPS", "CPU_WORKAROUNDS", "ESTIMATORS", "POLICY_LOSSES", "TRAINER"]
