"""HFGenerator: the core ``generate`` contract, batching across concurrent callers, exact log-probs; across
turns, prompts that extend a finished request start from its cache, identical and shared-start prompts are
read once and finished rows hand their slot on, all token for token the sampling of a full forward pass per
token (log-probs within float tolerance)."""

from __future__ import annotations

import asyncio
from typing import Sequence

import pytest
import torch

from agentrl_plugins.hf_sampler import HFGenerator, filter_logprobs, request_seed, sample_tokens
from agentrl_plugins.kv_cache import PrefixStore, StoredPrefix
from agentrl_plugins.types import Generation, Sampling

NEVER = -1


def make(model, seed: int = 0, **options) -> HFGenerator:
    """A generator whose EOS never comes up, so every request runs to ``max_new_tokens``."""
    return HFGenerator(model, eos_token_id=options.pop("eos_token_id", NEVER), pad_token_id=0, seed=seed, **options)


def prompts(n: int) -> list[list[int]]:
    """``n`` prompts of different lengths (so batches are left-padded)."""
    g = torch.Generator().manual_seed(1)
    return [torch.randint(7, 200, (20 + 7 * i,), generator=g).tolist() for i in range(n)]


def reference(model, prompt: list[int], sampling: Sampling, seed: int,
              occurrence: int = 0) -> tuple[list[int], list[float]]:
    """Unbatched sampling without a KV cache: one full forward pass over the whole sequence per token."""
    generator = torch.Generator().manual_seed(request_seed(seed, prompt, occurrence))
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


async def test_served_weights_name_the_draws_not_the_requests_before_them(random_model):
    """After ``serve``, a prompt draws as a generator that served those weights from the start would (a resumed
    run's engine, whose first sync is its checkpoint's), whatever came before; None is the run's own seed."""
    sampling = Sampling(temperature=1.0, max_new_tokens=8)
    prompt = prompts(1)[0]
    long_running, resumed = make(random_model, seed=2), make(random_model, seed=2)
    first = [await long_running(prompt, sampling) for _ in range(3)]
    long_running.serve("step 1")
    resumed.serve("step 1")
    after = [(await long_running(prompt, sampling)).token_ids for _ in range(2)]
    assert after == [(await resumed(prompt, sampling)).token_ids for _ in range(2)]
    assert after[0] != first[0].token_ids, "the weights' draws are not the starting seed's"
    long_running.serve(None)
    assert (await long_running(prompt, sampling)).token_ids == first[0].token_ids


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


SAMPLING = Sampling(temperature=1.0, max_new_tokens=6)


def observation(episode: int, turn: int) -> list[int]:
    g = torch.Generator().manual_seed(100 * episode + turn)
    return torch.randint(7, 200, (5 + 3 * turn,), generator=g).tolist()


async def play(generate: HFGenerator, starts: list[list[int]], turns: int,
               sampling: Sequence[Sampling] | None = None) -> list[list[tuple[list[int], Generation]]]:
    """Concurrent episodes: each turn's prompt is the last prompt, its generation and a new observation."""

    async def episode(index: int, history: list[int]) -> list[tuple[list[int], Generation]]:
        calls = []
        for turn in range(turns):
            out = await generate(history, sampling[index] if sampling else SAMPLING)
            calls.append((history, out))
            history = history + out.token_ids + observation(index, turn)
        return calls

    return await asyncio.gather(*[episode(i, s) for i, s in enumerate(starts)])


def assert_reference(model, calls, seed: int, sampling: Sampling = SAMPLING) -> None:
    for prompt, out in calls:
        tokens, scores = reference(model, prompt, sampling, seed)
        assert out.token_ids == tokens
        assert out.logprobs == pytest.approx(scores, abs=1e-5)


