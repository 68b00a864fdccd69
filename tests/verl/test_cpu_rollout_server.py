"""The ``agentrl_hf`` rollout server in-process (not through Ray): batching, sampling, log-probs, weight updates."""

from __future__ import annotations

import asyncio

import pytest
import torch
from conftest import model_logprobs

from agentrl_verl.cpu.rollout import HFRolloutServer, sampling_of


@pytest.fixture()
def server(model_dir):
    return HFRolloutServer(str(model_dir), max_model_len=256, response_length=64, seed=0)


def generate_all(server, prompts, params):
    async def run():
        return await asyncio.gather(*[server.generate(f"r{i}", prompt_ids=p, sampling_params=params)
                                      for i, p in enumerate(prompts)])
    return asyncio.run(run())


def test_verls_sampling_params_become_the_cores():
    sampling = sampling_of({"temperature": 0.7, "top_p": 0.9, "top_k": -1, "max_tokens": 5}, 64)
    assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.max_new_tokens) == (0.7, 0.9, 0, 5)
    assert sampling_of({"temperature": 1.0, "top_k": 20}, 64).max_new_tokens == 64


def test_concurrent_requests_share_forward_passes_and_logprobs_are_at_the_sampling_temperature(server, tokenizer):
    prompts = [tokenizer.encode(text) for text in ("read", "test the code", "edit line 3", "submit", "a b c d")] * 2
    outputs = generate_all(server, prompts, {"temperature": 0.7, "top_p": 1.0, "top_k": -1, "max_tokens": 12})
    assert server.stats()["batches"] == 1
    assert server.stats()["forward_passes"] <= 12 < sum(len(o.token_ids) for o in outputs)
    for prompt, output in zip(prompts, outputs):
        assert 1 <= len(output.token_ids) <= 12 and output.stop_reason == "completed"
        stopped = output.token_ids[-1] == tokenizer.eos_token_id
        assert output.extra_fields["finish_reason"] == ("stop" if stopped else "length")
        expected = model_logprobs(server.model, prompt, output.token_ids, temperature=0.7)
        assert max(abs(a - b) for a, b in zip(expected, output.log_probs)) < 1e-4


def test_a_weight_update_changes_what_is_served_and_a_wrong_state_is_refused(server, tokenizer):
    prompt = tokenizer.encode("read the file")
    greedy = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "max_tokens": 8}
    before = generate_all(server, [prompt], greedy)[0]
    noise = torch.Generator().manual_seed(0)  # weights one update away, not N(0, 1) everywhere (float32-sane logits)
    state = {name: tensor + 0.05 * torch.randn(tensor.shape, generator=noise)
             for name, tensor in server.model.state_dict().items()}
    assert server.update_weights(state, global_steps=3) == 1
    after = generate_all(server, [prompt], greedy)[0]
    assert after.log_probs != before.log_probs and after.extra_fields["global_steps"] == 3
    assert server.stats()["reused_tokens"] == 0  # the cache read under the old weights is not served
    expected = model_logprobs(server.model, prompt, after.token_ids, temperature=1.0)
    assert max(abs(a - b) for a, b in zip(expected, after.log_probs)) < 1e-4
    again = generate_all(server, [prompt + after.token_ids + prompt], greedy)[0]
    assert server.stats()["reused_tokens"] == len(prompt) + len(after.token_ids) - 1
    expected = model_logprobs(server.model, prompt + after.token_ids + prompt, again.token_ids, temperature=1.0)
    assert max(abs(a - b) for a, b in zip(expected, again.log_probs)) < 1e-4
    with pytest.raises(ValueError, match="unexpected"):
        server.update_weights({"not.a.weight": torch.zeros(1)})
