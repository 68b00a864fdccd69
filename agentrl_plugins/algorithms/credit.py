"""Turn-level credit: what a turn- or token-level estimator sees, GiGPO, and per-turn values spread over tokens."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Hashable, Mapping, Protocol, Sequence

import torch
from torch import Tensor

from agentrl_plugins.algorithms.advantages import group_statistics
from agentrl_plugins.types import Trajectory, TurnOutcome


class TurnBatch(Protocol):
    """A batch that carries its trajectories' turns (a step's ``TrajectoryBatch``, the parity batch)."""

    @property
    def response_mask(self) -> Tensor: ...

    @property
    def turns(self) -> Sequence[Sequence[TurnOutcome]]: ...

    @property
    def turn_spans(self) -> Sequence[Sequence[tuple[int, int]]]: ...


@dataclass(frozen=True)
class TurnRecord:
    """One trajectory's turns and their token spans as an adapter carries them from its rollout to its
    advantage step (picklable, for verl's TransferQueue and Ray); spans may be shifted into the framework's
    own token coordinates."""

    turns: tuple[TurnOutcome, ...]
    spans: tuple[tuple[int, int], ...]
    token_values: tuple[float, ...] = ()
    """The trajectory's :attr:`~agentrl_plugins.types.Trajectory.token_advantages` on its policy tokens, in span
    order (empty: none)."""

    @classmethod
    def of(cls, trajectory: Trajectory, offset: int = 0) -> TurnRecord:
        """``trajectory``'s turns, with each span moved by ``offset`` tokens."""
        values = trajectory.token_advantages
        spans = trajectory.turn_spans
        return cls(tuple(trajectory.turns), tuple((start + offset, end + offset) for start, end in spans),
                   tuple(values[index] for start, end in spans for index in range(start, end)) if values else ())

    def as_fields(self) -> dict[str, Any]:
        """Plain lists and dicts, for a framework that stores per-row extras as such (verl's ``extra_fields``)."""
        return {"spans": [list(span) for span in self.spans],
                "turns": [{"state": t.state, "next_state": t.next_state, "reward": t.reward, "signals": dict(t.signals)}
                          for t in self.turns],
                "token_values": list(self.token_values)}

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> TurnRecord:
        """The record :meth:`as_fields` gave, with list-valued state keys (a serialised tuple) hashable again."""
        return cls(tuple(TurnOutcome(_hashable(t["state"]), _hashable(t["next_state"]), t["reward"],
                                     dict(t["signals"])) for t in fields["turns"]),
                   tuple((int(start), int(end)) for start, end in fields["spans"]),
                   tuple(float(value) for value in fields.get("token_values", ())))

    def covers(self, mask: Sequence[float]) -> bool:
        """Whether the spans are exactly the 1s of ``mask`` (the row's policy tokens, in the same coordinates)."""
        ones = {index for index, value in enumerate(mask) if value}
        return ones == {index for start, end in self.spans for index in range(start, end)}


def _hashable(key: Any) -> Any:
    return tuple(_hashable(part) for part in key) if isinstance(key, list) else key


def check_turn_records(records: Sequence[TurnRecord | None], masks: Tensor, where: str) -> list[TurnRecord]:
    """``records`` when every row has one whose spans are exactly its policy tokens in ``masks`` [B, T] (a row
    whose mask is all 0, compact-filtered, has any); else an error naming the first row that does not."""
    checked = []
    for row, (record, mask) in enumerate(zip(records, masks.tolist(), strict=True)):
        if record is None:
            raise ValueError(f"{where}: row {row} carries no turns")
        if any(mask) and not record.covers(mask):
            raise ValueError(f"{where}: row {row}'s turn spans {list(record.spans)} are not its policy tokens "
                             f"({sum(1 for v in mask if v)} of them): the turns belong to another row")
        checked.append(record)
    return checked


@dataclass(frozen=True)
class TurnRows:
    """A :class:`TurnBatch` made of per-row :class:`TurnRecord` s and the framework's [B, T] loss mask."""

    response_mask: Tensor
    turns: tuple[tuple[TurnOutcome, ...], ...]
    turn_spans: tuple[tuple[tuple[int, int], ...], ...]
    token_values: tuple[tuple[float, ...], ...] = ()

    @classmethod
    def of(cls, records: Sequence[TurnRecord], response_mask: Tensor) -> TurnRows:
        if len(records) != response_mask.size(0):
            raise ValueError(f"{len(records)} turn records for {response_mask.size(0)} rows")
        return cls(response_mask, tuple(r.turns for r in records), tuple(r.spans for r in records),
                   tuple(r.token_values for r in records))


@dataclass(frozen=True)
class CreditInputs:
    """A step's trajectories for turn-level credit: per trajectory its reward, group and whether it stays in
    the loss (``valid``, [B]), and its turns (:class:`~agentrl_plugins.types.TurnOutcome`, aligned with
    ``turn_spans``, the token span of each turn in the response) and the response width T."""

    rewards: Tensor
    group_ids: Tensor
    valid: Tensor
    turns: Sequence[Sequence[TurnOutcome]]
    turn_spans: Sequence[Sequence[tuple[int, int]]]
    width: int


def turn_values_to_tokens(values: Sequence[Sequence[float]], credit: CreditInputs) -> Tensor:
    """Per-turn values as [B, T]: every token of a turn's span takes the turn's value, tokens outside a span 0."""
    tokens = credit.rewards.new_zeros(len(values), credit.width)
    for row, (row_values, spans) in enumerate(zip(values, credit.turn_spans, strict=True)):
        if len(row_values) != len(spans):
            raise ValueError(f"trajectory {row}: {len(row_values)} turn advantages for {len(spans)} turns")
        for value, (start, end) in zip(row_values, spans):
            tokens[row, start:end] = value
    return tokens


def discounted_returns(turns: Sequence[TurnOutcome], final_reward: float, gamma: float) -> list[float]:
    """Per turn, sum_k gamma^(k - t) r_k over the turns from t on, where r_k is the turn's own reward (0 when it
    has none) and the last turn also earns the trajectory's reward."""
    returns, future = [], 0.0
    for index in reversed(range(len(turns))):
        reward = (turns[index].reward or 0.0) + (final_reward if index == len(turns) - 1 else 0.0)
        future = reward + gamma * future
        returns.append(future)
    return returns[::-1]


SPREAD_RTOL = 1e-9
"""A group's episode returns whose standard deviation is at most this share of their size (the largest sum of
the absolute rewards one of them adds up) count as equal. Turn rewards summed in floating point do not cancel
exactly (potential shaping's terms telescope only in exact arithmetic: with Phi in {0, 1/3, 2/3, 1} equal
outcomes leave a spread near 1e-17), and dividing a turn's O(1) term by that spread would give 1e6 where the
group has no outcome to learn from."""


def episode_statistics(returns: Sequence[float], credit: CreditInputs,
                       masked_in_baseline: bool) -> tuple[Tensor, Tensor, Tensor]:
    """Per row (float64): its episode return minus its group's mean, the group's standard deviation (over n - 1),
    and whether it gets an advantage: kept, in a group of at least two, whose returns spread by more than
    :data:`SPREAD_RTOL` of the largest of their sizes (each episode's sum of the absolute rewards it adds up)."""
    values = credit.rewards.new_tensor(returns, dtype=torch.float64)
    sizes = [_size(turns, float(reward)) for turns, reward in zip(credit.turns, credit.rewards)]
    with torch.no_grad():
        centered, std, out = group_statistics(values, credit.group_ids, credit.valid, masked_in_baseline)
    inv = torch.unique(credit.group_ids, return_inverse=True)[1]
    size = values.new_zeros(values.numel()).scatter_reduce(0, inv, values.new_tensor(sizes), "amax")[inv]
    return centered, std, out & (std > SPREAD_RTOL * size)


def _size(turns: Sequence[TurnOutcome], final_reward: float) -> float:
    """The sum of the absolute rewards a return of ``turns`` adds up: the scale of its rounding error."""
    return sum(abs(turn.reward or 0.0) for turn in turns) + abs(final_reward)


def episode_returns(credit: CreditInputs) -> list[float]:
    """Per trajectory, the sum of every reward of the episode: its turns' own and the trajectory's (GiGPO's
    R(tau), undiscounted)."""
    return [sum(turn.reward or 0.0 for turn in turns) + float(reward)
            for turns, reward in zip(credit.turns, credit.rewards)]


def gigpo(credit: CreditInputs, *, masked_in_baseline: bool = True, gamma: float = 0.95, step_weight: float = 1.0,
          eps: float = 1e-6) -> list[list[float]]:
    """GiGPO (Feng et al. 2025): per turn, A = A_E + step_weight * A_S (the paper's omega).

    A_E is the paper's episode advantage: GRPO's normalisation, (R - mean) / (std + eps) with std over n - 1,
    of each episode's total reward R (:func:`episode_returns`: every turn reward and the trajectory's, as the
    paper sums them; without turn rewards R is the trajectory's reward and A_E is
    :func:`~agentrl_plugins.algorithms.advantages.grpo`'s), 0 in a group whose totals are equal
    (:data:`SPREAD_RTOL`). A_S normalises a turn's discounted return (:func:`discounted_returns`) within its step
    group: the turns of the same task group that acted from the same anchor state (equal ``state`` keys),
    (G - mean) / (std + eps) with std over n - 1; a turn alone in its step group, or with no state key, has
    A_S = 0. The paper's gamma is 0.95, its omega 1. ``masked_in_baseline`` decides, as for every estimator,
    whether filtered trajectories count in the statistics; they get advantage 0.
    """
    valid = credit.valid.to(torch.bool)
    member = torch.ones_like(valid) if masked_in_baseline else valid
    centered, std, spread = episode_statistics(episode_returns(credit), credit, masked_in_baseline)
    episode = torch.where(spread, centered / (std + eps), 0.0)
    returns = [discounted_returns(turns, float(reward), gamma) for turns, reward in zip(credit.turns, credit.rewards)]
    groups: dict[tuple[int, Hashable], list[tuple[int, int]]] = defaultdict(list)
    for row, turns in enumerate(credit.turns):
        if member[row]:
            for index, turn in enumerate(turns):
                if turn.state is not None:
                    groups[(int(credit.group_ids[row]), turn.state)].append((row, index))
    step: dict[tuple[int, int], float] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        values = torch.tensor([returns[row][index] for row, index in members], dtype=torch.float64)
        normalised = (values - values.mean()) / (values.std() + eps)
        step.update({member_turn: float(value) for member_turn, value in zip(members, normalised)})
    return [[float(episode[row]) + step_weight * step.get((row, index), 0.0) if valid[row] else 0.0
             for index in range(len(turns))] for row, turns in enumerate(credit.turns)]


def grpo_turns(credit: CreditInputs, *, masked_in_baseline: bool = True, gamma: float = 1.0,
               eps: float = 1e-6) -> list[list[float]]:
    """GRPO on each turn's return-to-go: A_t = (G_t - mean_g G_0) / (std_g G_0 + eps), with G_t the turn's
    discounted return (:func:`discounted_returns`: its own and later turns' rewards and the trajectory's) and
    the group statistics over the episodes' whole returns G_0, as :func:`~agentrl_plugins.algorithms.
    advantages.grpo` takes them. Without turn rewards and with gamma 1, every G_t is the trajectory's
    reward and this is ``grpo`` exactly. With potential shaping G_t loses Phi(s_t): a baseline on the state
    each turn acted from. Filtered trajectories get 0, and so do the turns of a group whose whole returns are
    equal (as ``grpo`` gives such a group's trajectories 0: no outcome to learn from), rounding included: a
    spread within :data:`SPREAD_RTOL` of the returns' size is none."""
    returns = [discounted_returns(turns, float(reward), gamma) for turns, reward in zip(credit.turns, credit.rewards)]
    whole = [row[0] if row else float(reward) for row, reward in zip(returns, credit.rewards)]
    centered, std, spread = episode_statistics(whole, credit, masked_in_baseline)
    return [[(float(centered[row]) + (value - whole[row])) / (float(std[row]) + eps) if spread[row] else 0.0
             for value in row_returns] for row, row_returns in enumerate(returns)]
