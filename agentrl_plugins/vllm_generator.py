"""The episode runner's ``generate`` on a vLLM engine: token ids in, sampled ids and their log-probs out.

Nothing is re-tokenised: each request is the episode's token ids (``TokensPrompt``) and comes back as the engine's
token ids with the log-prob the engine sampled each with (``logprobs=0``: the sampled token's own). The requests
that are waiting when the engine is free go to it in one ``generate`` call (run in a worker thread, so the
episodes' environments keep stepping), and the engine's prefix cache serves each later turn's shared prefix. Each
request carries its own seed, derived as the Hugging Face sampler derives it (:class:`RequestSeeds`: the run's
seed, the prompt and how often it was asked), so the same run draws the same tokens whatever else is in the batch,
where the engine is deterministic (vLLM's per-request seeds are; a different engine build or kernel may not be).
vLLM itself is imported only by whoever builds the engine.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Sequence

from agentrl_plugins.hf_sampler import RequestSeeds
from agentrl_plugins.types import Generation, Sampling


@dataclass
class _Pending:
    token_ids: list[int]
    sampling: Sampling
    seed: int
    future: asyncio.Future[Generation]


def generation_of(output: Any) -> Generation:
    """One vLLM ``RequestOutput`` (its first completion) as a :class:`Generation`; a length stop is ``length``."""
    completion = output.outputs[0]
    token_ids = list(completion.token_ids)
    logprobs = completion.logprobs
    if logprobs is None or len(logprobs) != len(token_ids):
        raise RuntimeError("the engine returned no log-prob for some sampled token: request logprobs=0")
    values = [float(step[token].logprob) for step, token in zip(logprobs, token_ids)]
    return Generation(token_ids, values, "length" if completion.finish_reason == "length" else "stop")


class VLLMGenerator:
    """``generate`` for the episode runner on ``llm``, a vLLM ``LLM`` (offline engine), stopping on ``eos_token_id``."""

    def __init__(self, llm: Any, eos_token_id: int, seed: int = 0):
        self.llm, self.eos_token_id = llm, eos_token_id
        self.seeds = RequestSeeds(seed)
        self._pending: list[_Pending] = []
        self._worker: asyncio.Task[None] | None = None

    async def __call__(self, token_ids: list[int], sampling: Sampling) -> Generation:
        if not token_ids:
            raise ValueError("generate needs at least one prompt token")
        loop = asyncio.get_running_loop()
        request = _Pending(list(token_ids), sampling, self.seeds.next(token_ids) % 2**31, loop.create_future())
        self._pending.append(request)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await request.future

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(0)  # let every episode that is about to ask join this call
            batch, self._pending = self._pending, []
            try:
                outputs = await asyncio.to_thread(self.generate_batch, batch)
            except Exception as error:  # every waiting episode learns why
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(error)
                continue
            for request, output in zip(batch, outputs):
                if not request.future.done():
                    request.future.set_result(output)

    def generate_batch(self, requests: Sequence[_Pending]) -> list[Generation]:
        """One engine call for ``requests``, in their order."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = [SamplingParams(temperature=r.sampling.temperature, top_p=r.sampling.top_p,
                                 top_k=r.sampling.top_k if r.sampling.top_k > 0 else -1,
                                 max_tokens=r.sampling.max_new_tokens, seed=r.seed, logprobs=0, detokenize=False,
                                 stop_token_ids=[self.eos_token_id], ignore_eos=False) for r in requests]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=r.token_ids) for r in requests], params,
                                    use_tqdm=False)
        return [generation_of(output) for output in outputs]
