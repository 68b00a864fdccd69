"""HFGenerator: the core ``generate`` contract, batching across concurrent callers, exact log-probs."""

from __future__ import annotations

import asyncio

import pytest
import torch

from agentrl_plugins.hf_sampler import HFGenerator, filter_logprobs, request_seed, sample_tokens
from agentrl_plugins.types import Sampling

NEVER = -1


def make(model, seed: int = 0, **options) -> HFGenerator:
    """A generator whose EOS never comes up, so every request runs to ``max_new_tokens``."""
    return HFGenerator(model, eos_token_id=options.pop("eos_token_id", NEVER), pad_token_id=0, seed=seed, **options)


def prompts(n: int) -> list[list[int]]:
    """``n`` prompts of different lengths (so batches are left-padded)."""
    g = torch.Generator().manual_seed(1)
    return [torch.randint(7, 200, (20 + 7 * i,), generator=g).tolist() for i in range(n)]


def reference(model, prompt: list[int], sampling: Sampling, seed: int) -> tuple[list[int], list[float]]:
    """Unbatched sampling without a KV cache: one full forward pass over the whole sequence per token."""
    generator = torch.Generator().manual_seed(request_seed(seed, prompt, 0))
    ids, scores = list(prompt), []
    with torch.no_grad():
        for _ in range(sampling.max_new_tokens):
            logits = model(input_ids=torch.tensor([ids])).logits[:, -1, :]
            token, score = sample_tokens(logits, [sampling], [generator])
            ids.append(int(token))
            scores.append(float(score))
    return ids[len(prompt):], scores


async def test_one_request_equals_unbatched_reference(random_model):
    sampling = Sampling(temperature=1.0, max_new_tokens=12)
    prompt = prompts(1)[0]
    out = await make(random_model, seed=3)(prompt, sampling)
    tokens, scores = reference(random_model, prompt, sampling, seed=3)
    assert out.token_ids == tokens
    assert out.logprobs == pytest.approx(scores, abs=1e-5)
    assert out.finish_reason == "length"


async def test_a_request_samples_the_same_alone_or_in_a_batch(random_model):
    sampling = Sampling(temperature=1.0, max_new_tokens=10)
    batch = prompts(8)
    alone = await make(random_model, seed=5)(batch[3], sampling)
    generate = make(random_model, seed=5)
    together = await asyncio.gather(*[generate(p, sampling) for p in batch])
    assert generate.batches == 1
    assert together[3].token_ids == alone.token_ids
    assert together[3].logprobs == pytest.approx(alone.logprobs, abs=1e-5)


async def test_logprobs_equal_a_full_forward_at_the_sampling_temperature(random_model):
    temperature = 0.7
    sampling = Sampling(temperature=temperature, top_k=50, top_p=0.9, max_new_tokens=9)
    generate = make(random_model)
    batch = prompts(5)
    outs = await asyncio.gather(*[generate(p, sampling) for p in batch])
    for prompt, out in zip(batch, outs):
        ids = torch.tensor([prompt + out.token_ids])
        with torch.no_grad():
            logp = (random_model(input_ids=ids).logits[0, :-1] / temperature).log_softmax(-1)
        expected = logp[len(prompt) - 1:].gather(-1, torch.tensor(out.token_ids)[:, None]).squeeze(-1)
        assert out.logprobs == pytest.approx(expected.tolist(), abs=1e-5)


async def test_concurrent_requests_share_forward_passes(random_model):
    sampling = Sampling(max_new_tokens=16)
    single = make(random_model)
    await single(prompts(1)[0], sampling)
    many = make(random_model)
    outs = await asyncio.gather(*[many(p, sampling) for p in prompts(8)])
    print(f"forward passes: 1 request {single.forward_passes}, 8 concurrent requests {many.forward_passes}")
    assert single.forward_passes == many.forward_passes == 16
    assert many.batches == 1
    assert all(len(out.token_ids) == 16 for out in outs)


async def test_max_batch_splits_the_queue(random_model):
    generate = make(random_model, max_batch=3)
    await asyncio.gather(*[generate(p, Sampling(max_new_tokens=4)) for p in prompts(7)])
    assert generate.batches == 3 and generate.forward_passes == 12


def test_stops_at_eos_or_at_max_new_tokens(random_model):
    greedy = Sampling(temperature=0.0, max_new_tokens=8)
    prompt = prompts(1)[0]
    free = make(random_model).generate_batch([prompt], [greedy], [torch.Generator()])[0]
    assert free.finish_reason == "length" and len(free.token_ids) == 8
    eos = free.token_ids[3]
    stopped = make(random_model, eos_token_id=eos).generate_batch([prompt], [greedy], [torch.Generator()])[0]
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[: free.token_ids.index(eos) + 1]
    generate = make(random_model)
    empty = generate.generate_batch([prompt], [Sampling(max_new_tokens=0)], [torch.Generator()])[0]
    assert empty.token_ids == [] and empty.finish_reason == "length" and generate.forward_passes == 0


def test_top_k_and_top_p_filter_but_log_probs_are_not_renormalised():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0], [2.0, 1.0, 0.5, -1.0]])
    logp = logits.log_softmax(-1)
    kept = filter_logprobs(logp, torch.tensor([2, -1]), torch.tensor([1.0, 0.7]))
    assert torch.isfinite(kept).tolist() == [[True, True, False, False], [True, True, False, False]]
    tokens, scores = sample_tokens(logits, [Sampling(top_k=1), Sampling(top_k=1)],
                                   [torch.Generator().manual_seed(i) for i in range(2)])
    assert tokens.tolist() == [0, 0]
    assert scores.tolist() == pytest.approx([logp[0, 0].item()] * 2)
