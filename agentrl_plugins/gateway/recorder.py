"""One agent episode's model calls stitched into token-exact segments.

Each call sends the whole conversation. When it extends the conversation of the call before (the same messages,
then the reply exactly as the gateway returned it, then new messages), the new messages are encoded once, as the
episode runner encodes observations, and appended to the tokens the sampler saw: the history is never re-rendered.
When it does not (an edited, trimmed or summarised history, a reply changed by the agent), a new segment starts from
the template's rendering of the whole conversation, and the split is counted as drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from agentrl_plugins.chat import ChatCodec, template_ids
from agentrl_plugins.types import Generation

Message = dict[str, Any]


def plain_message(message: Mapping[str, Any]) -> Message:
    """``message`` as role, text (OpenAI content parts of type ``text`` joined) and, where present, tool calls
    (id, name, arguments) or the tool call answered: what stitching compares and the template renders."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    plain: Message = {"role": str(message.get("role")), "content": "" if content is None else str(content)}
    if message.get("tool_calls"):
        plain["tool_calls"] = [{"id": call["id"], "type": "function",
                                "function": {"name": call["function"]["name"],
                                             "arguments": call["function"]["arguments"]}}
                               for call in message["tool_calls"]]
    if message.get("tool_call_id") is not None:
        plain["tool_call_id"] = str(message["tool_call_id"])
    return plain


@dataclass
class Segment:
    """Token buffers of one segment: what one sequence of sampler calls saw, in the episode runner's layout."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)

    def token_ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    def add_policy(self, generation: Generation) -> None:
        start = len(self.response_ids)
        self.response_ids += generation.token_ids
        self.mask += [1] * len(generation.token_ids)
        self.logprobs += [float(x) for x in generation.logprobs]
        self.turn_spans.append((start, len(self.response_ids)))

    def add_observation(self, ids: Sequence[int]) -> None:
        self.response_ids += ids
        self.mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)


@dataclass(frozen=True)
class Continuation:
    """What a call adds before sampling: new messages appended to the current segment, or (``new_segment``) the
    whole conversation as the prompt of a new one. Not yet tokenized (:meth:`EpisodeRecorder.encode`)."""

    messages: list[Message]
    new_segment: bool
    tools: list[dict[str, Any]] | None = None


class EpisodeRecorder:
    """The segments of one episode; for each call :meth:`continuation`, :meth:`encode`, :meth:`extend`, then
    :meth:`record`."""

    def __init__(self, tokenizer: Any, codec: ChatCodec | None = None):
        self.tokenizer = tokenizer
        self.codec = codec or ChatCodec(tokenizer)
        self.segments: list[Segment] = []
        self.messages: list[Message] = []
        """The conversation as of the last reply (the last call's messages and the reply as returned)."""
        self.drift = 0
        """Calls whose conversation did not extend the one before (each started a segment)."""
        self.turns = 0
        self.tools: list[dict[str, Any]] | None = None
        """The tools the conversation's prompt shows (a call with other tools starts a new segment)."""
        self._ended_with_eos = False

    @property
    def current(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def continuation(self, messages: Sequence[Mapping[str, Any]],
                      tools: list[dict[str, Any]] | None = None) -> Continuation:
        """What the call with ``messages`` (and ``tools``) adds: its new messages when they extend the conversation
        with the same tools, else the whole conversation as a new segment. Cheap: nothing is rendered."""
        plain = [plain_message(m) for m in messages]
        known = self.messages
        if known and tools == self.tools and len(plain) > len(known) and plain[: len(known)] == known:
            return Continuation(plain[len(known):], False, tools)
        return Continuation(plain, True, tools)

    def encode(self, continuation: Continuation) -> list[int]:
        """The token ids of ``continuation``: the new messages encoded as observations, or the conversation rendered
        by the chat template with the generation prompt."""
        if continuation.new_segment:
            return template_ids(self.tokenizer, continuation.messages, add_generation_prompt=True,
                                tools=continuation.tools)
        return self.codec.continuation_ids(continuation.messages, self._ended_with_eos)

    def extend(self, continuation: Continuation, ids: Sequence[int]) -> None:
        """Record ``continuation`` as ``ids`` (:meth:`encode`): observation tokens of the current segment, or a new
        segment."""
        if continuation.new_segment:
            if self.segments:
                self.drift += 1
            self.tools = continuation.tools
            self.segments.append(Segment(list(ids)))
        else:
            assert self.current is not None
            self.current.add_observation(ids)

    def record(self, messages: Sequence[Mapping[str, Any]], generation: Generation, reply: Mapping[str, Any]) -> None:
        """Record the sampled ``generation`` of the call with ``messages``, returned to the agent as the assistant
        message ``reply``."""
        if len(generation.logprobs) != len(generation.token_ids):
            raise ValueError(f"generate returned {len(generation.token_ids)} tokens but "
                             f"{len(generation.logprobs)} log-probs")
        assert self.current is not None
        self.current.add_policy(generation)
        self.turns += 1
        self.messages = [plain_message(m) for m in messages] + [plain_message(reply)]
        eos = getattr(self.tokenizer, "eos_token_id", None)
        self._ended_with_eos = bool(generation.token_ids) and generation.token_ids[-1] == eos
