"""verl's ``cpu`` platform: device ``cpu``, collectives on gloo, chosen only by ``VERL_PLATFORM=cpu``.

It reports the Ray resource name ``"GPU"`` because verl's resource pools count
only ``GPU``/``NPU`` resources (``single_controller/ray/base.py``, the node
count in ``ResourcePoolManager``): the launcher starts Ray with ``num_gpus``
equal to the number of trainer processes, so each CPU worker holds one
"GPU" slot. It never auto-detects: a machine with a GPU keeps verl's own
platform unless ``VERL_PLATFORM=cpu`` is set.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

from agentrl_verl.cpu import PLATFORM
from agentrl_verl.cpu.device import CpuDeviceModule

DEVICE_MODULE = CpuDeviceModule()


@PlatformRegistry.register(platform=PLATFORM)
class PlatformCPU(PlatformBase):
    """Training and rollout in CPU processes (a few threads each), collectives over gloo."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> Any:
        return DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return False

    def current_device(self) -> str:
        """``"cpu"``, not an index: verl moves tensors with ``.to(get_device_id())``, and ``.to(0)`` means CUDA."""
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "AGENTRL_VISIBLE_CPUS"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
