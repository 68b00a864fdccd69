"""The data that crosses every boundary: tasks, trajectories, verdicts, limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping

TERMINATION_REASONS: tuple[str, ...] = ("submitted", "max_turns", "max_context", "timeout", "error")


@dataclass(frozen=True)
class Task:
    """One problem an environment can pose."""

    id: str
    family: str
    split: str
    issue: str
    initial_state: Any = None


@dataclass(frozen=True)
class TestDetail:
    """The outcome of one test the verifier ran."""

    name: str
    passed: bool
    hidden: bool
    detail: str = ""


@dataclass(frozen=True)
class Verdict:
    """A verifier's judgement of a finished episode."""

    reward: float
    passed: bool
    tests: tuple[TestDetail, ...] = ()
    flags: dict[str, bool] = field(default_factory=dict)
    verifier: str = ""

    @property
    def hacked(self) -> bool:
        """Submitted, passes every public test, fails a hidden one."""
        return bool(self.flags.get("hacked", False))


@dataclass(frozen=True)
class Sampling:
    """Sampling settings handed to ``generate``."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_new_tokens: int = 64


@dataclass(frozen=True)
class Generation:
    """What ``generate`` returns: the new tokens, their sampler log-probs, why it stopped."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str = "stop"


@dataclass(frozen=True)
class Limits:
    """Budgets that end an episode with a named termination reason."""

    max_turns: int = 6
    max_context_tokens: int = 2048
    max_new_tokens_per_turn: int = 64
    timeout_s: float = 600.0


REDUNDANT_SIGNAL = "redundant"
"""The turn signal (1.0 or 0.0) an environment sets on an action that changed nothing and showed nothing new (a
repeated read, an edit that leaves the source as it was); runs count them per successful episode."""


@dataclass(frozen=True)
class TurnOutcome:
    """What one policy turn led to, for turn-level credit: the key of the state the policy acted from
    (``state``) and of the state its action led to (``next_state``; None when the episode ended before the
    environment answered), the turn's reward (the environment's own plus the recipe's turn reward, None when
    neither gives one), and named measurements of the turn and the state it led to (``signals``, e.g. the
    share of public tests passing, or :data:`REDUNDANT_SIGNAL`). Keys are hashable and equal for equal
    states; frameworks whose rollouts run in other processes move them by pickling."""

    state: Hashable | None = None
    next_state: Hashable | None = None
    reward: float | None = None
    signals: Mapping[str, float] = field(default_factory=dict)


@dataclass
class Trajectory:
    """One episode, token-exact: what the sampler produced is what the trainer sees."""

    task_id: str
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    logprobs: list[float]
    turn_spans: list[tuple[int, int]]
    termination: str
    reward: float = 0.0
    verdict: Verdict | None = None
    group_id: int = 0
    policy_version: int = 0
    family: str = ""
    split: str = ""
    messages: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    turns: list[TurnOutcome] = field(default_factory=list)
    """One entry per policy turn, aligned with ``turn_spans``."""
    initial_signals: Mapping[str, float] = field(default_factory=dict)
    """The signals of the state the episode started from (the session's ``initial_signals``)."""
    teacher_logprobs: list[float] = field(default_factory=list)
    """The distillation teacher's log-prob of each response token in its context (empty without a teacher)."""
    teacher_seconds: float = 0.0
    """Its share of the teacher's forward that scored it (wall time over the sequences batched with it)."""
    token_advantages: list[float] = field(default_factory=list)
    """Per response token, a term the core adds to the estimator's advantage (distillation's
    :func:`~agentrl_plugins.algorithms.distillation.reverse_kl_signal`; 0 off the policy's tokens); empty: none."""
    segments: list[Trajectory] = field(default_factory=list)
    """An agent program's later segments: where its conversation stopped extending the tokens sampled before
    (an edited or summarised history), the episode goes on in a new sequence, each trained on the tokens its
    sampler saw. Empty for every built-in episode."""

    @property
    def token_ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    @property
    def num_turns(self) -> int:
        return len(self.turn_spans)

    @property
    def policy_tokens(self) -> int:
        return sum(self.response_mask)
