"""Turning messages into token ids once, through the tokenizer's own chat template.

Text never becomes a special token: where a message's text holds a special token's spelling (an observation
that prints ``<|im_end|>``, a user message with a role marker), that text is tokenized as plain text and only the
template's own markers are special tokens. Text without such spellings takes the tokenizer's one call, as before.
"""

from __future__ import annotations

import functools
import re
import secrets
from typing import Any, Sequence

_MARK = "agentrlplaintext"  # ASCII letters: what a template's filters (trim, tojson) pass through unchanged


def template_ids(tokenizer: Any, messages: Sequence[dict[str, Any]], add_generation_prompt: bool,
                 tools: list[dict[str, Any]] | None = None) -> list[int]:
    """Token ids of ``messages`` (and OpenAI-style ``tools``) rendered by the tokenizer's chat template."""
    extra = {"tools": tools} if tools else {}
    if _forges(special_texts(tokenizer), messages):
        return _plain_text_ids(tokenizer, messages, add_generation_prompt, extra)
    out = tokenizer.apply_chat_template(list(messages), add_generation_prompt=add_generation_prompt, tokenize=True,
                                        **extra)
    return _ints(out)


def special_texts(tokenizer: Any) -> tuple[str, ...]:
    """The spellings of the tokenizer's special tokens (its added tokens marked special), longest first."""
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return tuple(sorted({token.content for token in decoder.values() if getattr(token, "special", False)},
                        key=len, reverse=True))


@functools.lru_cache(maxsize=16)
def _spelling(texts: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, texts)))


def _texts(message: dict[str, Any]) -> list[str]:
    """A message's free text: its content and its tool calls' string arguments."""
    texts = [message["content"]] if isinstance(message.get("content"), str) else []
    for call in message.get("tool_calls") or ():
        arguments = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
        texts += [arguments] if isinstance(arguments, str) else []
    return texts


def _forges(specials: tuple[str, ...], messages: Sequence[dict[str, Any]]) -> bool:
    if not specials:
        return False
    pattern = _spelling(specials)
    return any(pattern.search(text) for message in messages for text in _texts(message))


def _wrapped(message: dict[str, Any], opened: str, closed: str) -> dict[str, Any]:
    """``message`` with its free text between the two marks."""
    out = dict(message)
    if isinstance(message.get("content"), str):
        out["content"] = f"{opened}{message['content']}{closed}"
    if message.get("tool_calls"):
        out["tool_calls"] = [_wrapped_call(call, opened, closed) for call in message["tool_calls"]]
    return out


def _wrapped_call(call: Any, opened: str, closed: str) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    return {**call, "function": {**function, "arguments": f"{opened}{function['arguments']}{closed}"}}


def _plain_text_ids(tokenizer: Any, messages: Sequence[dict[str, Any]], add_generation_prompt: bool,
                    extra: dict[str, Any]) -> list[int]:
    """Render with each free text between marks, then tokenize the template's parts with special tokens live and
    the free text with special tokens as plain text."""
    tag = secrets.token_hex(8)
    opened, closed = f"{_MARK}{tag}o", f"{_MARK}{tag}c"
    text = tokenizer.apply_chat_template([_wrapped(m, opened, closed) for m in messages],
                                         add_generation_prompt=add_generation_prompt, tokenize=False, **extra)
    pieces = re.split(f"{opened}(.*?){closed}", text, flags=re.DOTALL)
    if any(tag in piece for piece in pieces[::2]):
        raise ValueError("the chat template does not render a message's text in one piece; its special-token "
                         "spellings cannot be kept as plain text")
    ids: list[int] = []
    for index, piece in enumerate(pieces):
        if piece:
            ids += _ints(tokenizer(piece, add_special_tokens=False, split_special_tokens=index % 2 == 1))
    return ids


def _ints(out: Any) -> list[int]:
    if hasattr(out, "keys") and "input_ids" in out:
        out = out["input_ids"]
    return [int(token) for token in out]


def _common_suffix(a: list[int], b: list[int]) -> list[int]:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return a[len(a) - n:]


class ChatCodec:
    """Encodes the first prompt and each observation as the template would, never re-tokenizing history."""

    def __init__(self, tokenizer: Any, system_prompt: str | None = None, observation_role: str = "user"):
        self.tokenizer = tokenizer
        self.system = [{"role": "system", "content": system_prompt}] if system_prompt else []
        self.observation_role = observation_role
        self._base = self.system + [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
        self._base_ids = template_ids(tokenizer, self._base, add_generation_prompt=False)
        other = template_ids(tokenizer, self._base[:-1] + [{"role": "assistant", "content": "b"}], False)
        self.turn_closing = _common_suffix(self._base_ids, other)

    def prompt_ids(self, text: str) -> list[int]:
        return template_ids(self.tokenizer, self.system + [{"role": "user", "content": text}], True)

    def observation_ids(self, text: str, turn_ended_with_eos: bool) -> list[int]:
        """Ids that close the policy's turn, carry ``text`` and open the next policy turn."""
        return self.continuation_ids([{"role": self.observation_role, "content": text}], turn_ended_with_eos)

    def continuation_ids(self, messages: Sequence[dict[str, Any]], turn_ended_with_eos: bool) -> list[int]:
        """Ids that close the policy's turn, carry ``messages`` (any roles the template knows) and open the next
        policy turn: what the template adds after an assistant message, without rendering the history again."""
        full = template_ids(self.tokenizer, self._base + list(messages), add_generation_prompt=True)
        if full[: len(self._base_ids)] != self._base_ids:
            raise ValueError("the chat template does not render a conversation as a prefix of its continuation")
        closing = self.turn_closing
        if turn_ended_with_eos and closing and closing[0] == getattr(self.tokenizer, "eos_token_id", None):
            closing = closing[1:]
        return closing + full[len(self._base_ids):]
