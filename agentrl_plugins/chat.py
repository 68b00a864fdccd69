"""Turning messages into token ids once, through the tokenizer's own chat template."""

from __future__ import annotations

from typing import Any, Sequence


def template_ids(tokenizer: Any, messages: Sequence[dict[str, Any]], add_generation_prompt: bool,
                 tools: list[dict[str, Any]] | None = None) -> list[int]:
    """Token ids of ``messages`` (and OpenAI-style ``tools``) rendered by the tokenizer's chat template."""
    extra = {"tools": tools} if tools else {}
    out = tokenizer.apply_chat_template(list(messages), add_generation_prompt=add_generation_prompt, tokenize=True,
                                        **extra)
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
