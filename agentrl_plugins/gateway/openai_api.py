"""The slice of the OpenAI Chat Completions API the gateway speaks: request checks (messages, tools and tool calls),
response and error bodies.

Errors have OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``) and status codes, so the ``openai``
client raises its usual exceptions (``BadRequestError``, ``NotFoundError``, ``ConflictError``).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

ROLES = ("system", "developer", "user", "assistant", "tool")
SAMPLING_FIELDS = ("temperature", "top_p")


class ApiError(Exception):
    """A request the gateway refuses, with the status and OpenAI error body to send."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error", headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class ChatRequest:
    """A checked ``/v1/chat/completions`` request."""

    model: str
    messages: list[dict[str, Any]]
    stream: bool = False
    max_tokens: int | None = None
    logprobs: bool = False
    sampling: Mapping[str, float] | None = None
    """The sampling settings the request asked for (they are reported, the run's are used)."""
    tools: list[dict[str, Any]] | None = None
    parse_tools: bool = False
    """Whether tool calls are read out of the reply (``tools`` given and ``tool_choice`` not ``none``)."""


def _positive_int(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ApiError(400, f"{name} must be a positive integer, got {value!r}", param=name)
    return value


def parse_chat_request(raw: bytes) -> ChatRequest:
    """The request in ``raw`` (a JSON body), or an :class:`ApiError` naming what is wrong."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise ApiError(400, "the request body nests its JSON too deeply") from None
    except (UnicodeDecodeError, ValueError) as error:  # JSONDecodeError, and integers past Python's digit limit
        raise ApiError(400, f"the request body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "model is required (a string; GET /v1/models lists them)", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty array", param="messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ApiError(400, f"messages[{index}] must be an object", param=f"messages[{index}]")
        role = message.get("role")
        if role not in ROLES:
            raise ApiError(400, f"messages[{index}].role must be one of {', '.join(ROLES)}, got {role!r}",
                           param=f"messages[{index}].role")
        content = message.get("content")
        if not (isinstance(content, str) or (content is None and role == "assistant")
                or (isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                                      and isinstance(p.get("text"), str) for p in content))):
            raise ApiError(400, f"messages[{index}].content must be a string or a list of text parts",
                           param=f"messages[{index}].content")
        _check_tool_fields(message, index)
        _check_text(message, index)
    tools = body.get("tools") or None
    if tools is not None and not (isinstance(tools, list) and all(
            isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str) for t in tools)):
        raise ApiError(400, "tools must be a list of {type: function, function: {name, description, parameters}}",
                       param="tools")
    tool_choice = body.get("tool_choice", "auto")
    if tool_choice not in ("auto", "none"):
        raise ApiError(400, f"tool_choice {tool_choice!r} is not supported by this rollout backend (it cannot force "
                            "a call): use auto or none", param="tool_choice", code="unsupported")
    n = body.get("n", 1)
    if n != 1:
        raise ApiError(400, f"n must be 1 (one reply per call of an episode), got {n!r}", param="n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, f"stream must be a boolean, got {stream!r}", param="stream")
    max_tokens = _positive_int(body, "max_completion_tokens") or _positive_int(body, "max_tokens")
    sampling = {name: body[name] for name in SAMPLING_FIELDS if body.get(name) is not None}
    for name, value in sampling.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ApiError(400, f"{name} must be a number, got {value!r}", param=name)
    return ChatRequest(model, messages, stream, max_tokens, bool(body.get("logprobs", False)), sampling or None,
                       tools, tools is not None and tool_choice == "auto")


def _check_tool_fields(message: Mapping[str, Any], index: int) -> None:
    """An assistant's ``tool_calls`` and a tool message's ``tool_call_id``, as OpenAI defines them."""
    calls = message.get("tool_calls")
    if calls is not None:
        if message["role"] != "assistant" or not isinstance(calls, list) or not all(
                isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("function"), dict)
                and isinstance(c["function"].get("name"), str) and isinstance(c["function"].get("arguments"), str)
                for c in calls):
            raise ApiError(400, f"messages[{index}].tool_calls must be an assistant's list of {{id, type: function, "
                                "function: {name, arguments (a JSON string)}}", param=f"messages[{index}].tool_calls")
    if message["role"] == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise ApiError(400, f"messages[{index}] is a tool result without its tool_call_id",
                       param=f"messages[{index}].tool_call_id")


def _check_text(message: Mapping[str, Any], index: int) -> None:
    """A message's text and tool-call arguments must be encodable as UTF-8 (JSON's ``\\ud800`` escapes can spell a
    lone surrogate, which no tokenizer takes)."""
    content = message.get("content")
    texts = [content] if isinstance(content, str) else [part["text"] for part in content or []]
    texts += [call["function"]["arguments"] for call in message.get("tool_calls") or []]
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ApiError(400, f"messages[{index}] holds text that is not valid Unicode ({error.reason} at "
                                f"character {error.start})", param=f"messages[{index}].content") from None


def finish_reason(reason: str, tool_calls: bool = False) -> str:
    """The sampler's finish reason in OpenAI's words."""
    return "length" if reason == "length" else "tool_calls" if tool_calls else "stop"


def logprobs_body(tokenizer: Any, token_ids: list[int], logprobs: list[float]) -> dict[str, Any]:
    """OpenAI's ``choices[].logprobs``: one entry per sampled token, with its sampler log-prob."""
    content = []
    for token_id, logprob in zip(token_ids, logprobs):
        text = tokenizer.decode([token_id])
        content.append({"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": []})
    return {"content": content}


def completion_body(model: str, message: dict[str, Any], reason: str, prompt_tokens: int,
                    completion_tokens: int, logprobs: dict[str, Any] | None) -> dict[str, Any]:
    """A ``chat.completion`` object with one choice, the assistant ``message`` (content and any tool calls)."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish_reason(reason, bool(message.get("tool_calls"))), "logprobs": logprobs}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def stream_events(body: dict[str, Any]) -> list[str]:
    """The completion ``body`` as server-sent ``chat.completion.chunk`` events: the role, the content, the finish
    (this backend samples a whole reply before it answers), then ``[DONE]``."""
    choice = body["choices"][0]
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}
    message = choice["message"]
    delta: dict[str, Any] = {"content": message["content"]}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": index, **call} for index, call in enumerate(message["tool_calls"])]
    chunks = [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None},
        {"index": 0, "delta": delta, "finish_reason": None, "logprobs": choice["logprobs"]},
        {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]},
    ]
    events = [f"data: {json.dumps({**base, 'choices': [chunk]})}\n\n" for chunk in chunks]
    return events + ["data: [DONE]\n\n"]


def models_body(names: list[str]) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "agentrl"}
                                       for name in names]}
