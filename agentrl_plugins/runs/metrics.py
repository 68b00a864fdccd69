"""One row of ``metrics.jsonl`` per training step, the same for every framework."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class StepMetrics:
    """The figures every run reports after each step; ``heldout_pass1`` is None between evaluations."""

    step: int
    train_reward: float
    heldout_pass1: float | None
    heldout_hacked_fraction: float | None
    hacked_fraction: float
    filtered_fraction: float
    clip_fraction: float
    is_capped_fraction: float
    entropy: float
    policy_tokens: int
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict) -> "StepMetrics":
        return cls(**{f.name: row[f.name] for f in fields(cls)})


METRIC_NAMES = tuple(f.name for f in fields(StepMetrics))