async def test_later_turns_read_only_their_new_tokens(random_model):
    generate = make(random_model, seed=2)
    episodes = await play(generate, prompts(6), turns=3)
    for calls in episodes:
        assert_reference(random_model, calls, seed=2)
    first_turns = sum(len(p) for p in prompts(6))
    later_turns = sum(1 + len(observation(i, t)) for i, calls in enumerate(episodes) for t in range(len(calls) - 1))
    assert generate.prefill_tokens == first_turns + later_turns
    every_prompt = sum(len(p) for calls in episodes for p, _ in calls)
    assert generate.reused_tokens == every_prompt - generate.prefill_tokens
    print(f"prompt tokens {every_prompt}, read {generate.prefill_tokens}, reused {generate.reused_tokens}")


async def test_the_store_holds_one_entry_per_conversation_not_one_per_turn(random_model):
    """8 concurrent 12-turn episodes: the store ends with one entry each, its bytes the live context's (each
    episode's read tokens once), and the same tokens and log-probs as without the store."""
    stored, plain = make(random_model, seed=7), make(random_model, seed=7, prefix_cache_bytes=0)
    episodes = await play(stored, prompts(8), turns=12)
    assert [[out.token_ids for _, out in calls] for calls in episodes] == [
        [out.token_ids for _, out in calls] for calls in await play(plain, prompts(8), turns=12)]
    per_token = stored.prefixes.nbytes / sum(len(entry.token_ids) for entry in stored.prefixes._entries.values())
    live = sum(len(calls[-1][0]) + len(calls[-1][1].token_ids) - 1 for calls in episodes) * per_token
    assert len(stored.prefixes) == 8 and stored.prefixes.nbytes <= 1.2 * live


async def test_long_histories_grow_the_batch_cache_and_pack_it(random_model):
    generate = make(random_model, seed=9, max_batch=3)
    starts = [p * 3 for p in prompts(7)]
    lengths = [Sampling(max_new_tokens=2 + (i * 5) % 7) for i in range(7)]
    episodes = await play(generate, starts, turns=8, sampling=lengths)
    for calls, sampling in zip(episodes, lengths):
        assert_reference(random_model, calls, seed=9, sampling=sampling)
    print(f"batch cache widened {generate._slots.grown} times, packed {generate._slots.reclaimed} times")
    assert generate._slots.grown >= 2 and generate._slots.reclaimed >= 1


async def test_without_the_store_every_prompt_is_read_whole(random_model):
    generate = make(random_model, seed=2, prefix_cache_bytes=0)
    episodes = await play(generate, prompts(4), turns=2)
    for calls in episodes:
        assert_reference(random_model, calls, seed=2)
    assert generate.reused_tokens == 0
    assert generate.prefill_tokens == sum(len(p) for calls in episodes for p, _ in calls)


async def test_identical_prompts_are_read_once_and_sampled_apart(random_model):
    generate = make(random_model, seed=4)
    prompt = prompts(1)[0]
    outs = await asyncio.gather(*[generate(prompt, SAMPLING) for _ in range(8)])
    assert generate.prefill_tokens == len(prompt) and generate.forward_passes == SAMPLING.max_new_tokens
    assert len({tuple(out.token_ids) for out in outs}) > 1
    for occurrence, out in enumerate(outs):
        tokens, scores = reference(random_model, prompt, SAMPLING, seed=4, occurrence=occurrence)
        assert out.token_ids == tokens
        assert out.logprobs == pytest.approx(scores, abs=1e-5)


async def test_a_start_shared_by_new_prompts_is_read_once(random_model):
    generate = make(random_model, seed=6)
    system = prompts(3)[2]
    tails = prompts(4)
    batch = [system + tail for tail in tails]
    outs = await asyncio.gather(*[generate(p, SAMPLING) for p in batch])
    assert generate.prefill_tokens == len(system) + sum(len(t) for t in tails)
    assert_reference(random_model, list(zip(batch, outs)), seed=6)


