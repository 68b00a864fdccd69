"""Held-out evaluation: pass@1 and hacked fraction over a split, through the same episode runner."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from agentrl_plugins.environment import EnvironmentSuite, VerifierFn
from agentrl_plugins.episode import Generate, run_episodes
from agentrl_plugins.types import Limits, Sampling, Task, Trajectory


@dataclass(frozen=True)
class Evaluation:
    """Mean success over every episode, the hacked fraction, and pass@1 per family."""

    pass_at_1: float
    hacked_fraction: float
    per_family: dict[str, float]
    episodes: int


def summarize(trajectories: Sequence[Trajectory]) -> Evaluation:
    by_family: dict[str, list[float]] = defaultdict(list)
    for trajectory in trajectories:
        by_family[trajectory.family].append(float(trajectory.verdict is not None and trajectory.verdict.passed))
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
