"""The CPU backend's rollout engine: a Ray actor serving a Hugging Face model where OpenRLHF runs vLLM.

It subclasses OpenRLHF's own ``RolloutRayActor`` (so ``generate_responses``, which runs the agent
executor, is OpenRLHF's) and replaces what touches vLLM: loading the engine, ``generate`` and the
weight-sync methods. Generation is the core's batched :class:`HFGenerator`: the concurrent requests of
every episode in flight share batched forward passes with a KV cache; temperature, top-k and
top-p are honoured; log-probs are ``log_softmax(logits / T)`` at each sampled token (vLLM's
``processed_logprobs`` without top-k/top-p renormalisation); finish reasons are ``stop`` or
``length``. Differences from vLLM: ``min_tokens`` is not enforced, and no multi-modal input.

Weights arrive over the gloo group of :mod:`.weight_sync`; after each full sync the actor appends
the digest of the weights it now holds to ``rollout_weights.jsonl`` in the run folder (when
``AGENTRL_OPENRLHF_RUN_DIR`` is set), so a run can show that the rollout serves the trained weights, and samples
from then on with the seed of the step those weights are (:meth:`~agentrl_plugins.hf_sampler.HFGenerator.serve`;
OpenRLHF syncs once a step, and a resumed run says its checkpoint's step, :meth:`HFRolloutEngine.resume_at`): a run
resumed from a checkpoint draws what the run never stopped drew. (Not the weights' digest: a float's worth of
batching noise in an update would change every later draw.)
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import ray
import torch
from openrlhf.trainer.ray import vllm_engine
from openrlhf.utils.agent import SingleTurnAgentExecutor
from transformers import AutoModelForCausalLM, AutoTokenizer

from agentrl_plugins.hf_sampler import HFGenerator
from agentrl_plugins.types import Sampling

from agentrl_openrlhf.cpu.weight_sync import GlooBroadcastGroup
from agentrl_openrlhf.cpu.weights import record_sync, weights_digest


@dataclass(frozen=True)
class Logprob:
    """vLLM's ``Logprob``: the part OpenRLHF reads."""

    logprob: float


@dataclass(frozen=True)
class CompletionOutput:
    """vLLM's ``CompletionOutput``: the fields OpenRLHF's executors read."""

    token_ids: list[int]
    text: str
    finish_reason: str
    logprobs: list[dict[int, Logprob]]


@dataclass(frozen=True)
class RequestOutput:
    """vLLM's ``RequestOutput`` with one completion."""

    outputs: list[CompletionOutput]


class HFRolloutEngine(vllm_engine.RolloutRayActor.__ray_metadata__.modified_class):
    """OpenRLHF's rollout actor with a Hugging Face model and :class:`HFGenerator` in place of vLLM."""

    async def __init__(self, *args, bundle_indices: list | None = None, agent_func_path: str | None = None,
                       remote_rm_url: str | None = None, mm_pad_token_ids: set | None = None, **kwargs):
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        if agent_func_path:
            self.executor = vllm_engine._load_agent_executor(agent_func_path)
        else:
            self.executor = SingleTurnAgentExecutor(remote_rm_url)
        self.model = AutoModelForCausalLM.from_pretrained(kwargs["model"], dtype=torch.float32,
                                                          attn_implementation="sdpa").eval()
        tokenizer = AutoTokenizer.from_pretrained(kwargs["model"])
        self.tokenizer = tokenizer
        self.max_model_len = kwargs["max_model_len"]
        self.generator = HFGenerator(self.model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=kwargs["seed"])
        self.parameters = dict(self.model.named_parameters())
        self.unfinished = 0
        self.syncs = 0
        self.sync_group: GlooBroadcastGroup | None = None

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None) -> RequestOutput:
        if multi_modal_data:
            raise NotImplementedError("the CPU rollout engine serves text models only")
        prompt = [int(token) for token in prompt_token_ids]
        limit = sampling_params.max_tokens or self.max_model_len - len(prompt)
        sampling = Sampling(sampling_params.temperature, sampling_params.top_p, sampling_params.top_k, limit)
        self.unfinished += 1
        try:
            generation = await self.generator(prompt, sampling)
        finally:
            self.unfinished -= 1
        ids = generation.token_ids
        logprobs = [{token: Logprob(value)} for token, value in zip(ids, generation.logprobs)]
        text = self.tokenizer.decode(ids, skip_special_tokens=sampling_params.skip_special_tokens)
        return RequestOutput([CompletionOutput(ids, text, generation.finish_reason, logprobs)])

    def get_num_unfinished_requests(self) -> int:
        return self.unfinished

    async def init_process_group(self, master_address, master_port, rank_offset, world_size, group_name, backend,
                                 use_ray):
        if use_ray:
            raise NotImplementedError("the CPU rollout engine syncs weights over its own gloo group, not Ray's")
        self.sync_group = await asyncio.to_thread(GlooBroadcastGroup, master_address, master_port, rank_offset,
                                                  world_size)

    async def update_weight(self, name, dtype, shape, empty_cache=False):
        if name not in self.parameters:
            raise KeyError(f"the trainer sent weight {name!r}, which the rollout model does not have")
        weight = torch.empty(shape, dtype=dtype)
        await asyncio.to_thread(self.sync_group.broadcast, weight, 0)
        with torch.no_grad():
            self.parameters[name].copy_(weight)
        if empty_cache:  # the sync's last weight
            self.syncs += 1
            self.generator.serve(f"step {self.syncs}")  # OpenRLHF syncs once a step
            record_sync(self.syncs, weights_digest(self.model))

    def resume_at(self, step: int) -> None:
        """A run resumed from step ``step``'s checkpoint: its first sync brings that step's weights."""
        self.syncs = step - 1

    def weights_digest(self) -> str:
        return weights_digest(self.model)

    async def reset_prefix_cache(self):
        return None

    async def pause_generation(self):
        return None

    async def resume_generation(self):
        return None

    async def sleep(self, level=1):
        return None

    async def wake_up(self, tags=None):
        return None


RolloutRayActor = ray.remote(HFRolloutEngine)
