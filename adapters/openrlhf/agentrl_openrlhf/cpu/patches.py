"""The CPU backend's patches: one small function per OpenRLHF 0.11.2 behaviour that needs CUDA or vLLM.

Each :class:`CpuPatch` names the OpenRLHF code it works around (:class:`CallSite`: the function
and the call it makes there). :func:`check` runs before anything is patched: the installed
OpenRLHF must be 0.11.2 and every call site must still read as written against, else
:class:`PatchError` names what changed, so a moved target is an error, never a silent wrong run.
:func:`install` applies them in one process (the runtime-env hook calls it in the driver and in
every Ray worker); torch's own ``torch.cuda.is_available()`` stays False throughout.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable

import torch

from agentrl_openrlhf.cpu import rollout, shim_paths
from agentrl_openrlhf.patches import OPENRLHF_VERSION, PatchError

DEEPSPEED = "openrlhf.utils.deepspeed.deepspeed"
PPO_ACTOR = "openrlhf.trainer.ray.ppo_actor"


@dataclass(frozen=True)
class CallSite:
    """``module:qualname`` (a function or method) whose source contains ``code``."""

    module: str
    qualname: str
    code: str

    def check(self) -> None:
        where = f"{self.module}.{self.qualname}"
        try:
            found: Any = importlib.import_module(self.module)
            for part in self.qualname.split("."):
                found = getattr(getattr(found, "__ray_metadata__", None), "modified_class", found)
                found = getattr(found, part)
            source = inspect.getsource(found)
        except (ImportError, AttributeError, OSError, TypeError) as error:
            raise PatchError(f"the CPU backend cannot find {where}: {error} ({_versions()})") from None
        if self.code not in source:
            raise PatchError(f"the CPU backend expected {where} to contain {self.code!r}; it no longer does "
                             f"({_versions()})")


@dataclass(frozen=True)
class CpuPatch:
    """What OpenRLHF does that needs CUDA or vLLM, where, and the function that replaces it."""

    behaviour: str
    sites: tuple[CallSite, ...]
    apply: Callable[[], None]


def _versions() -> str:
    try:
        installed = importlib.metadata.version("openrlhf")
    except importlib.metadata.PackageNotFoundError:
        installed = "not installed"
    return f"written against OpenRLHF {OPENRLHF_VERSION}; installed: {installed}"


def cuda_set_device() -> None:
    """``torch.cuda.set_device(local_rank)`` pins each trainer rank to a GPU: nothing to pin on a CPU.

    Each stand-in is its own function: torch.compile keeps one rule per torch function object.
    """

    def set_device(device: Any) -> None:
        return None

    torch.cuda.set_device = set_device


def cuda_synchronize() -> None:
    """``torch.cuda.synchronize()`` after barriers, fits and offloads: CPU work is already synchronous."""

    def synchronize(device: Any = None) -> None:
        return None

    torch.cuda.synchronize = synchronize


def cuda_current_device() -> None:
    """``torch.cuda.current_device()`` used as the device of tensors and of training: the CPU."""

    def current_device() -> torch.device:
        return torch.device("cpu")

    torch.cuda.current_device = current_device


def cuda_current_stream() -> None:
    """``torch.cuda.current_stream()`` handed to the weight broadcast: no stream (the gloo group ignores it)."""

    def current_stream(device: Any = None) -> None:
        return None

    torch.cuda.current_stream = current_stream


def cuda_device_mesh() -> None:
    """``init_device_mesh("cuda", ...)`` for the data/sequence/tensor-parallel mesh: the same mesh on ``cpu``."""
    module = importlib.import_module(DEEPSPEED)
    original = module.init_device_mesh

    @functools.wraps(original)
    def init_device_mesh(device_type: str, *args: Any, **kwargs: Any) -> Any:
        return original("cpu", *args, **kwargs)

    module.init_device_mesh = init_device_mesh


def replay_buffer_cuda_target() -> None:
    """``NaiveReplayBuffer`` moves experiences to ``cuda:<current device>``: keep them on the CPU.

    The original constructor runs with ``current_device`` answering 0 (it only formats a device
    name), then the target becomes the CPU.
    """
    from openrlhf.trainer.ppo_utils.replay_buffer import NaiveReplayBuffer

    original = NaiveReplayBuffer.__init__

    @functools.wraps(original)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        current = torch.cuda.current_device
        torch.cuda.current_device = lambda: 0
        try:
            original(self, *args, **kwargs)
        finally:
            torch.cuda.current_device = current
        self.target_device = torch.device("cpu")

    NaiveReplayBuffer.__init__ = __init__


def nccl_weight_sync_group() -> None:
    """``stateless_init_process_group`` builds vLLM's NCCL communicator for weight sync: a gloo group instead."""
    from agentrl_openrlhf.cpu.weight_sync import stateless_init_process_group

    importlib.import_module(PPO_ACTOR).stateless_init_process_group = stateless_init_process_group


def vllm_rollout_engine() -> None:
    """``create_vllm_engines`` starts vLLM ``RolloutRayActor``s with OpenRLHF's CUDA weight sync: the same actor with
    the CPU build's sync (:mod:`.vllm_rollout`), or the Hugging Face stand-in (:mod:`.rollout`)."""
    from openrlhf.trainer.ray import vllm_engine

    if rollout() == "vllm":
        from agentrl_openrlhf.cpu.vllm_rollout import RolloutRayActor
    else:
        from agentrl_openrlhf.cpu.rollout import RolloutRayActor  # type: ignore[assignment]

    vllm_engine.RolloutRayActor = RolloutRayActor


