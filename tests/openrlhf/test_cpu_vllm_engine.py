"""OpenRLHF 0.11.2's own vLLM rollout actor on vLLM's CPU build: it samples token ids with their log-probs, takes the
trainer's weights over the gloo group, and serves them from the next request on (the engine's own log-probs of a
fixed sequence, before and after a sync, against the learner's)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import pytest
import torch

from agentrl_openrlhf.cpu.weight_sync import GlooBroadcastGroup
from agentrl_openrlhf.cpu.weights import weights_digest
from agentrl_openrlhf.recipe_env import RUN_DIR_ENV
from agentrl_tinyagent.model import TINYAGENT_SIZE, build_model

vllm = pytest.importorskip("vllm")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def learner_logprobs(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model.float()(torch.tensor([ids])).logits[0, :-1]
    return logits.log_softmax(-1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]


async def engine_logprobs(engine, ids: list[int]) -> torch.Tensor:
    output = await engine.generate(ids, vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False))
    return torch.tensor([position[token].logprob for token, position in zip(ids[1:], output.prompt_logprobs[1:])])


def test_openrlhfs_vllm_actor_samples_and_serves_the_synced_weights(tmp_path, tokenizer, monkeypatch):
    from agentrl_openrlhf.cpu.vllm_rollout import VLLMRolloutEngine

    initial = build_model(tokenizer, seed=0, size=TINYAGENT_SIZE)  # vLLM's CPU attention: head_dim 32
    initial.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    trained = build_model(tokenizer, seed=1, size=TINYAGENT_SIZE).to(torch.bfloat16)
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # OpenRLHF's actor reads it; nothing here joins a cluster
    ids = tokenizer.encode("the task: fix the bug in swap_minmax, then submit", add_special_tokens=False)
    port = _free_port()
    parameters = list(trained.named_parameters())

    def trainer_rank():
        group = GlooBroadcastGroup("127.0.0.1", port, 0, 2)
        for _, parameter in parameters:
            group.broadcast(parameter.data, src=0, stream=None)

    async def run():
        engine = VLLMRolloutEngine.__new__(VLLMRolloutEngine)
        await engine.__init__(model=str(tmp_path / "model"), enforce_eager=True, tensor_parallel_size=1, seed=0,
                              distributed_executor_backend="uni", max_model_len=512, enable_prefix_caching=True,
                              dtype="bfloat16", trust_remote_code=True, full_determinism=False,
                              gpu_memory_utilization=0.5, bundle_indices=None, num_gpus=0.2,
                              enable_sleep_mode=False, agent_func_path=None, remote_rm_url=None,
                              mm_pad_token_ids=set())
        sampled = await engine.generate(ids, vllm.SamplingParams(max_tokens=6, logprobs=1, seed=3))
        before = await engine_logprobs(engine, ids)
        sender = threading.Thread(target=trainer_rank)
        sender.start()
        await engine.init_process_group("127.0.0.1", port, 1, 2, "openrlhf", "gloo", False)
        for count, (name, parameter) in enumerate(parameters, 1):
            await engine.update_weight(name, parameter.dtype, parameter.shape, empty_cache=count == len(parameters))
        sender.join()
        return sampled.outputs[0], before, await engine_logprobs(engine, ids)

    sampled, before, after = asyncio.run(run())
    assert sampled.token_ids and len(sampled.logprobs) == len(sampled.token_ids), "ids out, each with its log-prob"
    start, moved = learner_logprobs(initial.to(torch.bfloat16), ids), learner_logprobs(trained, ids)
    assert (before - start).abs().mean() < (before - moved).abs().mean() / 3, "the engine held the model's weights"
    assert (after - moved).abs().mean() < (after - start).abs().mean() / 3, "after the sync it serves the trainer's"
    assert (after - moved).abs().max() < 0.1, "to bfloat16's precision, the tied output layer included"
    assert [json.loads(line) for line in (tmp_path / "rollout_weights.jsonl").read_text().splitlines()] == [
        {"sync": 1, "sha256": weights_digest(trained)}]
