"""TinyAgent: a small causal LM and tokenizer built locally for the BugFix gym, warm-started with TRL's SFT.

Its own distribution (``agentrl-tinyagent``), above the core and the gym: it registers the model
``tinyagent`` (:mod:`agentrl_tinyagent.plugin`). Building the warm start needs TRL (the ``warmstart``
extra); once cached, every framework's environment loads it.
"""

from __future__ import annotations

import os

import torch
from transformers import AutoTokenizer, Qwen2ForCausalLM

from agentrl_tinyagent.model import ModelSize, build_model
from agentrl_tinyagent.tokenizer import build_tokenizer
from agentrl_tinyagent.warmstart import BASE_SEED, WarmStartSettings, pass_at_1, warm_start

__all__ = ["BASE_SEED", "ModelSize", "WarmStartSettings", "build_model", "build_tokenizer", "load_tinyagent",
           "pass_at_1", "warm_start"]


def load_tinyagent(seed: int = BASE_SEED, cache_dir: str | os.PathLike | None = None,
                   settings: WarmStartSettings = WarmStartSettings()) -> tuple[Qwen2ForCausalLM, object]:
    """The warm-started TinyAgent ``(model, tokenizer)`` for ``seed``, built on first use and cached.

    The cache is ``cache_dir``, else ``$AGENTRL_CACHE/tinyagent``, else ``~/.cache/agentrl/tinyagent``.
    """
    path = warm_start(seed, cache_dir, settings)
    model = Qwen2ForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    return model, AutoTokenizer.from_pretrained(path)
