"""The verl 0.9.1 behaviours that keep its trainer off a CPU, one function each, checked when applied.

Each function first checks that its target is still what it was written
against: a target that is gone or renamed raises :class:`VerlChangedError`; a
target whose source no longer shows the behaviour means verl fixed it, and the
function warns with :class:`VerlFixedWarning` and changes nothing. Each
returns whether it changed verl. They run only on the ``cpu`` platform, each once verl's module it changes is
imported (a process that never imports it is not changed).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

from agentrl_plugins.errors import AgentRLError

from agentrl_verl.after_import import after_import
from agentrl_verl.names import ROLLOUT_NAME

ADAPTER_PATH = "agentrl_verl.cpu.rollout.HFServerAdapter"


class VerlChangedError(AgentRLError):
    """A workaround's target changed in verl: the workaround must be reviewed against the new code."""


class VerlFixedWarning(UserWarning):
    """verl no longer shows a behaviour that agentrl-verl works around: the workaround can be removed."""


def module_source(module: str) -> str:
    """The source of verl module ``module``, read without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise VerlChangedError(f"{module} is gone from this verl; agentrl-verl's CPU workarounds target verl 0.9.1")
    return Path(spec.origin).read_text()


def still_present(name: str, module: str, marker: str) -> bool:
    """Whether ``module``'s source still shows ``marker`` (the behaviour); warns when verl fixed it."""
    if marker in module_source(module):
        return True
    warnings.warn(f"agentrl-verl CPU workaround {name}: {module} no longer contains {marker!r}, so verl seems to "
                  f"have fixed it; the workaround is skipped and can be removed", VerlFixedWarning, stacklevel=3)
    return False


def attribute(module: str, name: str) -> Any:
    """``module.name``, or a :class:`VerlChangedError` naming what moved."""
    loaded = importlib.import_module(module)
    if not hasattr(loaded, name):
        raise VerlChangedError(f"{module}.{name} is gone from this verl; agentrl-verl's CPU workaround for it needs "
                               f"review")
    return getattr(loaded, name)


def rebind(module: str, name: str, value: Any) -> None:
    """Set ``name`` in ``module`` and in every loaded verl module that imported it by name."""
    original = attribute(module, name)
    setattr(sys.modules[module], name, value)
    for loaded in list(sys.modules.values()):
        if getattr(loaded, "__name__", "").startswith("verl.") and getattr(loaded, name, None) is original:
            setattr(loaded, name, value)


def wrap_function(module: str, name: str, wrap: Callable[[Any], Callable[..., Any]]) -> bool:
    """Rebind verl's ``module.name`` to ``wrap(original)`` (also where verl's modules imported it by name), once in
    a process: a second call finds it wrapped. Returns True (verl was changed)."""
    original = attribute(module, name)
    if not getattr(original, "agentrl_workaround", False):
        replacement = wrap(original)
        replacement.agentrl_workaround = True  # type: ignore[attr-defined]
        rebind(module, name, replacement)
    return True


def process_group_backend_names_cpu_twice(module: str) -> bool:
    """``utils/distributed.py`` builds ``"cpu:gloo,{device}:{backend}"``; on CPU that is ``cpu:gloo,cpu:gloo``,
    which torch rejects (duplicate device type). Default the backend to ``cpu:gloo``."""
    name = "initialize_global_process_group_ray"
    if not still_present("process_group_backend_names_cpu_twice", module, 'f"cpu:gloo,{get_device_name()}'):
        return False

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def initialize_global_process_group_ray(timeout_second=None, backend=None):
            return original(timeout_second=timeout_second, backend=backend or "cpu:gloo")

        return initialize_global_process_group_ray

    return wrap_function(module, name, wrap)


def fsdp2_offload_policy_pins_memory(module: str) -> bool:
    """``workers/engine/fsdp/transformer_impl.py`` gives forward-only FSDP2 models (the reference policy)
    ``CPUOffloadPolicy(pin_memory=True)``, and pinning needs an accelerator. Unpin it."""
    if not still_present("fsdp2_offload_policy_pins_memory", module, "CPUOffloadPolicy(pin_memory=True)"):
        return False
    policy = attribute("verl.utils.fsdp_utils", "CPUOffloadPolicy")
    if getattr(policy, "agentrl_workaround", False):
        return True

    class UnpinnedCPUOffloadPolicy(policy):
        agentrl_workaround = True

        def __init__(self, pin_memory: bool = False):
            super().__init__(pin_memory=False)

    rebind("verl.utils.fsdp_utils", "CPUOffloadPolicy", UnpinnedCPUOffloadPolicy)
    return True


