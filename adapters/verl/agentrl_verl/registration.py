"""The load-time check that ``import verl`` registers agentrl's names (verl logs plugin failures only at DEBUG).

verl's loader needs three things, checked here without starting a new process:
this distribution's ``verl.plugins`` entry point, a ``VERL_USE_EXTERNAL_PLUGINS``
that allows it, and a plugin module that imports and fills verl's registries (each registration, which waits for
the part of verl it registers into, is run here by importing that part).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import traceback

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.plugins import get_plugin_manager

from agentrl_verl.after_import import FAILURES, import_awaited
from agentrl_verl.names import agent_loop_name, estimator_name, policy_loss_name

PLUGIN_MODULE = "agentrl_verl.verl_plugin"
POLICY_ENV = "VERL_USE_EXTERNAL_PLUGINS"


class RegistrationError(AgentRLError):
    """``import verl`` would not register what agentrl-verl provides."""


def expected() -> dict[str, tuple[dict, list[str]]]:
    """For each verl registry: the registry and the names agentrl-verl puts in it."""
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY

    manager = get_plugin_manager()
    return {
        "advantage estimator": (ADV_ESTIMATOR_REGISTRY, [estimator_name(e.record.name)
                                                          for e in manager.registry("advantage")]),
        "policy loss": (POLICY_LOSS_REGISTRY, [policy_loss_name(c.record.name)
                                               for c in manager.registry("correction")]),
        "agent loop": (_agent_loop_registry, [agent_loop_name(e.record.name) for e in manager.registry("environment")]),
    }


def missing() -> list[str]:
    """The expected names absent from verl's registries in this process."""
    return [f"{kind} {name!r}" for kind, (registry, names) in expected().items() for name in names
            if name not in registry]


def check_registration() -> None:
    """Raise a :class:`RegistrationError` that says what to fix, unless ``import verl`` registers every name."""
    points = [ep for ep in importlib.metadata.entry_points(group="verl.plugins") if ep.value == PLUGIN_MODULE]
    if not points:
        raise RegistrationError(f"no 'verl.plugins' entry point loads {PLUGIN_MODULE}: install agentrl-verl as a "
                                f"distribution (pip install -e adapters/verl) in verl's environment")
    policy = os.environ.get(POLICY_ENV, "auto").strip().lower()
    allowed = policy == "auto" or points[0].name in {name.strip() for name in policy.split(",")}
    if not allowed:
        raise RegistrationError(f"{POLICY_ENV}={policy!r} keeps verl from loading plugin {points[0].name!r}: "
                                f"unset it, or add {points[0].name}")
    try:
        importlib.import_module(PLUGIN_MODULE)
        import_awaited()
    except Exception:
        raise RegistrationError(f"verl's plugin {PLUGIN_MODULE} fails to import:\n"
                                f"{traceback.format_exc(limit=-3)}") from None
    if FAILURES:
        raise RegistrationError(f"{PLUGIN_MODULE} failed to register in verl:\n" + "\n".join(
            f"{key}:\n{failure}" for key, failure in FAILURES.items()))
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY

    from agentrl_verl.verl_plugin.trainer import MODE, AgentRLTrainer

    absent = missing()
    if TRAINER_REGISTRY.get(MODE) is not AgentRLTrainer:
        absent.append(f"trainer {MODE!r} (verl's trainer_mode; {TRAINER_REGISTRY.get(MODE)!r} is registered)")
    if absent:
        raise RegistrationError(f"{PLUGIN_MODULE} imported but did not register {', '.join(absent)}")
