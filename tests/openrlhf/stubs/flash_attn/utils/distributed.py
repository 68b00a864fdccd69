"""STUB of ``flash_attn.utils.distributed`` for CPU tests only; raises if called."""


def all_gather(*args, **kwargs):
    raise NotImplementedError("flash_attn is a test stub here: ring attention needs the real flash-attn")
