"""The ``agentrl_hf`` rollout backend: a Ray actor serving a Hugging Face model on CPU, for verl's agent loop.

``HFReplica`` (verl's ``RolloutReplica``) starts one ``HFRolloutServer`` per
replica. The server batches concurrent ``generate`` calls through the core's
``HFGenerator`` (temperature, top-k and top-p honoured; log-probs at the
sampling temperature, so they match what the trainer recomputes). Inside each
hybrid trainer worker, ``HFServerAdapter`` (verl's ``BaseRollout``) ships the
FSDP state dict to the replica's server when verl syncs weights each step.
"""

from __future__ import annotations

from typing import Any, Generator

import ray
import torch
from verl.utils.fs import copy_to_local
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from agentrl_plugins.types import Sampling

from agentrl_verl.names import ROLLOUT_NAME

SERVER_PREFIX = "agentrl_hf_server_"


def server_name(replica_rank: int) -> str:
    """The Ray actor name of a replica's server (the trainer workers look it up by name)."""
    return f"{SERVER_PREFIX}{replica_rank}"


def sampling_of(params: dict[str, Any], default_max_tokens: int) -> Sampling:
    """verl's sampling params as the core's ``Sampling`` (verl's ``top_k=-1`` and ``0`` both mean off)."""
    return Sampling(float(params.get("temperature", 1.0)), float(params.get("top_p", 1.0)),
                    max(int(params.get("top_k", -1)), 0), int(params.get("max_tokens") or default_max_tokens))


class HFRolloutServer:
    """Token-in, token-out generation from a local HF model; concurrent requests share batched decoding."""

    def __init__(self, model_path: str, max_model_len: int, response_length: int, seed: int):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from agentrl_plugins.hf_sampler import HFGenerator

        tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForCausalLM.from_pretrained(model_path, attn_implementation="sdpa",
                                                          dtype=torch.float32).eval()
        self.generator = HFGenerator(self.model, tokenizer.eos_token_id, tokenizer.pad_token_id, seed=seed)
        self.max_model_len, self.response_length = max_model_len, response_length
        self.global_steps = 0
        self.weight_updates = 0

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> TokenOutput:
        sampling = sampling_of(sampling_params, self.response_length)
        room = self.max_model_len - len(prompt_ids)
        if room <= 0:
            raise ValueError(f"request {request_id}: the prompt has {len(prompt_ids)} tokens, max_model_len is "
                             f"{self.max_model_len}")
        sampling = Sampling(sampling.temperature, sampling.top_p, sampling.top_k, min(sampling.max_new_tokens, room))
        generation = await self.generator(list(prompt_ids), sampling)
        return TokenOutput(token_ids=generation.token_ids, log_probs=generation.logprobs, stop_reason="completed",
                           extra_fields={"finish_reason": generation.finish_reason,
                                         "global_steps": self.global_steps})

    def update_weights(self, state: dict[str, torch.Tensor], global_steps: int | None = None) -> int:
        """Load the trainer's full state dict; tied weights may be absent. Returns the update count. Requests draw
        from then on with the seed of the step the weights are (:meth:`HFGenerator.serve`): a resumed run, whose first
        sync is its checkpoint's step, draws what the run never stopped drew."""
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        tied = set(getattr(self.model, "_tied_weights_keys", None) or ()) | {"lm_head.weight"}
        if unexpected or set(missing) - tied:
            raise ValueError(f"weight update does not fit the served model: missing {sorted(set(missing) - tied)}, "
                             f"unexpected {sorted(unexpected)}")
        self.global_steps = self.global_steps if global_steps is None else global_steps
        self.generator.serve(f"step {self.global_steps}" if self.global_steps else None)
        self.weight_updates += 1
        return self.weight_updates

    def stats(self) -> dict[str, int]:
        """How much batching and cache reuse happened: forward passes, admission rounds, prompt tokens read
        and served from the cache, and weight updates so far."""
        return {"forward_passes": self.generator.forward_passes, "batches": self.generator.batches,
                "prefill_tokens": self.generator.prefill_tokens, "reused_tokens": self.generator.reused_tokens,
                "weight_updates": self.weight_updates}

    async def wake_up(self) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def wait_for_requests_to_drain(self) -> None:
        return None

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        self.generator.prefixes.clear()

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def start_profile(self, **kwargs: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


class HFReplica(RolloutReplica):
    """One ``HFRolloutServer`` per replica, on the node of the replica's first worker, seeded with
    ``rollout.seed`` plus the replica's rank."""

    async def launch_servers(self) -> None:
        node_id = await self.workers[0].__ray_call__.remote(lambda worker: ray.get_runtime_context().get_node_id())
        server = ray.remote(HFRolloutServer).options(
            name=server_name(self.replica_rank), num_cpus=0, max_concurrency=self.max_concurrency,
            scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node_id=node_id,
                                                                                              soft=False),
        ).remote(copy_to_local(self.model_config.path), self.config.max_model_len or self.config.prompt_length
                 + self.config.response_length, self.config.response_length, self.config.seed + self.replica_rank)
        await server.stats.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = server_name(self.replica_rank)


class HFServerAdapter(BaseRollout):
    """verl's in-worker rollout: on each weight sync, the replica's first rank sends the full state dict."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, *args: Any, **kwargs: Any):
        super().__init__(config, model_config, device_mesh)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        replica_size = (self.config.tensor_model_parallel_size * self.config.data_parallel_size
                        * self.config.pipeline_model_parallel_size)
        self.replica_rank, self.is_leader = rank // replica_size, rank % replica_size == 0

    async def update_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None],
                             wire_format: str = "named_tensors", **kwargs: Any) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"rollout {ROLLOUT_NAME!r} takes full named tensors, not {wire_format!r}: set "
                             f"actor_rollout_ref.rollout.checkpoint_engine.backend=naive")
        if kwargs.get("peft_config") is not None:
            raise ValueError(f"rollout {ROLLOUT_NAME!r} serves merged weights: set actor_rollout_ref.model.lora.merge="
                             f"true for LoRA")
        state = {name: tensor.detach().to("cpu", torch.float32).clone() for name, tensor in weights}
        if self.is_leader:
            server = ray.get_actor(server_name(self.replica_rank))
            await server.update_weights.remote(state, kwargs.get("global_steps"))

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

