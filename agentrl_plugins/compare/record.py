"""Recording the parity batch: real BugFix gym episodes of scripted policies, then seeded log-probs.

Four groups of the recipe's group size play through the core episode runner with the
recipe's environment and verifier, under fixed small limits (``LIMITS``), so the batch has
mixed lengths, solved, hacked, turn-limited and context-truncated episodes, and one group
whose rewards are all equal. A scripted policy has no model, so the log-probs are drawn from
a generator seeded with ``seed``: the sampler's, the learner's before the update (the sampler's
plus an injected mismatch: a per-row shift and per-token noise) and the learner's during the
update (old plus drift, with a few large steps so that every clip, including the dual clip,
binds somewhere).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Sequence

import torch

from agentrl_plugins.batch import TrajectoryBatch
from agentrl_plugins.compare.batch import ParityBatch
from agentrl_plugins.environment import build_environment
from agentrl_plugins.episode import run_episode
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.testing import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.types import Limits, Task, Trajectory
from agentrl_plugins.verifiers import build_verifier

LIMITS = Limits(max_turns=6, max_context_tokens=2048, max_new_tokens_per_turn=48, timeout_s=300.0)
RAMBLER_LIMITS = dataclasses.replace(LIMITS, max_context_tokens=700)
"""The rambler writes past every turn's token budget and is cut off by this context budget."""
GROUPS = (
    ("clamp", ("solver", "hacker", "stall", "rambler", "random", "solver", "hacker", "random")),
    ("span", ("solver",)),
    ("count_up", ("random",)),
    ("strip_ends", ("hacker", "solver", "rambler", "stall", "random")),
)
"""Per group: the task family and the scripted policies its episodes cycle through."""
MISMATCH_SHIFT = 0.6
MISMATCH_NOISE = 0.2
DRIFT_NOISE = 0.35
DRIFT_JUMP, JUMP_SHARE = 1.5, 0.05


def _script(policy: str, family: Any, generator: torch.Generator) -> list[str]:
    from bugfix_gym import policies

    if policy == "stall":
        return [policies.menu(family)[1]] * LIMITS.max_turns
    if policy == "rambler":
        return [policies.menu(family)[0] + " " + "let me think about this " * 8]
    if policy == "random":
        return policies.random_messages(family, LIMITS.max_turns, generator)
    return getattr(policies, policy)(family)


def _task(tasks: Sequence[Task], family: str) -> Task:
    found = [task for task in tasks if task.family == family]
    if not found:
        raise AgentRLError(f"the parity batch needs a task of family {family!r}; the environment has none")
    return found[0]


def record_episodes(recipe: Recipe, seed: int, plugin_manager: Any = None) -> list[Trajectory]:
    """Play ``GROUPS`` (each of ``recipe.rollout.group_size`` episodes) in the recipe's environment."""
    if plugin_manager is None:
        from agentrl_plugins.plugins import get_plugin_manager

        plugin_manager = get_plugin_manager()
    size = recipe.rollout.group_size
    if size < 2:
        raise AgentRLError(f"parity needs groups of at least 2 episodes; rollout.group_size is {size}")
    env = build_environment(recipe.environment, plugin_manager)
    if not hasattr(env, "family"):
        env.close()
        raise AgentRLError(f"the parity batch is recorded in the BugFix gym's families; environment "
                           f"{recipe.environment.name!r} has none (set environment.name=bugfix)")
    verifier = build_verifier(recipe.verifier.names, recipe.verifier.combine, plugin_manager)
    tokenizer, generator = ByteChatTokenizer(), torch.Generator().manual_seed(seed)
    tasks = env.tasks()
    families = {task.family: env.family(task.family) for task in tasks}

    async def play() -> list[Trajectory]:
        episodes = []
        for group, (family, cycle) in enumerate(GROUPS):
            task = _task(tasks, family)
            for member in range(size):
                policy = cycle[member % len(cycle)]
                generate = ScriptedGenerate(_script(policy, families[family], generator), tokenizer)
                limits = RAMBLER_LIMITS if policy == "rambler" else LIMITS
                episodes.append(run_episode(env, task, generate, tokenizer, limits, verifier=verifier,
                                            group_id=group))
        return list(await asyncio.gather(*episodes))

    try:
        return asyncio.run(play())
    finally:
        env.close()


def record_batch(recipe: Recipe, seed: int, plugin_manager: Any = None) -> ParityBatch:
    """The parity batch: recorded episodes with seeded sampler and learner log-probs (float64)."""
    recorded = TrajectoryBatch.from_trajectories(record_episodes(recipe, seed, plugin_manager), torch.float64)
    generator = torch.Generator().manual_seed(seed)
    mask = recorded.response_mask
    rows, width = mask.shape

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    sampler = -(torch.rand(rows, width, generator=generator, dtype=torch.float64) * 2.5 + 0.01)
    shift = (torch.rand(rows, 1, generator=generator, dtype=torch.float64) * 2 - 1) * MISMATCH_SHIFT
    old = sampler + shift + draw(rows, width) * MISMATCH_NOISE
    jumps = torch.rand(rows, width, generator=generator, dtype=torch.float64) < JUMP_SHARE
    current = old + draw(rows, width) * DRIFT_NOISE + jumps * DRIFT_JUMP
    return ParityBatch(seed=seed, rewards=recorded.rewards, group_ids=recorded.group_ids,
                       terminations=recorded.terminations, hacked=recorded.hacked, response_mask=mask,
                       sampler_logprobs=sampler * mask, old_logprobs=old * mask, logprobs=current * mask)
