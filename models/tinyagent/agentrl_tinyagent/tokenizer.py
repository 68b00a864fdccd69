"""TinyAgent's tokenizer: the core's byte-level chat tokenizer with the BugFix gym's tool words as tokens.

The gym's tool grammar words (``<tool>``, ``read``, ``edit``, every edit-op name) are single tokens,
so a tool call is a handful of tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrl_plugins.local_models import byte_chat_backend, byte_chat_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

WORDS = ("<tool>", "</tool>", "read", "test", "edit ", "edit", "submit")


def token_words() -> tuple[str, ...]:
    """The words that are single tokens: the tool grammar's, then every edit-op name of every BugFix family in
    first-seen order."""
    from bugfix_gym.families import FAMILIES

    return WORDS + tuple(dict.fromkeys(name for family in FAMILIES for name in family.op_names))


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The TinyAgent tokenizer (deterministic: the same vocabulary on every call)."""
    return byte_chat_tokenizer(token_words())


def vocabulary() -> dict[str, int]:
    """The TinyAgent tokenizer's vocabulary (:func:`build_tokenizer`'s ``get_vocab()``) without importing
    transformers."""
    return byte_chat_backend(token_words()).get_vocab(with_added_tokens=True)
