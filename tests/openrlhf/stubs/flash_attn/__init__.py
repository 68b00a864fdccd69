"""STUB of flash-attn for CPU tests only (it does not build without CUDA).

OpenRLHF 0.11.2 imports ``bert_padding`` and ``utils.distributed`` at module top but calls them
only for sample packing and ring attention, which these tests do not use; the stubs raise if called.
"""
