"""SHIM of ``vllm.utils`` for agentrl-openrlhf's CPU backend only."""

import uuid


def random_uuid() -> str:
    return uuid.uuid4().hex
