"""The learning-rate schedules a recipe may name, as the factor on ``optim.lr`` after each update.

Only schedules that verl, TRL and OpenRLHF all build natively, with the same numbers: ``constant``
and ``cosine`` (a half cosine from ``optim.lr`` down to ``min_lr_ratio * optim.lr``, no warm-up).
"""

from __future__ import annotations

import math
from typing import Literal, get_args

LrSchedule = Literal["constant", "cosine"]
LR_SCHEDULES: tuple[str, ...] = get_args(LrSchedule)


def lr_multiplier(schedule: str, updates_done: int, total_updates: int, min_lr_ratio: float = 0.0) -> float:
    """The factor on ``optim.lr`` for the update after ``updates_done`` of ``total_updates``."""
    if schedule not in LR_SCHEDULES:
        raise ValueError(f"unknown learning-rate schedule {schedule!r}; known: {list(LR_SCHEDULES)}")
    if schedule == "constant":
        return 1.0
    progress = updates_done / max(1, total_updates)
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
