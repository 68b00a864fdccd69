"""What vLLM's CPU build needs from every adapter that runs it: new weights loaded in place, and a KV cache size.

vLLM's CPU build packs each linear layer's weight for its GEMM kernels at load time and drops the parameters'
loaders, so loading parameter by parameter (``model.load_weights``, what TRL and OpenRLHF call on a GPU) fails
there ("'Parameter' object has no attribute 'weight_loader'"). vLLM's own in-place reload takes a whole set of
named weights and repacks them; the output layer is repacked after it, since its weight is the embedding's when
the two are tied. vLLM is imported only when a reload runs.

The CPU build sizes its KV cache from ``VLLM_CPU_KVCACHE_SPACE`` (GiB), not from a memory fraction: the CPU launches
set it where your environment does not (:func:`kv_cache_env`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    import torch

KV_CACHE_ENV = "VLLM_CPU_KVCACHE_SPACE"
KV_CACHE_GIB = "1"
"""vLLM's CPU build's KV cache, in GiB, where your environment does not size it: TinyAgent's needs a few MiB."""


def kv_cache_env() -> dict[str, str]:
    """The KV cache size of a CPU run's vLLM engines: yours where set, else :data:`KV_CACHE_GIB`."""
    return {KV_CACHE_ENV: os.environ.get(KV_CACHE_ENV, KV_CACHE_GIB)}


def reload_weights(model_runner: Any, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load ``weights`` (Hugging Face names) into ``model_runner``'s model through vLLM's in-place reload."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    model_runner.reload_weights(weights_iterator=list(weights))
    output_layer = getattr(model_runner.model, "lm_head", None)
    if output_layer is not None and hasattr(output_layer, "cpu_linear"):
        dispatch_cpu_unquantized_gemm(output_layer, remove_weight=False)
