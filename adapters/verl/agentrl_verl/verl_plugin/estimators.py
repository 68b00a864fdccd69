"""Every core advantage estimator as a verl estimator named ``agentrl_<name>``.

verl calls ``fn(token_level_rewards, response_mask, config, index, ...)`` with
``config`` = ``config.algorithm``. The wrapper sums each row's rewards, hands the
core estimator the group ids and the compact-filter flags (a row whose
``response_mask`` is all zero is a filtered one: the agent loop zeroes it), and
broadcasts the advantages over the mask. ``advantage.masked_in_baseline`` (and the ``advantage.*`` parameters
the estimator names) are read from
the recipe that ``+agentrl.recipe`` at the config's root names (without one, in a verl
config of the user's own, the schema's default, true: verl's own estimators behave so).

A turn- or token-level estimator (GiGPO) also needs each row's turns, which verl's estimator signature does
not carry: the agent loop puts them in the row's ``extra_fields`` (:data:`TURNS_FIELD`), and the recording
trainer hands them, in the batch's row order, to the estimator through :func:`carried_turns` for the
duration of verl's own ``_compute_advantage``.

An agent loop's several outputs (an agent program's later segments) are rows of one episode: the recording
trainer hands verl's row keys through :func:`carried_sessions`, and a trajectory-level estimator computes on the
episodes (one reward each, the group counting each once) and gives every row its episode's value.

Row scale: verl 0.9.1's trainer divides the sequence-mean losses by every row of
the mini-batch (``global_batch_size``), the core by the rows that keep a loss
token. With one mini-batch per step (what the launcher sets) the factor
rows / rows-with-tokens, folded into the advantages, makes the two equal; the
clipped surrogate is linear in a positive advantage scale.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor
from verl.trainer.ppo.core_algos import register_adv_est

from agentrl_plugins.algorithm import Advantages, estimated_advantages, with_distillation
from agentrl_plugins.algorithms.aggregation import row_scale as core_row_scale
from agentrl_plugins.algorithms.credit import TurnRecord, TurnRows
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.plugins import get_plugin_manager
from agentrl_plugins.recipe_schema import AdvantageSection

from agentrl_verl.names import SEQUENCE_MEAN_MODES, estimator_name
from agentrl_verl.recipe_file import RECIPE_KEY, recipe_from_config, select

TURNS_FIELD = "agentrl_turns"
"""The ``extra_fields`` key under which the agent loop hands each row's :class:`TurnRecord` to the trainer (as
its :meth:`~TurnRecord.as_fields`: verl stores the outputs' fields as plain data)."""
_TURNS: contextvars.ContextVar[Sequence[TurnRecord] | None] = contextvars.ContextVar("agentrl_turns", default=None)
_SESSIONS: contextvars.ContextVar[Sequence[str] | None] = contextvars.ContextVar("agentrl_sessions", default=None)


@contextlib.contextmanager
def carried_turns(records: Sequence[TurnRecord]) -> Iterator[None]:
    """Within the block, a turn- or token-level estimator reads ``records`` as the batch's rows' turns."""
    token = _TURNS.set(records)
    try:
        yield
    finally:
        _TURNS.reset(token)


@contextlib.contextmanager
def carried_sessions(keys: Sequence[str]) -> Iterator[None]:
    """Within the block, the estimators read the rows' episodes from verl's row keys, ``{uid}_{session}_{index}``:
    an agent loop's several outputs (an agent program's segments) are one episode, each a row."""
    token = _SESSIONS.set([key.rsplit("_", 1)[0] for key in keys])
    try:
        yield
    finally:
        _SESSIONS.reset(token)


def row_episodes(rows: int) -> tuple[Tensor, Tensor]:
    """Each row's episode (rows of one agent loop's outputs share theirs) and each episode's first row; each row
    its own episode without carried sessions."""
    sessions = _SESSIONS.get()
    if sessions is None or len(sessions) != rows:
        return torch.arange(rows), torch.arange(rows)
    _, first, episode = np.unique(np.asarray(sessions, dtype=object).astype(str), return_index=True,
                                  return_inverse=True)
    return torch.as_tensor(episode.reshape(-1), dtype=torch.long), torch.as_tensor(first, dtype=torch.long)


def current_turns(name: str, rows: int) -> Sequence[TurnRecord]:
    records = _TURNS.get()
    if records is None or len(records) != rows:
        raise AgentRLError(f"verl estimator {name!r} (turn-level, or with a distillation teacher) needs the turn "
                           f"records of all {rows} rows "
                           f"({0 if records is None else len(records)} carried): it runs inside agentrl's recording "
                           "trainer (verl's sync trainer with +agentrl.recipe), whose agent loop records them")
    return records


def group_ids(index: Any) -> Tensor:
    """verl's per-row ``uid`` values (any hashable) as integer group ids."""
    _, inverse = np.unique(np.asarray(index, dtype=object).astype(str), return_inverse=True)
    return torch.as_tensor(inverse.reshape(-1), dtype=torch.long)


def row_scale(loss_agg_mode: str | None, valid: Tensor) -> float:
    """The core's row scale for verl's trainer: it divides its sequence-mean losses by every row (B/R), no other."""
    divisor = "B/R" if loss_agg_mode in SEQUENCE_MEAN_MODES else "1"
    return core_row_scale(divisor, valid.numel(), int(valid.sum()))


def verl_estimator(record: Any) -> Callable[..., tuple[Tensor, Tensor]]:
    """A verl advantage estimator that runs the core estimator ``record`` (any level)."""
    name = estimator_name(record.name)

    def estimate(token_level_rewards: Tensor, response_mask: Tensor, config: Any = None, index: Any = None,
                 **kwargs: Any) -> tuple[Tensor, Tensor]:
        if index is None:
            raise ValueError("agentrl estimators need verl's group index (the 'uid' column)")
        rewards = token_level_rewards.sum(dim=-1)
        valid = response_mask.sum(dim=-1) > 0
        recipe = recipe_from_config(config) if select(config, RECIPE_KEY) is not None else None
        section = recipe.advantage if recipe is not None else AdvantageSection()
        scale = row_scale(select(config, "actor_rollout_ref.actor.loss_agg_mode"), valid)
        groups = group_ids(index).to(rewards.device)
        distills = recipe is not None and recipe.distillation.enabled
        turns = (TurnRows.of(current_turns(name, len(rewards)), response_mask)
                 if distills or record.level != "trajectory" else None)
        if record.level == "trajectory":  # one value per episode, carried by each of its rows
            episode, first = (part.to(rewards.device) for part in row_episodes(len(rewards)))
            kept = torch.zeros(len(first), device=rewards.device).index_add_(0, episode, valid.float()) > 0
            values = estimated_advantages(record.compute, record.level, record.name, section, rewards[first],
                                          groups[first], kept)[episode]
        else:
            values = estimated_advantages(record.compute, record.level, record.name, section, rewards, groups,
                                          valid, turns)
        if distills and turns is not None:  # each row's teacher signal, on its own tokens
            values = with_distillation(Advantages(values, valid), turns, recipe.distillation).values
        per_token = values.unsqueeze(-1) if values.dim() == 1 else values
        advantages = (per_token * scale).to(token_level_rewards.dtype) * response_mask
        return advantages, advantages

    estimate.__name__ = name
    return estimate


def register_estimators() -> list[str]:
    """Register every estimator of agentrl's registry with verl; returns the verl names."""
    names = []
    for entry in get_plugin_manager().registry("advantage"):
        name = estimator_name(entry.record.name)
        register_adv_est(name)(verl_estimator(entry.record))
        names.append(name)
    return names


ESTIMATORS = register_estimators()