def deepspeed_shm_comm() -> None:
    """``deepspeed.init_distributed`` compiles DeepSpeed's shared-memory comm op on a CPU: gloo does the collectives.

    DeepSpeed skips the op when its compatibility table marks it unavailable.
    """
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def fused_adam_optimizer() -> None:
    """DeepSpeed's ``AdamW`` config builds ``FusedAdam`` (a C++ op compiled on first use): torch's AdamW instead.

    DeepSpeed's own ``torch_adam`` optimizer option; the update is the same AdamW.
    """
    from openrlhf.utils.deepspeed.deepspeed import DeepspeedStrategy

    original = DeepspeedStrategy.get_ds_train_config

    @functools.wraps(original)
    def get_ds_train_config(self, *args: Any, **kwargs: Any) -> dict:
        config = original(self, *args, **kwargs)
        optimizer = config.get("optimizer") or {}
        if optimizer.get("type") == "AdamW":
            optimizer["params"]["torch_adam"] = True
        return config

    DeepspeedStrategy.get_ds_train_config = get_ds_train_config


PATCHES = (
    CpuPatch("each trainer rank pins a CUDA device", (
        CallSite(DEEPSPEED, "DeepspeedStrategy.setup_distributed", "torch.cuda.set_device(local_rank)"),),
        cuda_set_device),
    CpuPatch("the parallelism mesh is built on CUDA", (
        CallSite(DEEPSPEED, "DeepspeedStrategy.setup_distributed", '"cuda", (dp_size'),), cuda_device_mesh),
    CpuPatch("CUDA synchronisation after barriers, fits and offloads", (
        CallSite("openrlhf.utils.distributed_util", "torch_dist_barrier_and_cuda_sync", "torch.cuda.synchronize()"),
        CallSite("openrlhf.trainer.ray.launcher", "BaseModelActor.empty_cache", "torch.cuda.synchronize()"),
        CallSite(PPO_ACTOR, "PolicyModelActor.fit", "torch.cuda.synchronize()"),
        CallSite("openrlhf.utils.deepspeed.deepspeed_utils", "offload_deepspeed_states", "torch.cuda.synchronize()"),
        CallSite("openrlhf.utils.deepspeed.deepspeed_utils", "reload_deepspeed_states", "torch.cuda.synchronize()")),
        cuda_synchronize),
    CpuPatch("the current CUDA device as the device of tensors", (
        CallSite(PPO_ACTOR, "ActorPPOTrainer.ppo_train", "device = torch.cuda.current_device()"),
        CallSite(PPO_ACTOR, "PolicyModelActor.forward", "device = torch.cuda.current_device()"),
        CallSite(DEEPSPEED, "DeepspeedStrategy.all_reduce", "data.to(torch.cuda.current_device())"),
        CallSite(DEEPSPEED, "DeepspeedStrategy.all_gather", "data.to(torch.cuda.current_device())")),
        cuda_current_device),
    CpuPatch("the weight broadcast runs on the current CUDA stream", (
        CallSite(PPO_ACTOR, "ActorPPOTrainer.broadcast_to_vllm", "stream=torch.cuda.current_stream()"),),
        cuda_current_stream),
    CpuPatch("the replay buffer targets the current CUDA device", (
        CallSite("openrlhf.trainer.ppo_utils.replay_buffer", "NaiveReplayBuffer.__init__",
                 'torch.device(f"cuda:{torch.cuda.current_device()}")'),), replay_buffer_cuda_target),
    CpuPatch("weight sync over vLLM's NCCL communicator", (
        CallSite(PPO_ACTOR, "ActorPPOTrainer._init_vllm_sync_group",
                 "self._model_update_group = stateless_init_process_group("),
        CallSite("openrlhf.utils.distributed_util", "stateless_init_process_group",
                 "PyNcclCommunicator(pg, device=device)")),
        nccl_weight_sync_group),
    CpuPatch("rollouts on vLLM engines synced over NCCL", (
        CallSite("openrlhf.trainer.ray.vllm_engine", "create_vllm_engines", "RolloutRayActor.options("),),
        vllm_rollout_engine),
    CpuPatch("DeepSpeed compiles its shared-memory comm op when the trainer joins its process group", (
        CallSite(DEEPSPEED, "DeepspeedStrategy.setup_distributed", "deepspeed.init_distributed(timeout=timeout)"),),
        deepspeed_shm_comm),
    CpuPatch("DeepSpeed's compiled FusedAdam for the AdamW optimizer", (
        CallSite(DEEPSPEED, "DeepspeedStrategy._ds_init_train_model", '"type": "AdamW"'),
        CallSite(DEEPSPEED, "DeepspeedStrategy.get_ds_train_config", "optim_config=optim_dict")),
        fused_adam_optimizer),
)

_installed: list[str] = []


def use_shims() -> None:
    """Put the shims of this process's rollout engine first on ``sys.path`` (OpenRLHF imports ``flash_attn`` and
    ``vllm`` at module top)."""
    for folder in reversed(shim_paths(rollout())):
        if folder not in sys.path:
            sys.path.insert(0, folder)


def check(patches: tuple[CpuPatch, ...] = PATCHES) -> None:
    """Raise :class:`PatchError` unless OpenRLHF is 0.11.2 and every call site reads as written against."""
    installed = importlib.metadata.version("openrlhf")
    if installed != OPENRLHF_VERSION:
        raise PatchError(f"the CPU backend is written against OpenRLHF {OPENRLHF_VERSION}; installed: {installed}")
    for patch in patches:
        for site in patch.sites:
            site.check()


def install() -> list[str]:
    """Check, then apply every CPU patch in this process (once); returns the behaviours replaced."""
    if not _installed:
        use_shims()
        check()
        for patch in PATCHES:
            patch.apply()
            _installed.append(patch.behaviour)
    return list(_installed)
