"""SHIM of ``flash_attn.bert_padding`` for agentrl-openrlhf's CPU backend only; every function raises if called."""

from einops import rearrange

__all__ = ["index_first_axis", "pad_input", "rearrange", "unpad_input"]


def _unavailable(*args, **kwargs):
    raise NotImplementedError("flash_attn is a CPU shim here: sample packing needs the real flash-attn")


index_first_axis = pad_input = unpad_input = _unavailable
