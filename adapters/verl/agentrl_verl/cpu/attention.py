"""Packed sequences' attention on a CPU: each sequence attends causally within itself, through torch's fused kernel.

verl packs a micro-batch's sequences into one row (``use_remove_padding``) and marks where each starts by its
``position_ids``; on a GPU flash-attention's varlen kernel takes them as they are. With transformers' ``sdpa`` a
CPU builds a dense block-diagonal mask over the whole row and attends across all of it: the square of the packed
length, most of it masked, in the unfused kernel. ``agentrl_packed_sdpa`` builds no mask for a packed row and runs
torch's causal kernel on each sequence (the same numbers within float rounding); a batch with a padding mask, or
a model with sliding-window layers, goes to ``sdpa`` unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

PACKED_ATTENTION = "agentrl_packed_sdpa"


def sequence_starts(position_ids: Tensor) -> list[int]:
    """Where each packed sequence starts (its positions restart), and the row's end."""
    positions = position_ids.reshape(-1)
    restarts = (positions[1:] != positions[:-1] + 1).nonzero().flatten() + 1
    return [0, *restarts.tolist(), positions.numel()]


def _full_attention(config: Any) -> bool:
    return all(kind == "full_attention" for kind in getattr(config, "layer_types", None) or ["full_attention"])


def packed_mask(batch_size: int, q_length: int, kv_length: int, q_offset: int = 0, kv_offset: int = 0,
                mask_function: Any = None, attention_mask: Tensor | None = None, **kwargs: Any) -> Tensor | None:
    """No mask for one row without padding (the attention finds its sequences), else ``sdpa``'s."""
    from transformers.masking_utils import causal_mask_function, sdpa_mask

    if attention_mask is None and batch_size == 1 and _full_attention(kwargs.get("config")):
        return None
    return sdpa_mask(batch_size, q_length, kv_length, q_offset, kv_offset, mask_function or causal_mask_function,
                     attention_mask, **kwargs)


def packed_sdpa(module: Any, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                dropout: float = 0.0, scaling: float | None = None, **kwargs: Any) -> tuple[Tensor, None]:
    """Causal attention within each sequence of a packed row (``query`` is ``(1, heads, length, dim)``); ``sdpa``
    for anything else."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    position_ids = kwargs.get("position_ids")
    if attention_mask is not None or position_ids is None or query.shape[0] != 1 or query.shape[2] != key.shape[2]:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    starts = sequence_starts(position_ids)
    groups = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    parts = [F.scaled_dot_product_attention(query[:, :, start:end], key[:, :, start:end], value[:, :, start:end],
                                            dropout_p=dropout, is_causal=True, scale=scaling)
             for start, end in zip(starts, starts[1:])]
    return torch.cat(parts, dim=2).transpose(1, 2).contiguous(), None


def register() -> None:
    """Make ``attn_implementation="agentrl_packed_sdpa"`` known to transformers in this process."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(PACKED_ATTENTION, packed_sdpa)
    AttentionMaskInterface.register(PACKED_ATTENTION, packed_mask)
