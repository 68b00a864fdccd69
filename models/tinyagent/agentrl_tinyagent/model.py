"""TinyAgent's model: the core's locally built Qwen2 at the size the warm start was measured at."""

from __future__ import annotations

from agentrl_plugins.local_models import ModelSize, build_model

TINYAGENT_SIZE = ModelSize(hidden_size=128, num_hidden_layers=4, intermediate_size=512)
"""The warm-started TinyAgent's size: at it the warm start reads a held-out task's edit menu; at the smaller
defaults it named ops that are not in the menu."""

__all__ = ["TINYAGENT_SIZE", "ModelSize", "build_model"]