def fsdp_engines_registered_for_cuda_and_npu_only(module: str) -> bool:
    """``transformer_impl.py`` registers its FSDP engines for devices ``cuda`` and ``npu`` only, so
    ``EngineRegistry.get_engine_cls`` finds none for ``cpu``. Register the same classes for ``cpu``."""
    if not still_present("fsdp_engines_registered_for_cuda_and_npu_only", module, 'device=["cuda", "npu"]'):
        return False
    registry = attribute("verl.workers.engine.base", "EngineRegistry")
    engines = {"language_model": attribute(module, "FSDPEngineWithLMHead"),
               "value_model": attribute(module, "FSDPEngineWithValueHead")}
    for model_type, engine in engines.items():
        by_backend = registry._engines.get(model_type, {})
        missing = [backend for backend in ("fsdp", "fsdp2") if "cpu" not in by_backend.get(backend, {})]
        if missing:
            registry.register(model_type=model_type, backend=missing, device="cpu")(engine)
    return True


def rollout_correction_rejects_a_fully_masked_batch(module: str) -> bool:
    """``trainer/ppo/rollout_corr_helper.py`` raises when no token of the batch is in the loss, which is what
    compact filtering does to a batch of failed episodes (a freshly initialised model's first steps): it runs whenever
    the rollout log-probs are there, which a CPU run always asks for. Such a batch has nothing to correct."""
    name = "compute_rollout_correction_and_add_to_batch"
    if not still_present("rollout_correction_rejects_a_fully_masked_batch", module,
                         "response_mask must contain at least one valid token"):
        return False

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def compute_rollout_correction_and_add_to_batch(batch, rollout_corr_config):
            if batch.batch["response_mask"].any():
                return original(batch, rollout_corr_config)
            if rollout_corr_config.get("rollout_is", None) is not None:
                batch.batch["rollout_is_weights"] = torch.ones_like(batch.batch["old_log_probs"])
            return batch, {}

        return compute_rollout_correction_and_add_to_batch

    return wrap_function(module, name, wrap)


def rollout_class_lookup_is_a_private_dict(module: str) -> bool:
    """``workers/rollout/base.py`` finds the in-worker rollout class in the private ``_ROLLOUT_REGISTRY``,
    which has no public register function (the replica side has ``RolloutReplicaRegistry``). Add the entry."""
    if "def register" in module_source(module):
        warnings.warn("agentrl-verl CPU workaround rollout_class_lookup_is_a_private_dict: "
                      f"{module} has a register function now; use it instead", VerlFixedWarning, stacklevel=2)
    registry = attribute(module, "_ROLLOUT_REGISTRY")
    if not isinstance(registry, dict):
        raise VerlChangedError(f"{module}._ROLLOUT_REGISTRY is no longer a dict; the {ROLLOUT_NAME} rollout "
                               f"cannot be registered")
    registry[(ROLLOUT_NAME, "async")] = ADAPTER_PATH
    return True


REPLAY_POLL_S = 0.1
"""How often a CPU run's trainer checks its replay buffer for finished episodes."""


def replay_buffer_polls_every_two_seconds(module: str) -> bool:
    """``trainer/ppo/v1/replay_buffer.py`` checks for finished episodes every 2 s (``poll_interval``, which no
    setting reaches), so every step's rollout takes a multiple of 2 s; on a CPU a laptop step's whole rollout
    takes about one. Poll every :data:`REPLAY_POLL_S` seconds."""
    if not still_present("replay_buffer_polls_every_two_seconds", module, "poll_interval: float = 2.0"):
        return False
    buffer = attribute(module, "ReplayBuffer")
    original = buffer.__init__
    if getattr(original, "agentrl_workaround", False):
        return True

    def __init__(self: Any, *args: Any, poll_interval: float = REPLAY_POLL_S, **kwargs: Any) -> None:
        original(self, *args, poll_interval=poll_interval, **kwargs)

    __init__.agentrl_workaround = True  # type: ignore[attr-defined]
    buffer.__init__ = __init__
    return True


