"""Every core advantage estimator as a verl estimator named ``agentrl_<name>``.

verl calls ``fn(token_level_rewards, response_mask, config, index, ...)`` with
``config`` = ``config.algorithm``. The wrapper sums each row's rewards, hands the
core estimator the group ids and the compact-filter flags (a row whose
``response_mask`` is all zero is a filtered one: the agent loop zeroes it), and
broadcasts the advantages over the mask. ``advantage.masked_in_baseline`` (and the ``advantage.*`` parameters
the estimator names) are read from
the recipe that ``+agentrl.recipe`` at the config's root names (without one, in a verl
config of the user's own, the schema's default, true: verl's own estimators behave so).

Row scale: verl 0.9.1's trainer divides the sequence-mean losses by every row of
the mini-batch (``global_batch_size``), the core by the rows that keep a loss
token. With one mini-batch per step (what the launcher sets) the factor
rows / rows-with-tokens, folded into the advantages, makes the two equal; the
clipped surrogate is linear in a positive advantage scale.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor
from verl.trainer.ppo.core_algos import register_adv_est

from agentrl_plugins.algorithm import ADVANTAGE_PARAMETERS, named_params
from agentrl_plugins.algorithms.aggregation import row_scale as core_row_scale
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe_schema import AdvantageSection

from agentrl_verl.names import SEQUENCE_MEAN_MODES, estimator_name
from agentrl_verl.recipe_file import RECIPE_KEY, recipe_from_config, select


def group_ids(index: Any) -> Tensor:
    """verl's per-row ``uid`` values (any hashable) as integer group ids."""
    _, inverse = np.unique(np.asarray(index, dtype=object).astype(str), return_inverse=True)
    return torch.as_tensor(inverse.reshape(-1), dtype=torch.long)


def row_scale(loss_agg_mode: str | None, valid: Tensor) -> float:
    """The core's row scale for verl's trainer: it divides its sequence-mean losses by every row (B/R), no other."""
    divisor = "B/R" if loss_agg_mode in SEQUENCE_MEAN_MODES else "1"
    return core_row_scale(divisor, valid.numel(), int(valid.sum()))


def verl_estimator(compute: Callable[..., Tensor]) -> Callable[..., tuple[Tensor, Tensor]]:
    """A verl advantage estimator that runs the core ``compute``."""

    def estimate(token_level_rewards: Tensor, response_mask: Tensor, config: Any = None, index: Any = None,
                 **kwargs: Any) -> tuple[Tensor, Tensor]:
        if index is None:
            raise ValueError("agentrl estimators need verl's group index (the 'uid' column)")
        rewards = token_level_rewards.sum(dim=-1)
        valid = response_mask.sum(dim=-1) > 0
        section = recipe_from_config(config).advantage if select(config, RECIPE_KEY) is not None else AdvantageSection()
        values = compute(rewards, group_ids(index).to(rewards.device), valid,
                         masked_in_baseline=section.masked_in_baseline,
                         **named_params(compute, section, ADVANTAGE_PARAMETERS))
        scale = row_scale(select(config, "actor_rollout_ref.actor.loss_agg_mode"), valid)
        advantages = (values * scale).to(token_level_rewards.dtype).unsqueeze(-1) * response_mask
        return advantages, advantages

    estimate.__name__ = estimator_name(compute.__name__)
    return estimate


def register_estimators() -> list[str]:
    """Register every trajectory-level estimator of agentrl's registry with verl; returns the verl names."""
    names = []
    for entry in get_plugin_manager().registry("advantage"):
        if entry.record.level != "trajectory":
            continue
        name = estimator_name(entry.record.name)
        register_adv_est(name)(verl_estimator(entry.record.compute))
        names.append(name)
    return names
