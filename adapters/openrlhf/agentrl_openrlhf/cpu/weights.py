"""One digest of a model's weights, the same for the rollout engine's copy and the trained model, and the sampling seed
it gives."""

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


def weights_seed(seed: int, digest: str) -> int:
    """The sampling seed of a run seeded ``seed`` once it serves the weights of ``digest``: draws that follow the
    weights served, not how many syncs the engine has seen, so a resumed run draws as the run never stopped."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{digest}".encode(), digest_size=8).digest(), "little") & (2**63 - 1)
