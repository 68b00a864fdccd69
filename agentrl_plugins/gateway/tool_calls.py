"""OpenAI-format tool calls over a model that writes them as text, in the Hermes form most open chat templates use
(Qwen2.5, Qwen3, Hermes): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

The reply's tokens are what the trainer sees; this only reads the calls out of the text the gateway returns. A
block that is not a well-formed call stays in the content, as vLLM's ``hermes`` parser leaves it.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


@dataclass(frozen=True)
class ParsedReply:
    """A reply's text without its tool calls, and the calls in OpenAI's form (``id``, ``type``, ``function``)."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def _call(block: str) -> dict[str, Any] | None:
    try:
        call = json.loads(block)
    except json.JSONDecodeError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return None
    arguments = call.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": call["name"], "arguments": arguments}}


def parse_tool_calls(text: str) -> ParsedReply:
    """The tool calls written in ``text`` and what remains of it."""
    calls: list[dict[str, Any]] = []

    def take(match: re.Match[str]) -> str:
        call = _call(match.group(1))
        if call is None:
            return match.group(0)
        calls.append(call)
        return ""

    content = CALL.sub(take, text)
    return ParsedReply(content.strip() if calls else content, calls)


def renders_tools(tokenizer: Any) -> bool:
    """Whether ``tokenizer``'s chat template shows tools to the model (else a request with tools is refused)."""
    messages = [{"role": "user", "content": "x"}]
    tool = [{"type": "function", "function": {"name": "probe", "description": "", "parameters": {}}}]
    try:
        with_tools = tokenizer.apply_chat_template(messages, tools=tool, tokenize=False, add_generation_prompt=True)
    except Exception:
        return False
    return with_tools != tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
