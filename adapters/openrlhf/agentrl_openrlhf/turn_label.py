"""Each episode's turns from the agent executor to the advantage step, inside the one per-sample field OpenRLHF
moves untouched: its label.

OpenRLHF keeps only known keys of an executor's output, and its ``extra_logs`` must be single numbers; the
``label`` is carried as given into every ``Experience.labels``. A :class:`TurnLabel` is the task id (so it
compares, hashes and prints as the label OpenRLHF knows) with the episode's
:class:`~agentrl_plugins.algorithms.credit.TurnRecord` attached, its spans in the coordinates of OpenRLHF's
``action_mask`` (the sequence shifted by one token).
"""

from __future__ import annotations

from typing import Any, Sequence

from agentrl_plugins.algorithms.credit import TurnRecord
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.types import Trajectory


class TurnLabel(str):
    """A task id carrying its episode's turn record."""

    turns: TurnRecord

    def __new__(cls, task_id: str, turns: TurnRecord) -> TurnLabel:
        label = super().__new__(cls, task_id)
        label.turns = turns
        return label

    def __reduce__(self) -> tuple[Any, ...]:
        return TurnLabel, (str(self), self.turns)


def turn_label(label: Any, trajectory: Trajectory) -> TurnLabel:
    """``label`` with ``trajectory``'s turns, spans moved to ``action_mask`` positions (token index - 1)."""
    return TurnLabel(str(label), TurnRecord.of(trajectory, offset=len(trajectory.prompt_ids) - 1))


def labelled_turns(labels: Sequence[Any], estimator: str) -> list[TurnRecord]:
    """The turn records of every sample's label, or an error naming what is missing."""
    missing = sum(not isinstance(label, TurnLabel) for label in labels)
    if missing:
        raise AgentRLError(f"advantage.estimator = {estimator!r} needs each episode's turns, and {missing} of "
                           f"{len(labels)} samples carry none: they were not played by agentrl's agent executor")
    return [label.turns for label in labels]
