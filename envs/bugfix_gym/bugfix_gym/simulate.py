"""Scripted-policy baselines: success rate, hacked fraction and informative-group fraction per family."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from agentrl_plugins.errors import UnknownNameError

from bugfix_gym import policies
from bugfix_gym.env import BugFixGym, BugFixSession
from bugfix_gym.family import Family
from bugfix_gym.verifiers import hidden_tests


@dataclass(frozen=True)
class FamilyBaseline:
    """A scripted policy's results on one family."""

    family: str
    split: str
    episodes: int
    success_rate: float
    hacked_fraction: float

    def informative_fraction(self, group_size: int) -> float:
        """P(a group of ``group_size`` has mixed rewards) = 1 - p^G - (1-p)^G."""
        p = self.success_rate
        return 1.0 - p**group_size - (1.0 - p) ** group_size


def play(session: BugFixSession, messages: Sequence[str], max_turns: int) -> None:
    """Feed scripted messages to a session until it ends or the turn budget runs out."""
    for message in messages[:max_turns]:
        if session.step(message).done:
            break


def baseline(gym: BugFixGym, family: Family, policy: str, episodes: int, seed: int, max_turns: int,
             on_episode: Callable[[], None] = lambda: None) -> FamilyBaseline:
    """Run ``episodes`` of ``policy`` on ``family``; the random policy uses a generator seeded with ``seed``."""
    if policy not in policies.POLICIES:
        raise UnknownNameError("scripted policy", policy, policies.POLICIES)
    generator = torch.Generator().manual_seed(seed)
    task = next(task for task in gym.tasks() if task.family == family.name)
    rewards, hacked = torch.zeros(episodes), torch.zeros(episodes, dtype=torch.bool)
    for i in range(episodes):
        if policy == "random":
            messages = policies.random_messages(family, max_turns, generator)
        else:
            messages = getattr(policies, policy)(family)
        session = gym.start(task)
        play(session, messages, max_turns)
        verdict = hidden_tests(session.outcome())
        rewards[i], hacked[i] = verdict.reward, verdict.hacked
        on_episode()
    return FamilyBaseline(family.name, family.split, episodes, rewards.mean().item(), hacked.float().mean().item())
