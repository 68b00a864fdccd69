"""verl's ``verl.plugins`` entry point: what agentrl-verl registers in verl on ``import verl``, in every process.

Each registering module registers when imported, and is imported once the part of verl it registers into is
(:mod:`agentrl_verl.after_import`): every agentrl advantage estimator and a policy loss per correction with verl's
``core_algos``, the on-policy update's loss (inert unless asked for) with its engine workers, an agent loop per
environment with its agent loops, the recording ``sync`` trainer with its v1 trainers, and the driver's check of
verl's config against the recipe with ``validate_config`` (:mod:`.driver`). With
``VERL_PLATFORM=cpu``, the CPU platform is registered at once, the rollout backend and each CPU workaround with
their part of verl. A process that never imports a part does not pay for it: a run's rollout-server and
load-balancer processes never import the agent loops (two seconds each). ``import verl`` comes first: whichever of
verl or this package is imported first, verl finishes initialising (and its plugin loading finds this package
mid-import, harmlessly) before anything below waits for its parts.
"""

import functools
import importlib
from types import ModuleType

import verl  # noqa: F401

from agentrl_verl import cpu
from agentrl_verl.after_import import after_import
from agentrl_verl.verl_plugin import driver

REGISTRATIONS = {
    "verl.trainer.ppo.core_algos": ("agentrl_verl.verl_plugin.estimators", "agentrl_verl.verl_plugin.losses"),
    "verl.workers.engine_workers": ("agentrl_verl.verl_plugin.on_policy",),
    "verl.experimental.agent_loop": ("agentrl_verl.verl_plugin.agent_loop",),
    # verl's trainer modules ask for the device when imported: the CPU platform is registered before.
    "verl.trainer.ppo.v1": ("agentrl_verl.verl_plugin.trainer",),
}
"""verl's module, and the modules of agentrl-verl that register into it when imported."""


def import_modules(modules: tuple[str, ...], _: ModuleType) -> None:
    """Import ``modules``: each registers on import (one already importing is left to finish)."""
    for module in modules:
        importlib.import_module(module)


CPU_WORKAROUNDS = cpu.activate() if cpu.requested() else {}
for _verl_module, _modules in REGISTRATIONS.items():
    after_import(_verl_module, functools.partial(import_modules, _modules), name=f"import {', '.join(_modules)}")
after_import("verl.utils.config", driver.install, name="agentrl_verl.verl_plugin.driver.install")

__all__ = ["CPU_WORKAROUNDS", "REGISTRATIONS"]
