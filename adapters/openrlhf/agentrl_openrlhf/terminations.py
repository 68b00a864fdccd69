"""Episode terminations through OpenRLHF's per-sample logs: the executor writes them, the advantage patch reads them.

OpenRLHF keeps an executor's ``extra_logs`` (numbers only) in each sample's ``info`` and logs
their means, so each termination reason is one 0/1 entry: the logs show the share of episodes
ending each way, and the patched estimator recovers every sample's reason for compact filtering.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from agentrl_plugins.types import TERMINATION_REASONS

LOG_KEY = "termination_{}"


def termination_logs(termination: str) -> dict[str, float]:
    """One 0/1 entry per termination reason."""
    return {LOG_KEY.format(reason): float(reason == termination) for reason in TERMINATION_REASONS}


def terminations_from_info(info: Mapping[str, Any], rows: int) -> list[str]:
    """Each sample's reason from a micro-batch's ``info``; without the entries (another executor) none is filtered."""
    flags = [info.get(LOG_KEY.format(reason)) for reason in TERMINATION_REASONS]
    if any(flag is None for flag in flags):
        return ["submitted"] * rows
    which = torch.stack([flag.reshape(-1) for flag in flags], dim=-1).argmax(dim=-1)
    return [TERMINATION_REASONS[i] for i in which.tolist()]
