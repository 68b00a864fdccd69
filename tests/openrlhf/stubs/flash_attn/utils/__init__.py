"""STUB of ``flash_attn.utils`` for CPU tests only."""
