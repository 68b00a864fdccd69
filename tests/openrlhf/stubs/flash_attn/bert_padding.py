"""STUB of ``flash_attn.bert_padding`` for CPU tests only; every function raises if called."""

from einops import rearrange

__all__ = ["index_first_axis", "pad_input", "rearrange", "unpad_input"]


def _unavailable(*args, **kwargs):
    raise NotImplementedError("flash_attn is a test stub here: sample packing needs the real flash-attn")


index_first_axis = pad_input = unpad_input = _unavailable
