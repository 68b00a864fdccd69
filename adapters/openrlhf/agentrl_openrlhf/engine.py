"""The core's ``generate`` over OpenRLHF's rollout engine, whose ``generate`` is vLLM's token-in, token-out call."""

from __future__ import annotations

from typing import Any, Sequence

from vllm import SamplingParams

from agentrl_plugins.episode import Generate
from agentrl_plugins.types import Generation, Sampling


def turn_params(sampling: Sampling, rollout: Any) -> SamplingParams:
    """vLLM sampling parameters for one turn; ``logprobs=1`` returns the sampled token's log-prob.

    ``rollout`` is the ``SamplingParams`` OpenRLHF built for the rollout; its ``min_tokens`` and
    ``skip_special_tokens`` carry over.
    """
    return SamplingParams(
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        max_tokens=sampling.max_new_tokens,
        min_tokens=min(rollout.min_tokens, sampling.max_new_tokens),
        skip_special_tokens=rollout.skip_special_tokens,
        logprobs=1,
    )


def sampled_logprobs(token_ids: Sequence[int], logprobs: Sequence[dict[int, Any]] | None) -> list[float]:
    """The log-prob of each sampled token from vLLM's per-position ``{token_id: Logprob}`` dicts."""
    if logprobs is None or len(logprobs) != len(token_ids):
        raise ValueError(f"the rollout engine returned {0 if logprobs is None else len(logprobs)} log-prob entries "
                         f"for {len(token_ids)} tokens; it must honour SamplingParams(logprobs=1)")
    return [float(position[token].logprob) for token, position in zip(token_ids, logprobs)]


def engine_generate(llm_engine: Any, rollout: Any) -> Generate:
    """``generate(token_ids, sampling)`` for the episode runner, answered by ``llm_engine.generate``."""

    async def generate(token_ids: list[int], sampling: Sampling) -> Generation:
        output = (await llm_engine.generate(token_ids, turn_params(sampling, rollout))).outputs[0]
        ids = [int(token) for token in output.token_ids]
        return Generation(ids, sampled_logprobs(ids, output.logprobs), output.finish_reason or "stop")

    return generate
