"""The trainer-to-rollout weight-sync group over gloo, in place of OpenRLHF's vLLM NCCL communicator.

OpenRLHF 0.11.2 builds the group with ``stateless_init_process_group(master_address, master_port,
rank, world_size, device)`` (``utils/distributed_util.py:13-26``, a ``PyNcclCommunicator``) and calls
only its ``broadcast(tensor, src, stream)``; :class:`GlooBroadcastGroup` offers the same on a
standalone gloo group (a ``TCPStore`` hosted by rank 0), outside torch's default process group.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

SYNC_TIMEOUT = timedelta(minutes=10)


class GlooBroadcastGroup:
    """Rank ``rank`` of a ``world_size`` gloo group rendezvousing at ``host:port``; blocks until all ranks join."""

    def __init__(self, host: str, port: int, rank: int, world_size: int, timeout: timedelta = SYNC_TIMEOUT):
        store = dist.TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout)
        self.group = dist.ProcessGroupGloo(store, rank, world_size, timeout)

    def broadcast(self, tensor: torch.Tensor, src: int, stream: Any = None) -> None:
        """``tensor`` from rank ``src`` into every rank's ``tensor``; ``stream`` is ignored (no CUDA here)."""
        options = dist.BroadcastOptions()
        options.rootRank = src
        options.rootTensor = 0
        self.group.broadcast([tensor], options).wait()


def stateless_init_process_group(master_address: str, master_port: int, rank: int, world_size: int,
                                 device: Any) -> GlooBroadcastGroup:
    """OpenRLHF's ``stateless_init_process_group`` over gloo; ``device`` is ignored (tensors stay on the CPU)."""
    return GlooBroadcastGroup(master_address, master_port, rank, world_size)