LOGSUMEXP_ELEMENTS = 1 << 24
"""How many logits (64 MiB in float32) one reduction of a CPU run's log-probs reads at a time."""


def log_probs_reduce_one_row_at_a_time(module: str) -> bool:
    """``utils/torch_functional.py``'s ``logprobs_from_logits_v2`` (verl's path where neither flash-attn's nor an
    NPU's cross-entropy is available) takes each row's logsumexp in a Python loop, to bound peak memory; a packed
    micro-batch's logits have a row per token, so a CPU step runs about a thousand reductions a micro-batch, and
    as many autograd nodes. Reduce as many rows at once as fit in :data:`LOGSUMEXP_ELEMENTS` logits: memory stays
    bounded, the values are each row's logsumexp as before."""
    name = "logprobs_from_logits_v2"
    if not still_present("log_probs_reduce_one_row_at_a_time", module,
                         "torch.stack([torch.logsumexp(logit, dim=-1) for logit in logits])"):
        return False

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def logprobs_from_logits_v2(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            if logits.dtype not in (torch.float32, torch.float64):
                return original(logits, labels)
            chosen = torch.gather(logits, dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)
            rows = logits.reshape(-1, logits.shape[-1])
            chunk = max(1, LOGSUMEXP_ELEMENTS // rows.shape[-1])
            normaliser = torch.cat([torch.logsumexp(part, dim=-1) for part in rows.split(chunk)])
            return chosen - normaliser.view(chosen.shape)

        return logprobs_from_logits_v2

    return wrap_function(module, name, wrap)


def vllm_server_loads_weights_with_cuda_loaders(module: str) -> bool:
    """``workers/rollout/vllm_rollout/vllm_async_server.py`` starts vLLM with verl's worker extension, which loads
    each bucket of a weight sync with the loaders vLLM's CPU build drops: name the CPU build's extension
    (:mod:`agentrl_verl.cpu.vllm_worker`), which loads the whole sync through vLLM's in-place reload."""
    from agentrl_verl.cpu.vllm_worker import PATH

    if not still_present("vllm_server_loads_weights_with_cuda_loaders", module,
                         'return "verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension"'):
        return False
    server = attribute(module, "vLLMHttpServer")

    def _get_worker_extension_cls(self: Any) -> str:
        return PATH

    server._get_worker_extension_cls = _get_worker_extension_cls
    return True


WORKAROUNDS: dict[Callable[[str], bool], str] = {
    process_group_backend_names_cpu_twice: "verl.utils.distributed",
    fsdp2_offload_policy_pins_memory: "verl.workers.engine.fsdp.transformer_impl",
    fsdp_engines_registered_for_cuda_and_npu_only: "verl.workers.engine.fsdp.transformer_impl",
    rollout_correction_rejects_a_fully_masked_batch: "verl.trainer.ppo.rollout_corr_helper",
    rollout_class_lookup_is_a_private_dict: "verl.workers.rollout.base",
    replay_buffer_polls_every_two_seconds: "verl.trainer.ppo.v1.replay_buffer",
    log_probs_reduce_one_row_at_a_time: "verl.utils.torch_functional",
    vllm_server_loads_weights_with_cuda_loaders: "verl.workers.rollout.vllm_rollout.vllm_async_server",
}
"""Each workaround and the verl module it changes (its target, applied once the module is imported)."""


def apply_workarounds() -> dict[str, bool]:
    """Apply each workaround once its target is imported (at once if it is); returns, by name, whether each
    applied so far changed verl."""
    applied: dict[str, bool] = {}
    for workaround, module in WORKAROUNDS.items():
        after_import(module, functools.partial(record, applied, workaround), name=workaround.__name__)
    return applied


def record(applied: dict[str, bool], workaround: Callable[[str], bool], module: ModuleType) -> None:
    applied[workaround.__name__] = workaround(module.__name__)
