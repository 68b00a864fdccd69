"""verl on a CPU: the ``cpu`` platform, the ``agentrl_hf`` rollout backend and the workarounds they need.

Nothing here is registered unless ``VERL_PLATFORM=cpu`` (the launcher sets it
when the machine has no GPU, or when asked): a GPU run never sees it.
"""

from __future__ import annotations

import os

PLATFORM_ENV = "VERL_PLATFORM"
PLATFORM = "cpu"


def requested() -> bool:
    """Whether this process runs verl on the CPU platform (``VERL_PLATFORM=cpu``)."""
    return os.environ.get(PLATFORM_ENV, "").strip().lower() == PLATFORM


def activate() -> dict[str, bool]:
    """Register the platform, the rollout backend and the packed-sequence attention with verl and transformers, and
    apply the workarounds; returns theirs."""
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from agentrl_verl.cpu import attention, platform  # noqa: F401  (registers the platform)
    from agentrl_verl.cpu.rollout import ROLLOUT_NAME, load_replica
    from agentrl_verl.cpu.workarounds import apply_workarounds

    RolloutReplicaRegistry.register(ROLLOUT_NAME, load_replica)
    attention.register()
    return apply_workarounds()
