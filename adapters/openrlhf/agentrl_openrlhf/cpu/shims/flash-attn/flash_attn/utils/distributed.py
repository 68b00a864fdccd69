"""SHIM of ``flash_attn.utils.distributed`` for agentrl-openrlhf's CPU backend only; raises if called."""


def all_gather(*args, **kwargs):
    raise NotImplementedError("flash_attn is a CPU shim here: ring attention needs the real flash-attn")
