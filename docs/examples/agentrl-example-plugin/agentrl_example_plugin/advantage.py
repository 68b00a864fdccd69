"""An advantage estimator: each reward minus the median reward of its group."""

import torch
from torch import Tensor


def median_baseline(rewards: Tensor, group_ids: Tensor, valid: Tensor | None = None, *,
                    masked_in_baseline: bool = True) -> Tensor:
    """r - median of the group (the lower middle value for an even count); filtered rows get 0.

    ``valid`` is False for trajectories removed by compact filtering; with ``masked_in_baseline``
    they still count in their group's median.
    """
    keep = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid.to(torch.bool)
    members = torch.ones_like(keep) if masked_in_baseline else keep
    advantages = torch.zeros_like(rewards)
    for group in group_ids.unique():
        rows = group_ids == group
        if (rows & keep).any():
            advantages[rows & keep] = rewards[rows & keep] - rewards[rows & members].median()
    return advantages
