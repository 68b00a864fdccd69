"""One digest of a model's weights, the same for the rollout engine's copy and the trained model."""

from __future__ import annotations

import hashlib
from typing import Any


def weights_digest(model: Any) -> str:
    """SHA-256 over every parameter's name and float32 values, in name order (tied weights once)."""
    digest = hashlib.sha256()
    for name, parameter in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(parameter.detach().float().contiguous().numpy().tobytes())
    return digest.hexdigest()

