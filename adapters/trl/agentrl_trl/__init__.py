"""agentrl-trl: recipes, environments and verifiers of agentrl-plugins inside TRL's GRPOTrainer.

In your own script: ``agent_trainer(recipe, model, tokenizer, GRPOConfig(...)).train()``. The names below
import TRL on first use, so registering the plugin (``agentrl plugins``) stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentrl_plugins.framework_versions import check_framework

TRL_VERSION = check_framework("agentrl-trl", "trl")

_EXPORTS = {
    "agent_trainer": "agentrl_trl.build", "hf_generator_factory": "agentrl_trl.build",
    "load_policy": "agentrl_trl.build", "lora_config": "agentrl_trl.build",
    "describe": "agentrl_trl.config", "grpo_config": "agentrl_trl.config",
    "RunRecorder": "agentrl_trl.recorder",
    "EpisodeRollout": "agentrl_trl.rollout", "episode_reward": "agentrl_trl.rollout",
    "AgentGRPOTrainer": "agentrl_trl.trainer",
}
__all__ = sorted([*_EXPORTS, "TRL_VERSION"])


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentrl_trl' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
