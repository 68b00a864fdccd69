"""SHIM of flash-attn for agentrl-openrlhf's CPU backend only (flash-attn does not build without CUDA).

OpenRLHF 0.11.2 imports ``bert_padding`` and ``utils.distributed`` at module top but calls them
only for sample packing and ring attention, which the CPU backend leaves off; the shims raise
if called. There is deliberately no ``flash_attn.ops``: ``openrlhf/models/utils.py`` falls back
to plain torch when it is missing.
"""