async def test_a_finished_row_hands_its_slot_on(random_model):
    lengths = [2, 9, 3, 9, 4, 5]
    batch = prompts(len(lengths))

    async def run(refill: bool) -> tuple[HFGenerator, list[Generation]]:
        generate = make(random_model, seed=8, max_batch=2, refill=refill)
        outs = await asyncio.gather(*[generate(p, Sampling(max_new_tokens=n)) for p, n in zip(batch, lengths)])
        return generate, outs

    continuous, outs = await run(refill=True)
    static, static_outs = await run(refill=False)
    for prompt, n, out, static_out in zip(batch, lengths, outs, static_outs):
        tokens, scores = reference(random_model, prompt, Sampling(max_new_tokens=n), seed=8)
        assert out.token_ids == static_out.token_ids == tokens
        assert out.logprobs == pytest.approx(scores, abs=1e-5)
    assert static.forward_passes == 9 + 9 + 5
    assert continuous.forward_passes < static.forward_passes
    print(f"forward passes: static {static.forward_passes}, continuous {continuous.forward_passes}")


async def test_rows_finishing_at_eos_leave_while_others_decode(random_model):
    greedy = Sampling(temperature=0.0, max_new_tokens=10)
    batch = prompts(5)
    free = make(random_model).generate_batch(batch, [greedy] * 5, [torch.Generator() for _ in batch])
    eos = free[2].token_ids[1]
    generate = make(random_model, eos_token_id=eos)
    outs = await asyncio.gather(*[generate(p, greedy) for p in batch])
    for out, unstopped in zip(outs, free):
        if eos in unstopped.token_ids:
            assert out.finish_reason == "stop"
            assert out.token_ids == unstopped.token_ids[: unstopped.token_ids.index(eos) + 1]
        else:
            assert out.finish_reason == "length" and out.token_ids == unstopped.token_ids


async def test_changed_weights_empty_the_store(tokenizer):
    from agentrl_plugins.local_models import build_model

    model = build_model(tokenizer, seed=1).eval()
    generate = make(model, seed=3)
    first = await play(generate, prompts(2), turns=1)
    assert len(generate.prefixes) > 0
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    followup = [calls[0][0] + calls[0][1].token_ids + observation(i, 0) for i, calls in enumerate(first)]
    reused = generate.reused_tokens
    outs = await asyncio.gather(*[generate(p, SAMPLING) for p in followup])
    assert generate.reused_tokens == reused
    assert_reference(model, list(zip(followup, outs)), seed=3)


async def test_a_cancelled_request_leaves_the_batch(random_model):
    generate = make(random_model, seed=1)
    batch = prompts(3)
    slow = asyncio.ensure_future(generate(batch[0], Sampling(max_new_tokens=10_000)))
    others = asyncio.gather(*[generate(p, SAMPLING) for p in batch[1:]])
    outs = await others
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    await asyncio.wait_for(generate._worker, timeout=10)
    assert generate._rows == [] and len(outs) == 2
    assert_reference(random_model, list(zip(batch[1:], outs)), seed=1)


def test_the_store_keeps_the_longest_start_within_its_capacity():
    def entry(ids: list[int]) -> StoredPrefix:
        return StoredPrefix(ids, [(torch.zeros(1, 1, len(ids), 4), torch.zeros(1, 1, len(ids), 4))])

    store = PrefixStore(capacity_bytes=351)  # each entry holds 32 bytes a token
    store.add(entry([1, 2, 3]))
    store.add(entry([1, 2, 3, 4, 5]))
    assert store.longest_prefix([1, 2, 3, 4, 5, 6], limit=5)[1] == 5
    assert store.longest_prefix([1, 2, 3, 4, 5], limit=4)[1] == 4
    assert store.longest_prefix([1, 2, 9], limit=2)[1] == 2
    assert store.longest_prefix([7, 2, 3], limit=2) == (None, 0)
    assert len(store) == 1 and store.nbytes == 5 * 32  # [1..5] replaced [1, 2, 3], which it extends
    store.add(entry([1, 2, 7]))  # a branch: both stay
    assert len(store) == 2 and store.longest_prefix([1, 2, 7, 7], limit=3)[1] == 3
    store.add(entry([8, 8, 8, 8]))  # evicts [1..5], used less recently than [1, 2, 7]
    assert len(store) == 2 and store.nbytes <= store.capacity_bytes
    assert store.longest_prefix([1, 2, 3, 4, 5, 6], limit=5) == (None, 0)
    assert store.longest_prefix([1, 2, 7, 1], limit=3)[1] == 3
