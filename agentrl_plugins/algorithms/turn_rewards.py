"""Per-turn rewards computed from an episode's turns: none, and potential-based shaping."""

from __future__ import annotations

from typing import Mapping, Sequence

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.types import TurnOutcome


class MissingSignalError(AgentRLError):
    """A turn reward needs a signal the environment did not emit."""


def no_turn_reward(turns: Sequence[TurnOutcome], initial_signals: Mapping[str, float]) -> list[float | None]:
    """No reward of its own: each turn keeps the environment's."""
    return [None] * len(turns)


def potential(turns: Sequence[TurnOutcome], initial_signals: Mapping[str, float], *, gamma: float,
              signal: str) -> list[float | None]:
    """Potential-based shaping (Ng, Harada and Russell 1999): turn t earns gamma * Phi(s_t+1) - Phi(s_t), with
    Phi the state's ``signal`` (the start state's from ``initial_signals``, each later one from the turn that
    led to it). The state the episode ends in is absorbing with potential 0 (Grzes 2017), so the last turn
    earns -Phi(s_T-1) and the shaping from turn t on sums to -Phi(s_t): it acts as a baseline on the state and
    leaves the optimal policy unchanged. ``gamma`` is the discount of the returns the estimator uses."""
    def phi(signals: Mapping[str, float], where: str) -> float:
        if signal not in signals:
            raise MissingSignalError(f"turn reward 'potential' needs the {signal!r} signal of {where}, and the "
                                     f"environment gave {sorted(signals) or 'none'}")
        return float(signals[signal])

    if not turns:
        return []
    potentials = [phi(initial_signals, "the start state (the session's initial_signals)")]
    potentials += [phi(turn.signals, f"the state after turn {index}") for index, turn in enumerate(turns[:-1])]
    return [(gamma * potentials[index + 1] if index + 1 < len(turns) else 0.0) - potentials[index]
            for index in range(len(turns))]
