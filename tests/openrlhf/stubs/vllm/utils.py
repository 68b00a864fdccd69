"""STUB of ``vllm.utils`` for CPU tests only."""

import uuid


def random_uuid() -> str:
    return uuid.uuid4().hex
