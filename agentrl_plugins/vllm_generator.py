"""The episode runner's ``generate`` on a vLLM engine: token ids in, sampled ids and their log-probs out.

Nothing is re-tokenised: each request is the episode's token ids (``TokensPrompt``) and comes back as the engine's
token ids with the log-prob the engine sampled each with (``logprobs=0``: the sampled token's own). The requests
that are waiting when the engine is free go to it in one ``generate`` call (run in a worker thread, so the
episodes' environments keep stepping), and the engine's prefix cache serves each later turn's shared prefix. Each
request carries its own seed, derived as the Hugging Face sampler derives it (:class:`RequestSeeds`: the run's
seed, the prompt and how often it was asked), so the same run draws the same tokens whatever else is in the batch,
where the engine is deterministic (vLLM's per-request seeds are; a different engine build or kernel may not be).
vLLM itself is imported only by whoever builds the engine.

vLLM's CPU build cannot serve a seeded request whose prompt is split across engine steps (a chunked prefill: it
rewinds the request's generator by an offset only CUDA generators have, "CPU Generator does not use offset"), so on
a CPU each engine call takes only as many requests as the engine prefills in one step (:func:`engine_calls`), and a
prompt longer than one step's budget is refused by name.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Sequence

from agentrl_plugins.errors import AgentRLError
from agentrl_plugins.hf_sampler import RequestSeeds, weights_seed
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


@dataclass(frozen=True)
class StepBudget:
    """What a vLLM engine prefills in one step: at most ``requests`` sequences and ``tokens`` prompt tokens."""

    requests: int
    tokens: int


def engine_calls(prompt_lengths: Sequence[int], budget: StepBudget | None) -> list[range]:
    """The requests (by position) each engine call takes so that no prompt is split across steps; ``None``: one
    call for all."""
    if budget is None:
        return [range(len(prompt_lengths))] if prompt_lengths else []
    calls: list[range] = []
    start, tokens = 0, 0
    for index, length in enumerate(prompt_lengths):
        if length > budget.tokens:
            raise AgentRLError(f"a prompt of {length} tokens does not fit one step of vLLM's CPU engine "
                               f"(max_num_batched_tokens={budget.tokens}), whose seeded sampling fails on a prompt "
                               f"split across steps: raise the engine's max_num_batched_tokens to the recipe's "
                               f"rollout.max_context_tokens, or lower that")
        if index > start and (tokens + length > budget.tokens or index - start == budget.requests):
            calls.append(range(start, index))
            start, tokens = index, 0
        tokens += length
    calls.append(range(start, len(prompt_lengths)))
    return calls


def step_budget(llm: Any) -> StepBudget | None:
    """The one-step prefill budget of ``llm`` on vLLM's CPU build; ``None`` elsewhere (no limit needed)."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return None
    scheduler = llm.llm_engine.vllm_config.scheduler_config
    return StepBudget(scheduler.max_num_seqs, scheduler.max_num_batched_tokens)


class VLLMGenerator:
    """``generate`` for the episode runner on ``llm``, a vLLM ``LLM`` (offline engine), stopping on ``eos_token_id``."""

    def __init__(self, llm: Any, eos_token_id: int, seed: int = 0):
        self.llm, self.eos_token_id, self.seed = llm, eos_token_id, seed
        self.seeds = RequestSeeds(seed)
        self._pending: list[_Pending] = []
        self._worker: asyncio.Task[None] | None = None
        self.budget = step_budget(llm)

    def serve(self, weights: str | None) -> None:
        """New weights are served: requests draw from now on with the seed of the run and of ``weights``, as
        :meth:`~agentrl_plugins.hf_sampler.HFGenerator.serve` (None: the starting weights)."""
        self.seeds = RequestSeeds(self.seed if weights is None else weights_seed(self.seed, weights))

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
        """The engine's generations for ``requests``, in their order (as few engine calls as :func:`engine_calls`
        allows)."""
        generations: list[Generation] = []
        for call in engine_calls([len(r.token_ids) for r in requests], self.budget):
            generations.extend(self.engine_call([requests[i] for i in call]))
        return generations

    def engine_call(self, requests: Sequence[_Pending]) -> list[Generation]:
        """One engine ``generate`` for ``requests``, in their order."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = [SamplingParams(temperature=r.sampling.temperature, top_p=r.sampling.top_p,
                                 top_k=r.sampling.top_k if r.sampling.top_k > 0 else -1,
                                 max_tokens=r.sampling.max_new_tokens, seed=r.seed, logprobs=0, detokenize=False,
                                 stop_token_ids=[self.eos_token_id], ignore_eos=False) for r in requests]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=r.token_ids) for r in requests], params,
                                    use_tqdm=False)
        return [generation_of(output) for output in outputs]
