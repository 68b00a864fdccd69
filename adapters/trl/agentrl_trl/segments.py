"""TRL's generation batch with the later segments of agent-program episodes as rows of their own.

TRL's ``rollout_func`` returns one completion per prompt, and TRL scores, groups and pads those rows. The trainer
then appends each later segment (:mod:`agentrl_plugins.segments`) as a row, in TRL's layout: its prompt
left-padded, its completion right-padded, its policy mask as the ``tool_mask``, its sampler's log-probs. The
adapter sets ``steps_per_generation`` to 1, so the batch is one micro-batch of any size (TRL's split into
several would drop a remainder).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor
from trl.trainer.utils import pad

from agentrl_plugins.types import Trajectory

LEFT_PADDED = ("prompt_ids", "prompt_mask")
RIGHT_PADDED = ("completion_ids", "completion_mask", "tool_mask", "sampling_per_token_logps",
                "old_per_token_logps", "ref_per_token_logps")
LEARNER_LOGPS = ("old_per_token_logps", "ref_per_token_logps")
"""Log-probs TRL computes with a model for its own rows; the trainer computes them for the appended ones."""


def _widened(tensor: Tensor, width: int, value: float, left: bool) -> Tensor:
    extra = width - tensor.size(1)
    if extra <= 0:
        return tensor
    fill = tensor.new_full((tensor.size(0), extra), value)
    return torch.cat([fill, tensor] if left else [tensor, fill], dim=1)


def segment_fields(segment: Trajectory, pad_id: int) -> dict[str, list[float]]:
    """One segment's values for TRL's per-row fields (its completion is at least one token, as the rollout's)."""
    completion = segment.response_ids or [pad_id]
    return {
        "prompt_ids": list(segment.prompt_ids),
        "prompt_mask": [1] * len(segment.prompt_ids),
        "completion_ids": list(completion),
        "completion_mask": [1] * len(completion),
        "tool_mask": list(segment.response_mask) or [0],
        "sampling_per_token_logps": list(segment.logprobs) or [0.0],
        "old_per_token_logps": [0.0] * len(completion),
        "ref_per_token_logps": [0.0] * len(completion),
    }


def append_segments(output: dict[str, Any], segments: Sequence[Trajectory], pad_id: int) -> slice:
    """Append ``segments`` to TRL's ``output`` in place; returns where they are."""
    start = output["prompt_ids"].size(0)
    if output.get("tool_mask") is None:
        raise ValueError("TRL's batch has no tool_mask (the rollout's env_mask): appended rows would all be trained")
    other = [key for key, value in output.items() if key not in (*LEFT_PADDED, *RIGHT_PADDED, "advantages")
             and isinstance(value, Tensor) and value.dim() and value.size(0) == start]
    if other:
        raise ValueError(f"TRL's batch has per-row fields {other} that an agent program's later segments cannot "
                         "fill (a vLLM importance ratio, images): train this program without them")
    fields = [segment_fields(segment, pad_id) for segment in segments]
    for key in (*LEFT_PADDED, *RIGHT_PADDED):
        tensor = output.get(key)
        if tensor is None:
            continue
        left = key in LEFT_PADDED
        value = pad_id if key.endswith("_ids") else 0
        added = pad([torch.tensor(f[key], dtype=tensor.dtype) for f in fields], padding_value=value,
                    padding_side="left" if left else "right").to(tensor.device)  # as TRL pads its own rows
        width = max(tensor.size(1), added.size(1))
        output[key] = torch.cat([_widened(tensor, width, value, left), _widened(added, width, value, left)])
    return slice(start, start + len(fields))
