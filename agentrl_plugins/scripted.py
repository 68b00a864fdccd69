"""Episodes without a model: a byte-level chat tokenizer and a generator that replays scripted replies.

What the parity batch (:mod:`agentrl_plugins.compare.record`) and TinyAgent's warm start play their scripted
episodes with; :mod:`agentrl_plugins.testing` offers them to plugin authors' tests too.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from agentrl_plugins.types import Generation, Sampling


class ByteChatTokenizer:
    """One token per byte plus role markers; the chat template closes every message with EOS."""

    pad_token_id, eos_token_id = 0, 1
    ROLES = {"system": 2, "user": 3, "assistant": 4, "tool": 5}
    OFFSET = 6

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self.OFFSET + b for b in text.encode("utf-8")]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        data = bytes(i - self.OFFSET for i in ids if i >= self.OFFSET)
        return data.decode("utf-8", errors="replace")

    def apply_chat_template(self, messages: Sequence[dict[str, str]], add_generation_prompt: bool = False,
                            tokenize: bool = True) -> list[int]:
        ids: list[int] = []
        for message in messages:
            ids += [self.ROLES[message["role"]]] + self.encode(message["content"]) + [self.eos_token_id]
        return ids + ([self.ROLES["assistant"]] if add_generation_prompt else [])


class ScriptedGenerate:
    """An async ``generate`` that replays texts in order, with a fixed log-prob per token.

    It records every prompt it was given, so tests can check what the sampler saw.
    """

    def __init__(self, texts: Sequence[str], tokenizer: Any, logprob: float = -0.5, eos: bool = True):
        self.texts, self.tokenizer, self.logprob, self.eos = list(texts), tokenizer, logprob, eos
        self.prompts: list[list[int]] = []
        self.outputs: list[list[int]] = []

    async def __call__(self, token_ids: list[int], sampling: Sampling) -> Generation:
        self.prompts.append(list(token_ids))
        text = self.texts[len(self.outputs) % len(self.texts)]
        ids = self.tokenizer.encode(text) + ([self.tokenizer.eos_token_id] if self.eos else [])
        finish = "stop"
        if len(ids) > sampling.max_new_tokens:
            ids, finish = ids[: sampling.max_new_tokens], "length"
        self.outputs.append(ids)
        return Generation(ids, [self.logprob] * len(ids), finish)
