"""SHIM of ``vllm.inputs`` for agentrl-openrlhf's CPU backend only."""


class TokensPrompt(dict):
    """vLLM's token prompt is a typed dict."""
