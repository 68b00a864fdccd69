"""Fixtures for TinyAgent tests: the tokenizer, a random model, and one warm start built per session."""

from __future__ import annotations

import pytest

from agentrl_tinyagent import build_model, build_tokenizer, load_tinyagent, warm_start
from agentrl_tinyagent.cache import cache_root
from bugfix_gym.env import BugFixGym


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="session")
def random_model(tokenizer):
    return build_model(tokenizer, seed=0).eval()


@pytest.fixture(scope="session")
def warm_cache():
    """The TinyAgent cache folder (``$AGENTRL_CACHE/tinyagent``, which ``scripts/test`` shares between
    environments), holding the default warm start for seed 0: built here on a fresh machine."""
    warm_start(seed=0)
    return cache_root()


@pytest.fixture(scope="session")
def warm(warm_cache):
    """The warm-started ``(model, tokenizer)`` for seed 0."""
    model, tokenizer = load_tinyagent(seed=0, cache_dir=warm_cache)
    return model.eval(), tokenizer


@pytest.fixture
def gym():
    suite = BugFixGym()
    yield suite
    suite.close()
