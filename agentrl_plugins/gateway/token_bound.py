"""A lower bound on the tokens a conversation takes, from its length in bytes alone: what lets the gateway refuse
an over-long request before it renders or tokenizes anything.

A token spells at most as many bytes as the tokenizer's longest vocabulary entry, so text of ``n`` bytes takes at
least ``n / longest`` tokens, provided the tokenizer drops no text on the way (a byte-level or metaspace BPE with
no fused unknowns) and its normalizer shrinks text by a known factor at most (NFC composes at most 3 bytes into 1,
as a Hangul syllable does its jamo). For any other tokenizer there is no bound (``None``): its requests are only
held to the gateway's byte cap, and tokenized off the event loop.
"""

from __future__ import annotations

import json
import weakref
from typing import Any, Mapping, Sequence

NORMALIZER_SHRINK = {None: 1, "NFC": 3, "NFD": 1}
"""How many bytes of text a normalizer can turn into one at most."""
KEEPING_PRE_TOKENIZERS = ("ByteLevel", "Metaspace", "Split", "Digits", "Punctuation", "Sequence")
"""Pre-tokenizers that keep every byte of the text (``Split`` unless its behavior is ``removed``)."""
FREE_TEXT_ROLES = ("system", "developer", "user", "tool")
"""Roles whose text a chat template renders whole (an earlier assistant turn may be shortened, reasoning dropped)."""

_cache: weakref.WeakKeyDictionary[Any, float | None] = weakref.WeakKeyDictionary()


def bytes_per_token(tokenizer: Any) -> float | None:
    """The most bytes of un-normalized text one token of ``tokenizer`` can stand for, or None without a bound."""
    try:
        return _cache[tokenizer]
    except (KeyError, TypeError):
        pass
    bound = _bytes_per_token(tokenizer)
    try:
        _cache[tokenizer] = bound
    except TypeError:  # an object that cannot be weakly referenced: computed each time
        pass
    return bound


def _bytes_per_token(tokenizer: Any) -> float | None:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    config = json.loads(backend.to_str())
    model = config.get("model") or {}
    if model.get("type") != "BPE" or model.get("fuse_unk"):
        return None
    normalizer = (config.get("normalizer") or {}).get("type")
    if normalizer not in NORMALIZER_SHRINK or not _keeps_bytes(config.get("pre_tokenizer")):
        return None
    longest = max((len(entry.encode("utf-8", "surrogatepass")) for entry in tokenizer.get_vocab()), default=0)
    return float(longest * NORMALIZER_SHRINK[normalizer]) if longest else None


def _keeps_bytes(pre_tokenizer: Mapping[str, Any] | None) -> bool:
    if pre_tokenizer is None:
        return True
    kind = pre_tokenizer.get("type")
    if kind == "Sequence":
        return all(_keeps_bytes(part) for part in pre_tokenizer.get("pretokenizers", []))
    return kind in KEEPING_PRE_TOKENIZERS and pre_tokenizer.get("behavior") != "Removed"


def least_tokens(tokenizer: Any, messages: Sequence[Mapping[str, Any]]) -> int:
    """At least how many tokens the free text of ``messages`` (plain messages: role and content) takes; 0 where
    the tokenizer gives no bound."""
    per_token = bytes_per_token(tokenizer)
    if per_token is None:
        return 0
    size = sum(len(str(message.get("content") or "").strip().encode("utf-8")) for message in messages
               if message.get("role") in FREE_TEXT_ROLES)
    return int(size // per_token)
