"""OpenRLHF reward file (``--reward.remote_url``): single-turn completions scored by the recipe's verifier."""

from agentrl_openrlhf.reward import reward_func

__all__ = ["reward_func"]
