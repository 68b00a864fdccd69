"""verl's vLLM worker extension for vLLM's CPU build: the weight sync through vLLM's in-place reload.

verl 0.9.1's ``vLLMColocateWorkerExtension`` loads each received bucket with ``model.load_weights``; vLLM's CPU build
packs every linear layer for its kernels at load time and drops the parameters' loaders, so that fails there
("'Parameter' object has no attribute 'weight_loader'"). :class:`CpuWorkerExtension` receives the buckets through
verl's own receiver (shared memory, as verl chooses where CUDA IPC is unavailable), keeps a copy of each weight
(the receiver reuses its buffer), and loads them all at the sync's end through the core's
:func:`~agentrl_plugins.vllm_cpu.reload_weights`. The launch names it (``cpu/workarounds.py``).
"""

from __future__ import annotations

from typing import Any

import torch
from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightReceiver
from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension

from agentrl_plugins.vllm_cpu import reload_weights

PATH = "agentrl_verl.cpu.vllm_worker.CpuWorkerExtension"


class CpuWorkerExtension(vLLMColocateWorkerExtension):
    """verl's worker extension, its weight sync replaced by one in-place reload of the whole sync."""

    model_runner: Any

    def update_weights_from_ipc(self, peft_config: dict | None = None, base_sync_done: bool = False,
                                use_shm: bool = False) -> None:
        if peft_config and base_sync_done:
            raise NotImplementedError("a LoRA adapter's sync on vLLM's CPU build is not wired: merge the adapter "
                                      "(actor_rollout_ref.model.lora.merge=true) or sample with rollout.engine=hf")
        arrived: dict[str, torch.Tensor] = {}

        def keep(weights: list[tuple[str, torch.Tensor]], is_last: bool) -> None:
            arrived.update((name, tensor.clone()) for name, tensor in weights)

        BucketedWeightReceiver(zmq_handle=self._get_zmq_handle(), device=torch.device("cpu"),
                               use_shm=use_shm).receive_weights(on_bucket_received=keep)
        reload_weights(self.model_runner, arrived.items())
