"""SHIM of vLLM for agentrl-openrlhf's CPU backend only (vLLM cannot be installed without CUDA).

It provides what OpenRLHF 0.11.2 imports at module top: ``SamplingParams`` (keeps its
arguments, samples nothing), ``inputs.TokensPrompt``, ``utils.random_uuid`` and a version
above the 0.10 OpenRLHF asserts. Generation is the CPU backend's rollout actor
(``agentrl_openrlhf.cpu.rollout``); nothing here runs a model. The CPU backend puts this
folder on ``sys.path``; a GPU run never sees it.
"""

from dataclasses import dataclass

__version__ = "0.29.0"


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = 16
    min_tokens: int = 0
    skip_special_tokens: bool = True
    logprobs: int | None = None
