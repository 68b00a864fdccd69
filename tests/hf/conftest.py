"""Fixtures for the core's Hugging Face parts: the byte-level chat tokenizer and a small random Qwen2."""

from __future__ import annotations

import pytest

from agentrl_plugins.local_models import build_model, byte_chat_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return byte_chat_tokenizer()


@pytest.fixture(scope="session")
def random_model(tokenizer):
    return build_model(tokenizer, seed=0).eval()
