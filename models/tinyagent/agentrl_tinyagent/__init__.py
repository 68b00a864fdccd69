"""TinyAgent: a small causal LM and tokenizer built locally for the BugFix gym, warm-started with TRL's SFT.

Its own distribution (``agentrl-tinyagent``), above the core and the gym: it registers the model
``tinyagent`` and the distillation teacher ``tinyagent_fixer`` (:mod:`agentrl_tinyagent.plugin`). Building
either needs TRL (the ``warmstart`` extra); once cached, every framework's environment loads it.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"BASE_SEED": "cache", "WarmStartSettings": "cache", "FIXER_SETTINGS": "cache", "pass_at_1": "warmstart",
            "warm_start": "warmstart", "load_tinyagent": "warmstart", "ModelSize": "model", "build_model": "model",
            "build_tokenizer": "tokenizer"}
"""Each name and its module, imported on first use (PEP 562): torch and transformers only when a name needs
them, so the plugin registering the model costs an ``agentrl`` command nothing."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentrl_tinyagent' has no attribute {name!r}")
    return getattr(importlib.import_module(f"agentrl_tinyagent.{_EXPORTS[name]}"), name)
