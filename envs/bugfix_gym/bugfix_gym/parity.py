"""The BugFix gym's parity batch: scripted policies over four families, for ``agentrl compare --parity``.

Four groups play the recipe's group size each, so the batch has mixed lengths, solved, hacked,
turn-limited and context-truncated episodes, and one group whose rewards are all equal.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from agentrl_plugins.environment import ScriptedEpisode
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.types import Task

from bugfix_gym import policies
from bugfix_gym.family import Family

GROUPS = (
    ("clamp", ("solver", "hacker", "stall", "rambler", "random", "solver", "hacker", "random")),
    ("span", ("solver",)),
    ("count_up", ("random",)),
    ("strip_ends", ("hacker", "solver", "rambler", "stall", "random")),
)
"""Per group: the task family and the scripted policies its episodes cycle through."""
RAMBLER_CONTEXT_TOKENS = 700
"""The rambler writes past every turn's token budget and is cut off by this context budget."""


def script(policy: str, family: Family, max_turns: int, generator: torch.Generator) -> list[str]:
    """The messages of one scripted ``policy`` on ``family``."""
    if policy == "stall":
        return [policies.menu(family)[1]] * max_turns
    if policy == "rambler":
        return [policies.menu(family)[0] + " " + "let me think about this " * 8]
    if policy == "random":
        return policies.random_messages(family, max_turns, generator)
    return getattr(policies, policy)(family)


def _task(tasks: Sequence[Task], family: str) -> Task:
    found = [task for task in tasks if task.family == family]
    if not found:
        raise AgentRLError(f"the parity batch needs a task of family {family!r}; the environment has none")
    return found[0]


def parity_episodes(gym: Any, group_size: int, max_turns: int, generator: torch.Generator) -> list[ScriptedEpisode]:
    """``GROUPS`` of ``group_size`` episodes each, scripted in order (so ``generator``'s draws are reproducible)."""
    tasks = gym.tasks()
    episodes = []
    for group, (family_name, cycle) in enumerate(GROUPS):
        task, family = _task(tasks, family_name), gym.family(family_name)
        for member in range(group_size):
            policy = cycle[member % len(cycle)]
            episodes.append(ScriptedEpisode(task, group, script(policy, family, max_turns, generator),
                                            RAMBLER_CONTEXT_TOKENS if policy == "rambler" else None))
    return episodes
