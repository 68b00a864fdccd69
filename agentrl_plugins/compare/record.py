"""Recording the parity batch: the environment's scripted episodes, then seeded log-probs.

The recipe's environment scripts the episodes (:class:`~agentrl_plugins.environment.ParityScripts`:
groups of the recipe's group size with mixed lengths, solved, hacked, turn-limited and
context-truncated episodes, and one group whose rewards are all equal); they play through the core
episode runner with the recipe's verifier and turn reward under fixed small limits (``LIMITS``). A scripted policy
has no model, so the log-probs are drawn from a generator seeded with ``seed``: the sampler's, the
learner's before the update (the sampler's plus an injected mismatch: a per-row shift and per-token
noise) and the learner's during the update (old plus drift, with a few large steps so that every
clip, including the dual clip, binds somewhere); the learner's per-token entropies are drawn
uniformly from [0, ``ENTROPY_SCALE``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Hashable

import torch

from agentrl_plugins.batch import TrajectoryBatch
from agentrl_plugins.compare.batch import ParityBatch
from agentrl_plugins.environment import build_environment, close_environment
from agentrl_plugins.episode import run_episode
from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.recipe_schema import Recipe
from agentrl_plugins.scripted import ByteChatTokenizer, ScriptedGenerate
from agentrl_plugins.turn_rewards import build_turn_reward
from agentrl_plugins.types import Limits, Trajectory, TurnOutcome
from agentrl_plugins.verifiers import build_verifier

if TYPE_CHECKING:
    from agentrl_plugins.plugins import PluginManager

LIMITS = Limits(max_turns=6, max_context_tokens=2048, max_new_tokens_per_turn=48, timeout_s=300.0)
MISMATCH_SHIFT = 0.6
MISMATCH_NOISE = 0.2
DRIFT_NOISE = 0.35
DRIFT_JUMP, JUMP_SHARE = 1.5, 0.05
ENTROPY_SCALE = 3.0
TEACHER_NOISE = 0.8
"""The recorded teacher's log-probs: the sampler's, each token moved by this times a standard normal (capped at 0)."""


def record_episodes(recipe: Recipe, seed: int, plugin_manager: PluginManager | None = None) -> list[Trajectory]:
    """Play the environment's scripted parity episodes (groups of ``recipe.rollout.group_size``)."""
    if plugin_manager is None:
        from agentrl_plugins.plugins import get_plugin_manager

        plugin_manager = get_plugin_manager()
    size = recipe.rollout.group_size
    if size < 2:
        raise AgentRLError(f"parity needs groups of at least 2 episodes; rollout.group_size is {size}")
    env = build_environment(recipe.environment, plugin_manager)
    if not hasattr(env, "parity_episodes"):
        close_environment(env)
        raise AgentRLError(f"environment {recipe.environment.name!r} scripts no parity batch (it has no "
                           "parity_episodes method, agentrl_plugins.environment.ParityScripts); set "
                           "environment.name to one that does, such as bugfix")
    verifier = build_verifier(recipe.verifier.names, recipe.verifier.combine, plugin_manager)
    turn_reward = build_turn_reward(recipe, plugin_manager)
    tokenizer = ByteChatTokenizer()
    scripted = env.parity_episodes(size, LIMITS.max_turns, torch.Generator().manual_seed(seed))

    async def play() -> list[Trajectory]:
        episodes = []
        for episode in scripted:
            limits = LIMITS if episode.max_context_tokens is None else dataclasses.replace(
                LIMITS, max_context_tokens=episode.max_context_tokens)
            episodes.append(run_episode(env, episode.task, ScriptedGenerate(episode.messages, tokenizer), tokenizer,
                                        limits, verifier=verifier, group_id=episode.group,
                                        turn_reward=turn_reward))
        return list(await asyncio.gather(*episodes))

    try:
        return asyncio.run(play())
    finally:
        close_environment(env)


def record_batch(recipe: Recipe, seed: int, plugin_manager: PluginManager | None = None) -> ParityBatch:
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
    entropies = torch.rand(rows, width, generator=generator, dtype=torch.float64) * ENTROPY_SCALE
    teacher = (sampler + draw(rows, width) * TEACHER_NOISE).clamp(max=0.0)
    return ParityBatch(seed=seed, rewards=recorded.rewards, group_ids=recorded.group_ids,
                       terminations=recorded.terminations, hacked=recorded.hacked, response_mask=mask,
                       sampler_logprobs=sampler * mask, old_logprobs=old * mask, logprobs=current * mask,
                       entropies=entropies * mask, turns=numbered_states(recorded.turns),
                       turn_spans=recorded.turn_spans, teacher_logprobs=teacher * mask)


def numbered_states(turns: tuple[tuple[TurnOutcome, ...], ...]) -> tuple[tuple[TurnOutcome, ...], ...]:
    """The turns with each distinct anchor state replaced by its number in order of first appearance (what the
    parity file carries: equal states stay equal), their next states dropped, their own rewards kept."""
    numbers: dict[Hashable, int] = {}
    return tuple(tuple(TurnOutcome(None if t.state is None else numbers.setdefault(t.state, len(numbers)),
                                   reward=t.reward) for t in row) for row in turns)
