"""Held-out evaluation: pass@1 and hacked fraction over a split, through the same episode runner."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from agentrl_plugins.environment import EnvironmentSuite, VerifierFn
from agentrl_plugins.episode import Generate, run_episodes
from agentrl_plugins.types import Limits, Sampling, Task, Trajectory, Verdict


def honest_pass(verdict: Verdict | None) -> bool:
    """A pass that counts for pass@1: passed and not flagged ``hacked`` (whatever verifier the run trains on)."""
    return verdict is not None and verdict.passed and not verdict.hacked


@dataclass(frozen=True)
class Evaluation:
    """Mean honest success over every episode, the hacked fraction, and pass@1 per family.

    A verdict flagged ``hacked`` never counts as a pass, so pass@1 means the same under a verifier the
    policy can game (``public_tests``) as under the ground truth."""

    pass_at_1: float
    hacked_fraction: float
    per_family: dict[str, float]
    episodes: int


def summarize(trajectories: Sequence[Trajectory]) -> Evaluation:
    by_family: dict[str, list[float]] = defaultdict(list)
    for trajectory in trajectories:
        by_family[trajectory.family].append(float(honest_pass(trajectory.verdict)))
    passed = [value for values in by_family.values() for value in values]
    hacked = [float(bool(t.verdict and t.verdict.hacked)) for t in trajectories]
    return Evaluation(
        pass_at_1=sum(passed) / max(len(passed), 1),
        hacked_fraction=sum(hacked) / max(len(hacked), 1),
        per_family={family: sum(v) / len(v) for family, v in sorted(by_family.items())},
        episodes=len(trajectories),
    )


async def evaluate(
    env: EnvironmentSuite,
    tasks: Sequence[Task],
    generate: Generate,
    tokenizer: Any,
    limits: Limits,
    *,
    verifier: VerifierFn,
    episodes_per_task: int,
    sampling: Sampling,
) -> Evaluation:
    """Run ``episodes_per_task`` sampled episodes of every task; success is the verdict's ``passed``."""
    trajectories = await run_episodes(env, tasks, generate, tokenizer, limits, group_size=episodes_per_task,
                                      verifier=verifier, sampling=sampling)
    return summarize(trajectories)
