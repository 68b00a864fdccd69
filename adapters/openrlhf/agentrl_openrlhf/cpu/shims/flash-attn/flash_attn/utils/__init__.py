"""SHIM of ``flash_attn.utils`` for agentrl-openrlhf's CPU backend only."""
