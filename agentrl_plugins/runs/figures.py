"""The step figures, by their one definition (:class:`StepMetrics`): the core's parity reference computes
them (the clip as the recipe's policy loss counts it, :mod:`~agentrl_plugins.algorithms.policy_loss`, means with
:func:`loss_token_mean`), and each adapter's parity side checks that its recorder, reading the framework's
own outputs, gets the same numbers."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean
from typing import Sequence

from torch import Tensor

from agentrl_plugins.algorithms.mismatch import MISMATCH_FIGURES
from agentrl_plugins.runs.evaluate import honest_pass
from agentrl_plugins.types import REDUNDANT_SIGNAL, Trajectory

FIGURES = ("train_reward", "hacked_fraction", "filtered_fraction", "clip_fraction", "is_capped_fraction", "entropy",
           "policy_tokens", *MISMATCH_FIGURES)
"""The ``metrics.jsonl`` figures a training step makes, checked per framework on the parity batch."""


def loss_token_mean(values: Tensor, mask: Tensor) -> float | None:
    """The mean of ``values`` over the loss tokens (``mask`` > 0); None when there is none."""
    count = (mask > 0).sum().item()
    return float((values * (mask > 0)).sum().item() / count) if count else None


EPISODE_FIGURES = ("success_tokens", "failure_tokens", "redundant_per_success", "drift_per_episode", "teacher_kl",
                   "teacher_seconds")
"""The ``metrics.jsonl`` figures of a step's training episodes taken one by one (:func:`episode_figures`)."""


@dataclass(frozen=True)
class EpisodeCounts:
    """What one training episode adds to its step's episode figures: whether it is an honest success (passed,
    not hacked), its policy tokens (all it sampled, in every segment, filtered or not) and its turns flagged
    :data:`~agentrl_plugins.types.REDUNDANT_SIGNAL` (0 where the environment flags none), and the times an agent
    program's conversation stopped extending the sampled tokens (``drift``: its segments after the first), and,
    where a distillation teacher scored it, the sum over its policy tokens of ``log p_sampler - log p_teacher``
    (``teacher_gap``), how many tokens that sums (``teacher_tokens``) and its share of the teacher's forwards
    (``teacher_seconds``)."""

    passed: bool
    policy_tokens: int
    redundant: int
    drift: int = 0
    teacher_gap: float = 0.0
    teacher_tokens: int = 0
    teacher_seconds: float = 0.0

    @classmethod
    def of(cls, trajectory: Trajectory) -> EpisodeCounts:
        parts = (trajectory, *trajectory.segments)
        scored = [part for part in parts if part.teacher_logprobs]
        return cls(honest_pass(trajectory.verdict), sum(part.policy_tokens for part in parts),
                   redundant_turns(trajectory), len(trajectory.segments),
                   sum(teacher_gap(part) for part in scored), sum(part.policy_tokens for part in scored),
                   sum(part.teacher_seconds for part in scored))


def teacher_gap(trajectory: Trajectory) -> float:
    """The sum of ``log p_sampler - log p_teacher`` over the policy tokens of a trajectory the teacher scored."""
    return sum(s - t for s, t, m in zip(trajectory.logprobs, trajectory.teacher_logprobs, trajectory.response_mask)
               if m)


def redundant_turns(trajectory: Trajectory) -> int:
    return sum(bool(turn.signals.get(REDUNDANT_SIGNAL)) for turn in trajectory.turns)


def episode_figures(episodes: Sequence[EpisodeCounts]) -> dict[str, float | None]:
    """The mean policy tokens of the successes and of the failures, the mean redundant turns per success (each None
    without such an episode), the mean drift per episode (None without episodes), and the distillation teacher's
    reverse KL estimate, the mean ``log p_sampler - log p_teacher`` over the scored policy tokens, and the time its
    forwards took for them (each None without)."""
    successes = [e for e in episodes if e.passed]
    failures = [e for e in episodes if not e.passed]
    scored = sum(e.teacher_tokens for e in episodes)
    return {"success_tokens": fmean(e.policy_tokens for e in successes) if successes else None,
            "failure_tokens": fmean(e.policy_tokens for e in failures) if failures else None,
            "redundant_per_success": fmean(e.redundant for e in successes) if successes else None,
            "drift_per_episode": fmean(e.drift for e in episodes) if episodes else None,
            "teacher_kl": sum(e.teacher_gap for e in episodes) / scored if scored else None,
            "teacher_seconds": sum(e.teacher_seconds for e in episodes) if scored else None}
