"""The one episode loop every framework drives: token-in, token-out.

An adapter supplies only ``generate(token_ids, sampling) -> Generation``. The
history is never re-tokenized: policy tokens are appended as sampled (mask 1,
with their sampler log-probs), observation tokens once (mask 0, log-prob 0).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from agentrl_plugins.chat import ChatCodec
from agentrl_plugins.environment import EnvironmentSuite, VerifierFn
from agentrl_plugins.types import Generation, Limits, Sampling, Task, Trajectory, TurnOutcome

if TYPE_CHECKING:
    from agentrl_plugins.turn_rewards import TurnRewardFn

Generate = Callable[[list[int], Sampling], Awaitable[Generation]]


class _Episode:
    """Mutable token buffers of one running episode."""

    def __init__(self, prompt_ids: list[int]):
        self.prompt_ids = prompt_ids
        self.response_ids: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.turn_spans: list[tuple[int, int]] = []

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)

    def token_ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    def add_policy(self, generation: Generation) -> None:
        if len(generation.logprobs) != len(generation.token_ids):
            raise ValueError(
                f"generate returned {len(generation.token_ids)} tokens but {len(generation.logprobs)} log-probs"
            )
        start = len(self.response_ids)
        self.response_ids += generation.token_ids
        self.mask += [1] * len(generation.token_ids)
        self.logprobs += [float(x) for x in generation.logprobs]
        self.turn_spans.append((start, len(self.response_ids)))

    def add_observation(self, ids: list[int]) -> None:
        self.response_ids += ids
        self.mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)


async def run_episode(
    env: EnvironmentSuite,
    task: Task,
    generate: Generate,
    tokenizer: Any,
    limits: Limits,
    *,
    verifier: VerifierFn,
    sampling: Sampling = Sampling(),
    group_id: int = 0,
    policy_version: int = 0,
    codec: ChatCodec | None = None,
    hooks: Any = None,
    turn_reward: TurnRewardFn | None = None,
) -> Trajectory:
    """Play one episode of ``task`` and return its token-exact trajectory, judged by ``verifier``.

    ``turn_reward`` (the recipe's, :class:`~agentrl_plugins.turn_rewards.TurnRewardFn`) adds its per-turn
    rewards to the environment's own. ``hooks`` is a plugin manager's ``hook`` relay; when given,
    ``agentrl_episode_end`` fires.
    """
    started = time.monotonic()
    codec = codec or ChatCodec(tokenizer, env.system_prompt)
    session = env.start(task)
    episode = _Episode(codec.prompt_ids(session.prompt))
    messages = [{"role": "user", "content": session.prompt}]
    eos = getattr(tokenizer, "eos_token_id", None)
    termination = "max_turns"
    turns: list[TurnOutcome] = []
    state = getattr(session, "initial_state", None)
    initial_signals = dict(getattr(session, "initial_signals", None) or {})
    try:
        for _ in range(limits.max_turns):
            room = limits.max_context_tokens - episode.length
            remaining = limits.timeout_s - (time.monotonic() - started)
            if room <= 0:
                termination = "max_context"
                if not turns:  # a prompt that leaves no room is neither sampled nor kept (the gateway refuses it)
                    episode.prompt_ids = []
                break
            if remaining <= 0:
                termination = "timeout"
                break
            turn_sampling = Sampling(sampling.temperature, sampling.top_p, sampling.top_k,
                                     min(limits.max_new_tokens_per_turn, room))
            try:
                generation = await asyncio.wait_for(generate(episode.token_ids(), turn_sampling), remaining)
            except TimeoutError:
                termination = "timeout"
                break
            episode.add_policy(generation)
            turns.append(TurnOutcome(state))
            text = tokenizer.decode(generation.token_ids, skip_special_tokens=True)
            messages.append({"role": "assistant", "content": text})
            if generation.finish_reason == "length" and episode.length >= limits.max_context_tokens:
                termination = "max_context"
                break
            result = await asyncio.to_thread(session.step, text)
            turns[-1] = TurnOutcome(state, result.state, result.reward, dict(result.signals))
            state = result.state
            messages.append({"role": "tool", "content": result.observation})
            if result.done:
                termination = "submitted"
                break
            ended_with_eos = bool(generation.token_ids) and generation.token_ids[-1] == eos
            observation = codec.observation_ids(result.observation, ended_with_eos)
            if episode.length + len(observation) > limits.max_context_tokens:
                termination = "max_context"
                break
            episode.add_observation(observation)
            if time.monotonic() - started > limits.timeout_s:
                termination = "timeout"
                break
        verdict = await asyncio.to_thread(verifier, session.outcome())
    except Exception as error:
        termination = "error"
        messages.append({"role": "error", "content": repr(error)})
        verdict = None
    finally:
        session.close()
    if turn_reward is not None:
        turns = turn_reward(turns, initial_signals)
    trajectory = Trajectory(
        task_id=task.id,
        prompt_ids=episode.prompt_ids,
        response_ids=episode.response_ids,
        response_mask=episode.mask,
        logprobs=episode.logprobs,
        turn_spans=episode.turn_spans,
        termination=termination,
        reward=verdict.reward if verdict is not None else 0.0,
        verdict=verdict,
        group_id=group_id,
        policy_version=policy_version,
        family=task.family,
        split=task.split,
        messages=messages,
        seconds=time.monotonic() - started,
        turns=turns,
        initial_signals=initial_signals,
    )
    if hooks is not None:
        hooks.agentrl_episode_end(trajectory=trajectory)
    return trajectory


async def run_episodes(
    env: EnvironmentSuite,
    tasks: Sequence[Task],
    generate: Generate,
    tokenizer: Any,
    limits: Limits,
    *,
    group_size: int = 1,
    **options: Any,
) -> list[Trajectory]:
    """Run ``group_size`` episodes of each task concurrently; group ids follow task order."""
    codec = options.pop("codec", None) or ChatCodec(tokenizer, env.system_prompt)
    jobs = [
        run_episode(env, task, generate, tokenizer, limits, group_id=index, codec=codec, **options)
        for index, task in enumerate(tasks)
        for _ in range(group_size)
    ]
    return list(await asyncio.gather(*jobs))
