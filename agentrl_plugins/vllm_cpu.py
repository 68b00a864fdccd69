"""New weights into a running vLLM engine's model, in place, on any platform vLLM builds for (its CPU build included).

vLLM's CPU build packs each linear layer's weight for its GEMM kernels at load time and drops the parameters'
loaders, so loading parameter by parameter (``model.load_weights``, what TRL and OpenRLHF call on a GPU) fails
there ("'Parameter' object has no attribute 'weight_loader'"). vLLM's own in-place reload takes a whole set of
named weights and repacks them; the output layer is repacked after it, since its weight is the embedding's when
the two are tied. vLLM is imported only when a reload runs.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch


def reload_weights(model_runner: Any, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load ``weights`` (Hugging Face names) into ``model_runner``'s model through vLLM's in-place reload."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    model_runner.reload_weights(weights_iterator=list(weights))
    output_layer = getattr(model_runner.model, "lm_head", None)
    if output_layer is not None and hasattr(output_layer, "cpu_linear"):
        dispatch_cpu_unquantized_gemm(output_layer, remove_weight=False)
