"""OpenRLHF agent file (``--train.agent_func_path``): episodes of the recipe in ``AGENTRL_OPENRLHF_RECIPE``."""

from agentrl_openrlhf.executor import AgentExecutor

__all__ = ["AgentExecutor"]
