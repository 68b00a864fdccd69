"""OpenRLHF 0.11.2's unmodified ``train_ppo_ray`` on a CPU: the CPU backend of agentrl-openrlhf.

Asked for with ``AGENTRL_OPENRLHF_BACKEND=cpu``; ``agentrl run --framework openrlhf`` chooses it
when torch sees no GPU. The launch command then carries the environment of :mod:`.launch`
(fake Ray GPUs, DeepSpeed's CPU accelerator, the vLLM and flash-attn shims) and the
runtime-env hook installs :mod:`.patches` in the driver and in every Ray worker. A GPU run
(``AGENTRL_OPENRLHF_BACKEND=gpu``, or unset with CUDA present) imports nothing from here.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentrl_plugins.errors import UnknownNameError

BACKEND_ENV = "AGENTRL_OPENRLHF_BACKEND"
BACKENDS = ("gpu", "cpu")
SHIMS = Path(__file__).with_name("shims")


def choose_backend() -> str:
    """``AGENTRL_OPENRLHF_BACKEND`` when set, else ``gpu`` when torch sees CUDA and ``cpu`` otherwise."""
    value = os.environ.get(BACKEND_ENV)
    if value:
        if value not in BACKENDS:
            raise UnknownNameError(f"{BACKEND_ENV} backend", value, BACKENDS)
        return value
    import torch

    return "gpu" if torch.cuda.is_available() else "cpu"


def requested() -> bool:
    """Whether this process runs under the CPU backend (the launcher sets the variable for every process)."""
    return os.environ.get(BACKEND_ENV) == "cpu"
