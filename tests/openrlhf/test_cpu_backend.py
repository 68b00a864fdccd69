"""The CPU backend's parts against OpenRLHF 0.11.2's own code: pinned call sites, backend choice, the rollout engine."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import socket
import threading

import pytest
import torch

from agentrl_plugins.errors import UnknownNameError

from agentrl_openrlhf.cpu import BACKEND_ENV, choose_backend
from agentrl_openrlhf.cpu import patches as cpu_patches
from agentrl_openrlhf.cpu.weight_sync import GlooBroadcastGroup
from agentrl_openrlhf.cpu.weights import weights_digest
from agentrl_openrlhf.patches import PatchError
from agentrl_openrlhf.recipe_env import RUN_DIR_ENV
from agentrl_tinyagent.model import build_model


def test_every_patched_call_site_reads_as_in_openrlhf_0_11_2():
    cpu_patches.check()
    assert all(patch.sites and patch.apply.__doc__ for patch in cpu_patches.PATCHES)
    assert len({patch.apply for patch in cpu_patches.PATCHES}) == len(cpu_patches.PATCHES)


def test_a_changed_call_site_or_version_is_a_clear_error(monkeypatch):
    moved = cpu_patches.CallSite(cpu_patches.DEEPSPEED, "DeepspeedStrategy.setup_distributed",
                                 "torch.cuda.set_device(rank)")
    expected = r"setup_distributed to contain .*no longer does.*0\.11\.2; installed: 0\.11\.2"
    with pytest.raises(PatchError, match=expected):
        moved.check()
    with pytest.raises(PatchError, match="cannot find openrlhf.utils.deepspeed.deepspeed.DeepspeedStrategy.gone"):
        cpu_patches.CallSite(cpu_patches.DEEPSPEED, "DeepspeedStrategy.gone", "x").check()
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.12.0")
    with pytest.raises(PatchError, match="written against OpenRLHF 0.11.2; installed: 0.12.0"):
        cpu_patches.check()


def test_the_backend_is_the_variable_else_the_cpu_without_a_gpu(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert choose_backend() == ("gpu" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv(BACKEND_ENV, "gpu")
    assert choose_backend() == "gpu"
    monkeypatch.setenv(BACKEND_ENV, "cpuu")
    with pytest.raises(UnknownNameError, match="'cpuu'. Did you mean 'cpu'"):
        choose_backend()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


async def _engine(model_dir, use_recipe):
    """The CPU rollout actor's class, constructed as ``create_vllm_engines`` would (without Ray around it)."""
    from agentrl_openrlhf.cpu.rollout import HFRolloutEngine
    from agentrl_openrlhf.shipped import AGENT_EXECUTOR

    use_recipe()
    engine = HFRolloutEngine.__new__(HFRolloutEngine)
    await engine.__init__(model=str(model_dir), max_model_len=512, seed=0, num_gpus=1,
                          agent_func_path=str(AGENT_EXECUTOR))
    return engine


def test_the_rollout_engine_batches_requests_and_honours_sampling(tmp_path, tokenizer, use_recipe):
    from vllm import SamplingParams

    build_model(tokenizer, seed=0).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    prompts = [tokenizer.encode(f"task number {i}", add_special_tokens=False) for i in range(6)]
    params = SamplingParams(temperature=0.7, top_p=1.0, top_k=5, max_tokens=8, logprobs=1)

    async def play():
        engine = await _engine(tmp_path / "model", use_recipe)
        outputs = await asyncio.gather(*[engine.generate(prompt, params) for prompt in prompts])
        return engine, [output.outputs[0] for output in outputs]

    engine, outputs = asyncio.run(play())
    assert engine.generator.batches < len(prompts), "concurrent requests share decoding loops"
    for prompt, output in zip(prompts, outputs):
        ids = output.token_ids
        assert 1 <= len(ids) <= 8
        assert output.finish_reason == ("stop" if ids[-1] == tokenizer.eos_token_id else "length")
        with torch.no_grad():
            logits = engine.model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1]
        expected = torch.log_softmax(logits / 0.7, -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        returned = torch.tensor([position[token].logprob for token, position in zip(ids, output.logprobs)])
        torch.testing.assert_close(returned, expected, atol=1e-4, rtol=1e-4)
        ranks = (logits > logits.gather(-1, torch.tensor(ids)[:, None])).sum(-1)
        assert (ranks < 5).all(), "top-k honoured"


def test_the_rollout_engine_takes_weights_over_the_gloo_group(tmp_path, tokenizer, use_recipe, monkeypatch):
    build_model(tokenizer, seed=0).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    trained = build_model(tokenizer, seed=1).to(torch.bfloat16)
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path))
    port = _free_port()
    names = [name for name, _ in trained.named_parameters()]

    def trainer_rank():
        group = GlooBroadcastGroup("127.0.0.1", port, 0, 2)
        for _, parameter in trained.named_parameters():
            group.broadcast(parameter.data, src=0, stream=None)

    async def sync():
        engine = await _engine(tmp_path / "model", use_recipe)
        before = engine.weights_digest()
        sender = threading.Thread(target=trainer_rank)
        sender.start()
        await engine.init_process_group("127.0.0.1", port, 1, 2, "openrlhf", backend="gloo", use_ray=False)
        for count, (name, parameter) in enumerate(trained.named_parameters(), 1):
            await engine.update_weight(name, parameter.dtype, parameter.shape, empty_cache=count == len(names))
        sender.join()
        return before, engine.weights_digest()

    before, after = asyncio.run(sync())
    assert after == weights_digest(trained) != before
    assert [json.loads(line) for line in (tmp_path / "rollout_weights.jsonl").read_text().splitlines()] == [
        {"sync": 1, "sha256": after}]
