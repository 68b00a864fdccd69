"""STUB of ``vllm.inputs`` for CPU tests only."""


class TokensPrompt(dict):
    """vLLM's token prompt is a typed dict."""
