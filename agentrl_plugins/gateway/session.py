"""One episode behind the gateway: its sampler, limits and recorder, and the order in which limits end it.

The checks follow the episode runner's (:func:`agentrl_plugins.episode.run_episode`) one for one, so that an agent
program that plays the runner's loop yields the runner's trajectory: new messages that would overflow the context
end the episode as ``max_context``; a call after ``max_turns`` replies ends it as ``max_turns``; no room left or no
time left ends it before sampling; a reply that fills the context ends it after sampling. A prompt refused for its
length is never recorded: an episode whose first prompt is too long has no tokens (as the runner keeps none).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from agentrl_plugins.episode import Generate
from agentrl_plugins.gateway.recorder import Continuation, EpisodeRecorder
from agentrl_plugins.gateway.token_bound import least_tokens
from agentrl_plugins.gateway.tool_calls import parse_tool_calls
from agentrl_plugins.types import Generation, Limits, Sampling

INLINE_TEXT_CHARS = 1024
"""Text up to this long is tokenized on the event loop (well under a millisecond; a thread hop costs more)."""


class SessionBusy(Exception):
    """The episode already has a call in flight (an episode's calls are sequential)."""


class EpisodeOver(Exception):
    """The call cannot be served: the episode has ended (``termination``), now or before."""

    def __init__(self, termination: str, message: str):
        super().__init__(message)
        self.termination = termination


@dataclass(frozen=True)
class Reply:
    """A served call: the sampled generation, the assistant message returned (its text, and the tool calls read out
    of it when the call offered tools), and the termination it caused (or None)."""

    generation: Generation
    message: dict[str, Any]
    prompt_tokens: int
    ended: str | None = None


@dataclass
class GatewaySession:
    """An episode's state in the gateway. ``loop`` is the event loop ``generate`` runs on (the trainer's)."""

    key: str
    generate: Generate
    loop: asyncio.AbstractEventLoop
    tokenizer: Any
    limits: Limits
    sampling: Sampling
    recorder: EpisodeRecorder
    started: float = field(default_factory=time.monotonic)
    termination: str | None = None
    in_flight: bool = False
    requests: int = 0
    """Calls the program made to this episode, served or refused."""
    calls: int = 0
    """Calls served with a reply."""
    renders_tools: bool | None = None
    """Whether the tokenizer's chat template shows tools (checked on the first call that offers some)."""
    sampling_overridden: int = 0
    """Calls that asked for other sampling settings than the run's (the run's are used: log-probs assume them)."""

    def end(self, termination: str) -> None:
        """End the episode (the first reason stays); later calls are refused."""
        if self.termination is None:
            self.termination = termination

    def _over(self, termination: str, message: str) -> EpisodeOver:
        self.end(termination)
        return EpisodeOver(self.termination or termination, message)

    def _check_open(self) -> None:
        if self.termination is not None:
            raise EpisodeOver(self.termination, f"episode {self.key!r} has ended ({self.termination})")

    async def complete(self, messages: Sequence[Mapping[str, Any]], max_tokens: int | None = None,
                       tools: list[dict[str, Any]] | None = None, parse_tools: bool = False) -> Reply:
        """Serve one chat completion of this episode, recording its tokens; raises :class:`EpisodeOver`.
        ``tools`` are shown to the model by its chat template; ``parse_tools`` reads its tool calls out of the reply."""
        self.requests += 1
        self._check_open()
        if self.in_flight:
            raise SessionBusy(f"episode {self.key!r} already has a call in flight; an episode's calls are "
                              "sequential")
        self.in_flight = True
        try:
            return await self._complete(messages, max_tokens, tools, parse_tools)
        finally:
            self.in_flight = False

    async def _complete(self, messages: Sequence[Mapping[str, Any]], max_tokens: int | None,
                        tools: list[dict[str, Any]] | None, parse_tools: bool) -> Reply:
        limits, recorder = self.limits, self.recorder
        continuation = recorder.continuation(messages, tools)
        current = recorder.current
        if not continuation.new_segment and current is not None:
            left = limits.max_context_tokens - current.length
            ids = await self._encode(continuation, left, f"the new messages take {{}} tokens; {left} of the context's "
                                                         f"{limits.max_context_tokens} are left")
            recorder.extend(continuation, ids)
            if self.elapsed() > limits.timeout_s:
                raise self._over("timeout", f"the episode ran past its {limits.timeout_s:g} s")
        if recorder.turns >= limits.max_turns:
            raise self._over("max_turns", f"the episode has had its {limits.max_turns} replies")
        if continuation.new_segment:
            ids = await self._encode(continuation, limits.max_context_tokens - 1,
                                     f"the prompt takes {{}} tokens of the context's {limits.max_context_tokens}")
            recorder.extend(continuation, ids)
        segment = recorder.current
        assert segment is not None
        room = limits.max_context_tokens - segment.length
        remaining = limits.timeout_s - self.elapsed()
        if room <= 0:
            raise self._over("max_context", f"the prompt takes {segment.length} tokens of the context's "
                                            f"{limits.max_context_tokens}")
        if remaining <= 0:
            raise self._over("timeout", f"the episode ran past its {limits.timeout_s:g} s")
        budget = min(limits.max_new_tokens_per_turn, room, max_tokens or limits.max_new_tokens_per_turn)
        sampling = Sampling(self.sampling.temperature, self.sampling.top_p, self.sampling.top_k, budget)
        prompt = segment.token_ids()

        async def sample() -> Generation:
            return await self.generate(prompt, sampling)

        future = asyncio.run_coroutine_threadsafe(sample(), self.loop)
        try:
            generation = await asyncio.wait_for(asyncio.wrap_future(future), remaining)
        except TimeoutError:
            future.cancel()
            raise self._over("timeout", f"the episode ran past its {limits.timeout_s:g} s") from None
        text = self.tokenizer.decode(generation.token_ids, skip_special_tokens=True)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if parse_tools:
            parsed = parse_tool_calls(text)
            if parsed.tool_calls:
                message = {"role": "assistant", "content": parsed.content or None, "tool_calls": parsed.tool_calls}
        recorder.record(messages, generation, message)
        self.calls += 1
        ended = None
        if generation.finish_reason == "length" and segment.length >= limits.max_context_tokens:
            self.end("max_context")
            ended = "max_context"
        return Reply(generation, message, len(prompt), ended)

    async def _encode(self, continuation: Continuation, most: int, refusal: str) -> list[int]:
        """``continuation``'s ids, or the episode ended as ``max_context`` when they would take more than ``most``
        tokens (``refusal`` says so, its ``{}`` the count): refused by the byte bound before anything is rendered,
        else rendered and tokenized, on a worker thread where the text is long enough to hold up the gateway's other
        sessions."""
        least = least_tokens(self.tokenizer, continuation.messages)
        if least > most:
            raise self._over("max_context", refusal.format(f"at least {least}"))
        if sum(len(message["content"]) for message in continuation.messages) <= INLINE_TEXT_CHARS:
            ids = self.recorder.encode(continuation)
        else:
            ids = await asyncio.to_thread(self.recorder.encode, continuation)
        if len(ids) > most:
            raise self._over("max_context", refusal.format(len(ids)))
        return ids

    def elapsed(self) -> float:
        return time.monotonic() - self.started
