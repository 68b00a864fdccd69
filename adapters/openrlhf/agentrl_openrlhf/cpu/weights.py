"""One digest of a model's weights, the same for the rollout engine's copy and the trained model, and the run
folder's record of what the rollout engine holds after each sync."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterable

import torch

from agentrl_plugins.runs.journal import append_line

from agentrl_openrlhf.recipe_env import RUN_DIR_ENV

ROLLOUT_WEIGHTS = "rollout_weights.jsonl"


def tensors_digest(named: Iterable[tuple[str, torch.Tensor]]) -> str:
    """SHA-256 over every tensor's name and float32 values, in name order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(named, key=lambda item: item[0]):
        digest.update(name.encode())
        digest.update(tensor.detach().float().contiguous().numpy().tobytes())
    return digest.hexdigest()


def weights_digest(model: Any) -> str:
    """:func:`tensors_digest` of a model's parameters (tied weights once)."""
    return tensors_digest(model.named_parameters())


def record_sync(sync: int, digest: str) -> None:
    """Append sync ``sync``'s weights digest to :data:`ROLLOUT_WEIGHTS` in the run folder (when the run has one)."""
    run_dir = os.environ.get(RUN_DIR_ENV)
    if run_dir:
        append_line(Path(run_dir) / ROLLOUT_WEIGHTS, {"sync": sync, "sha256": digest})
