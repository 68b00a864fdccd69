"""Batched sampling from a Hugging Face causal LM behind the core's async ``generate`` contract.

Concurrent callers are gathered for a short window (or until ``max_batch`` are
waiting), left-padded and decoded together with a KV cache, so a step of many
concurrent episodes costs about as many forward passes as its longest turn has
tokens, not one per episode.

Log-probs: the log-prob of each sampled token is ``log_softmax(logits / T)`` at
that token over the whole vocabulary, *without* the top-k/top-p renormalisation,
because that is what TRL, verl and OpenRLHF recompute in training; with top-k
and top-p off this is exactly the sampling distribution. ``T <= 0`` means greedy
decoding, scored under ``log_softmax(logits)``.

Seeding: each request draws from its own ``torch.Generator`` whose seed is
derived from the generator's seed, the prompt ids and how many times this exact
prompt was seen before. A request's tokens therefore do not depend on which
other requests share its batch, and identical prompts in a group still get
different samples.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from transformers import DynamicCache

from agentrl_plugins.types import Generation, Sampling


def request_seed(seed: int, token_ids: Sequence[int], occurrence: int) -> int:
    """The seed of the ``occurrence``-th request (0-based) for the prompt ``token_ids``."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{seed}:{occurrence}:".encode())
    digest.update(",".join(map(str, token_ids)).encode())
    return int.from_bytes(digest.digest(), "little") & (2**63 - 1)


def filter_logprobs(logprobs: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Per-row top-k then top-p filtering of normalised log-probs; removed entries become ``-inf``."""
    vocab = logprobs.shape[-1]
    sorted_lp, order = logprobs.sort(dim=-1, descending=True)
    ranks = torch.arange(vocab, device=logprobs.device).expand_as(sorted_lp)
    k = torch.where(top_k > 0, top_k.clamp(max=vocab), torch.full_like(top_k, vocab))
    sorted_lp = sorted_lp.masked_fill(ranks >= k[:, None], float("-inf"))
    probs = sorted_lp.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs
    nucleus = (before > top_p[:, None]) & (ranks > 0) & (top_p[:, None] < 1)
    sorted_lp = sorted_lp.masked_fill(nucleus, float("-inf"))
    return torch.full_like(logprobs, float("-inf")).scatter(-1, order, sorted_lp)


def sample_tokens(logits: torch.Tensor, sampling: Sequence[Sampling],
                  generators: Sequence[torch.Generator]) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row of ``logits`` (B, V) and its log-prob under ``log_softmax(logits / T)``."""
    device = logits.device
    temperature = torch.tensor([s.temperature for s in sampling], dtype=logits.dtype, device=device)
    greedy = temperature <= 0
    scaled = logits / torch.where(greedy, torch.ones_like(temperature), temperature)[:, None]
    logprobs = scaled.log_softmax(dim=-1)
    top_k = torch.tensor([s.top_k for s in sampling], device=device)
    top_p = torch.tensor([s.top_p for s in sampling], dtype=logits.dtype, device=device)
    probs = filter_logprobs(logprobs, top_k, top_p).softmax(dim=-1)
    uniform = torch.stack([torch.rand((), generator=g, dtype=torch.float64) for g in generators]).to(device)
    cdf = probs.double().cumsum(dim=-1)
    last = probs.shape[-1] - 1 - (probs.flip(-1) > 0).long().argmax(dim=-1)
    drawn = torch.minimum(torch.searchsorted(cdf, uniform[:, None], right=True).squeeze(-1), last)
    tokens = torch.where(greedy, logits.argmax(dim=-1), drawn)
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


@dataclass
class _Request:
    token_ids: list[int]
    sampling: Sampling
    generator: torch.Generator
    future: asyncio.Future


class HFGenerator:
    """``await gen(token_ids, sampling) -> Generation``; concurrent calls share batched forward passes.

    ``forward_passes`` counts model forward calls and ``batches`` the decoding loops run.
    """

    def __init__(self, model: Any, eos_token_id: int, pad_token_id: int | None = None, seed: int = 0,
                 max_batch: int = 64, window_s: float = 0.005):
        self.model = model
        self.eos_token_id = eos_token_id
        self.pad_token_id = eos_token_id if pad_token_id is None else pad_token_id
        self.seed = seed
        self.max_batch = max_batch
        self.window_s = window_s
        self.forward_passes = 0
        self.batches = 0
        self._seen: Counter[str] = Counter()
        self._pending: list[_Request] = []
        self._worker: asyncio.Task | None = None
        parameters = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in parameters else "past_key_values"

    def request_generator(self, token_ids: Sequence[int]) -> torch.Generator:
        """The generator for the next request with this prompt (advances the prompt's occurrence count)."""
        key = hashlib.blake2b(",".join(map(str, token_ids)).encode(), digest_size=16).hexdigest()
        occurrence = self._seen[key]
        self._seen[key] += 1
        return torch.Generator().manual_seed(request_seed(self.seed, token_ids, occurrence))

    async def __call__(self, token_ids: list[int], sampling: Sampling) -> Generation:
        loop = asyncio.get_running_loop()
        request = _Request(list(token_ids), sampling, self.request_generator(token_ids), loop.create_future())
        self._pending.append(request)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await request.future

    async def _drain(self) -> None:
        while self._pending:
            if len(self._pending) < self.max_batch:
                await asyncio.sleep(self.window_s)
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
            try:
                results = await asyncio.to_thread(self.generate_batch, [r.token_ids for r in batch],
                                                  [r.sampling for r in batch], [r.generator for r in batch])
            except Exception as error:
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(error)
                continue
            for request, result in zip(batch, results):
                if not request.future.done():
                    request.future.set_result(result)

    @torch.no_grad()
    def generate_batch(self, prompts: Sequence[Sequence[int]], sampling: Sequence[Sampling],
                       generators: Sequence[torch.Generator]) -> list[Generation]:
        """Decode all ``prompts`` together (left-padded, KV cache); synchronous."""
        device = next(self.model.parameters()).device
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long, device=device)
        attention = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
            attention[row, width - len(prompt):] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        limits = [s.max_new_tokens for s in sampling]
        tokens: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        reasons = ["length"] * len(prompts)
        active = [limit > 0 for limit in limits]
        cache = DynamicCache()
        self.batches += 1
        while any(active):
            out = self.model(input_ids=ids, attention_mask=attention, position_ids=positions,
                             use_cache=True, logits_to_keep=1, **{self._cache_kwarg: cache})
            self.forward_passes += 1
            drawn, scores = sample_tokens(out.logits[:, -1, :].float(), sampling, generators)
            for row in range(len(prompts)):
                if not active[row]:
                    continue
                token = int(drawn[row])
                tokens[row].append(token)
                logprobs[row].append(float(scores[row]))
                if token == self.eos_token_id:
                    reasons[row], active[row] = "stop", False
                elif len(tokens[row]) >= limits[row]:
                    active[row] = False
            ids = drawn[:, None]
            attention = torch.cat([attention, attention.new_ones((len(prompts), 1))], dim=-1)
            positions = positions[:, -1:] + 1
        return [Generation(t, lp, r) for t, lp, r in zip(tokens, logprobs, reasons)]
