"""Batched sampling from a Hugging Face causal LM behind the core's async ``generate`` contract.

Concurrent callers decode together with a KV cache (continuous batching: a row
that finishes hands its slot to the next waiting request at once), so a step of
many concurrent episodes costs about as many forward passes as its longest
episode has tokens, not one per episode. A multi-turn episode's next prompt
extends what the model has already read; it starts from that stored cache (see
:mod:`agentrl_plugins.kv_cache`) and only its new tokens are read.

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
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from transformers import DynamicCache

from agentrl_plugins.kv_cache import PrefixStore, SlotCache, StoredPrefix
from agentrl_plugins.types import Generation, Sampling


def request_seed(seed: int, token_ids: Sequence[int], occurrence: int) -> int:
    """The seed of the ``occurrence``-th request (0-based) for the prompt ``token_ids``."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{seed}:{occurrence}:".encode())
    digest.update(",".join(map(str, token_ids)).encode())
    return int.from_bytes(digest.digest(), "little") & (2**63 - 1)


def weights_seed(seed: int, weights: str) -> int:
    """The seed of a run seeded ``seed`` once it serves the weights named ``weights`` (:meth:`HFGenerator.serve`)."""
    digest = hashlib.blake2b(f"{seed}:weights:{weights}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class RequestSeeds:
    """Each request's seed for a run seeded ``seed``: :func:`request_seed` of its prompt and of how many requests
    for that prompt came before it, so a request's draw does not depend on what shares its batch."""

    def __init__(self, seed: int):
        self.seed = seed
        self._seen: Counter[str] = Counter()

    def next(self, token_ids: Sequence[int]) -> int:
        key = hashlib.blake2b(",".join(map(str, token_ids)).encode(), digest_size=16).hexdigest()
        occurrence = self._seen[key]
        self._seen[key] += 1
        return request_seed(self.seed, token_ids, occurrence)


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
    future: asyncio.Future | None = None
    result: Generation | None = None


@dataclass
class _Row:
    """A request being decoded: what it has sampled so far (the last token is not read yet)."""

    request: _Request
    tokens: list[int]
    logprobs: list[float]

    @property
    def done(self) -> bool:
        return len(self.tokens) >= self.request.sampling.max_new_tokens

    def finish(self, reason: str) -> _Request:
        self.request.result = Generation(self.tokens, self.logprobs, reason)
        return self.request


class HFGenerator:
    """``await gen(token_ids, sampling) -> Generation``; concurrent calls share batched forward passes.

    Up to ``max_batch`` rows decode together. With ``refill`` a finished row's slot takes the next waiting
    request at once (continuous batching); without it a new batch starts when its last row finishes. With
    reuse on (``prefix_cache_bytes`` > 0, the store's bound), a prompt that extends a finished request's
    sequence starts from that sequence's stored cache, and identical prompts, or the start that new prompts
    share, are read once. Counters: ``forward_passes`` (model calls), ``batches`` (admission rounds),
    ``prefill_tokens`` (prompt tokens the model read) and ``reused_tokens`` (served from a cache instead).
    """

    def __init__(self, model: Any, eos_token_id: int, pad_token_id: int | None = None, seed: int = 0,
                 max_batch: int = 64, window_s: float = 0.005, refill: bool = True,
                 prefix_cache_bytes: int = 2**30):
        self.model = model
        self.eos_token_id = eos_token_id
        self.pad_token_id = eos_token_id if pad_token_id is None else pad_token_id
        self.max_batch = max_batch
        self.window_s = window_s
        self.refill = refill
        self.prefixes = PrefixStore(prefix_cache_bytes)
        self.forward_passes = 0
        self.batches = 0
        self.prefill_tokens = 0
        self.reused_tokens = 0
        self.seed = seed
        self.seeds = RequestSeeds(seed)
        self._pending: list[_Request] = []
        self._worker: asyncio.Task | None = None
        self._rows: list[_Row] = []
        self._slots = SlotCache(max_batch, next(model.parameters()).device)
        parameters = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in parameters else "past_key_values"

    def serve(self, weights: str | None) -> None:
        """New weights are served: from now on requests draw with the seed of the run and of ``weights`` (a name for
        them: a step, a digest; None for the starting weights, the run's seed), each prompt counted afresh. The
        draws follow the weights served, not how many syncs came before, so a run resumed from a checkpoint draws
        what the run never stopped drew."""
        self.seeds = RequestSeeds(self.seed if weights is None else weights_seed(self.seed, weights))

    def request_generator(self, token_ids: Sequence[int]) -> torch.Generator:
        """The generator for the next request with this prompt (advances the prompt's occurrence count)."""
        return torch.Generator().manual_seed(self.seeds.next(token_ids))

    async def __call__(self, token_ids: list[int], sampling: Sampling) -> Generation:
        if not token_ids:
            raise ValueError("generate needs at least one prompt token")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Generation] = loop.create_future()
        self._pending.append(_Request(list(token_ids), sampling, self.request_generator(token_ids), future))
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending or self._rows:
            if not self._rows and len(self._pending) < self.max_batch:
                await asyncio.sleep(self.window_s)
            admitted: list[_Request] = []
            if self.refill or not self._rows:
                room = self.max_batch - len(self._rows)
                admitted, self._pending = self._pending[:room], self._pending[room:]
            working = [row.request for row in self._rows] + admitted
            try:
                finished = await asyncio.to_thread(self._advance, admitted)
            except Exception as error:
                self._rows, self._slots = [], SlotCache(self.max_batch, self._slots.mask.device)
                finished = []
                for request in working:
                    if request.future is not None and not request.future.done():
                        request.future.set_exception(error)
            for request in finished:
                if request.future is not None and not request.future.done():
                    request.future.set_result(request.result)

    def generate_batch(self, prompts: Sequence[Sequence[int]], sampling: Sequence[Sampling],
                       generators: Sequence[torch.Generator]) -> list[Generation]:
        """Decode ``prompts`` (``max_batch`` at a time) until each stops; synchronous, and only while no
        asynchronous request is being decoded."""
        if self._rows:
            raise RuntimeError("generate_batch cannot run while asynchronous requests are being decoded")
        requests = [_Request(list(p), s, g) for p, s, g in zip(prompts, sampling, generators)]
        for start in range(0, len(requests), self.max_batch):
            self._advance(requests[start:start + self.max_batch])
            while self._rows:
                self._advance([])
        return [request.result for request in requests if request.result is not None]

    @torch.no_grad()
    def _advance(self, admitted: list[_Request]) -> list[_Request]:
        """Decode one token for every row, then admit ``admitted`` (reading their prompts and sampling their
        first token); returns the requests that finished."""
        for index in reversed(range(len(self._rows))):
            future = self._rows[index].request.future
            if future is not None and future.cancelled():
                self._remove(index)
        if self._rows:
            self._decode()
        finished = []
        for request in admitted:
            if request.sampling.max_new_tokens <= 0:
                request.result = Generation([], [], "length")
                finished.append(request)
        admitted = [request for request in admitted if request.sampling.max_new_tokens > 0]
        if admitted:
            self._admit(admitted)
        return finished + self._retire()

    def _forward(self, ids: torch.Tensor, positions: torch.Tensor, low: int, high: int,
                 start: int) -> torch.Tensor:
        """Rows ``[low, high)`` read ``ids`` into the columns from ``start`` on, which moves the batch's width
        past them; the last position's logits."""
        end = start + ids.shape[1]
        out = self.model(input_ids=ids, attention_mask=self._slots.mask[low:high, :end], position_ids=positions,
                         use_cache=True, logits_to_keep=1, **{self._cache_kwarg: self._slots.view(low, high, start)})
        self.forward_passes += 1
        self._slots.width = end
        return out.logits[:, -1, :].float()

    def _decode(self) -> None:
        """Read each row's last sampled token and sample its next one."""
        count = len(self._rows)
        start = self._slots.open_column()
        device = self._slots.mask.device
        ids = torch.tensor([[row.tokens[-1]] for row in self._rows], device=device)
        positions = torch.tensor([[len(row.request.token_ids) + len(row.tokens) - 1] for row in self._rows],
                                 device=device)
        logits = self._forward(ids, positions, 0, count, start)
        self._append(self._rows, logits)

    def _append(self, rows: list[_Row], logits: torch.Tensor) -> None:
        drawn, scores = sample_tokens(logits, [row.request.sampling for row in rows],
                                      [row.request.generator for row in rows])
        for row, token, score in zip(rows, drawn.tolist(), scores.tolist()):
            row.tokens.append(token)
            row.logprobs.append(score)

    def _admit(self, requests: list[_Request]) -> None:
        """Read the new prompts in one forward pass (each after its longest cached start; with reuse on,
        identical ones once), sample their first tokens and add them to the batch."""
        self.batches += 1
        self.prefixes.check_weights(self.model)
        if self.prefixes.capacity_bytes > 0:
            unique: dict[tuple[int, ...], int] = {}
            owner = [unique.setdefault(tuple(r.token_ids), len(unique)) for r in requests]
            prompts = [list(key) for key in unique]
            self._share_common_start(prompts)
        else:
            owner, prompts = list(range(len(requests))), [r.token_ids for r in requests]
        starts = [self.prefixes.longest_prefix(p, len(p) - 1) for p in prompts]
        lengths = [len(p) - length for p, (_, length) in zip(prompts, starts)]
        read = max(lengths)
        low = self._slots.rows
        column = self._slots.place(starts, lengths, read)
        device = self._slots.mask.device
        ids = torch.full((len(prompts), read), self.pad_token_id, dtype=torch.long, device=device)
        positions = torch.zeros((len(prompts), read), dtype=torch.long, device=device)
        for row, (prompt, new) in enumerate(zip(prompts, lengths)):
            ids[row, read - new:] = torch.tensor(prompt[len(prompt) - new:], dtype=torch.long)
            positions[row, read - new:] = torch.arange(len(prompt) - new, len(prompt))
        logits = self._forward(ids, positions, low, low + len(prompts), column)
        self.prefill_tokens += sum(lengths)
        self.reused_tokens += sum(len(r.token_ids) for r in requests) - sum(lengths)
        readers = [owner.index(u) for u in range(len(prompts))]
        copies = sorted(set(range(len(requests))) - set(readers))
        for index in copies:
            self._slots.duplicate(low + owner[index])
        members = readers + copies
        rows = [_Row(requests[i], [], []) for i in members]
        self._append(rows, logits[torch.tensor([owner[i] for i in members], device=logits.device)])
        self._rows += rows

    def _share_common_start(self, prompts: list[list[int]]) -> None:
        """Read the start that several new prompts share once, into the prefix store, where no stored cache
        covers it."""
        fresh = [p for p in prompts if self.prefixes.longest_prefix(p, len(p) - 1)[1] == 0]
        if len(fresh) < 2:
            return
        shared = min(len(os.path.commonprefix(fresh)), min(len(p) for p in fresh) - 1)
        if shared < 2:
            return
        cache = DynamicCache()
        device = self._slots.mask.device
        self.model(input_ids=torch.tensor([fresh[0][:shared]], device=device), use_cache=True, logits_to_keep=1,
                   **{self._cache_kwarg: cache})
        self.forward_passes += 1
        self.prefill_tokens += shared
        self.reused_tokens -= shared
        self.prefixes.add(StoredPrefix(fresh[0][:shared], [(layer.keys, layer.values) for layer in cache.layers]))

    def _retire(self) -> list[_Request]:
        """Take the rows that sampled EOS or reached their token limit out of the batch, storing each one's
        cache as a prefix for later prompts."""
        finished = []
        for index in reversed(range(len(self._rows))):
            row = self._rows[index]
            stopped = row.tokens[-1] == self.eos_token_id
            if not (stopped or row.done):
                continue
            if self.prefixes.capacity_bytes > 0:
                read = row.request.token_ids + row.tokens[:-1]
                self.prefixes.add(StoredPrefix(read, self._slots.sequence(index)))
            finished.append(row.finish("stop" if stopped else "length"))
            self._remove(index)
        return finished[::-1]

    def _remove(self, index: int) -> None:
        """Free row ``index``'s slot (the last row moves into it, in the slots and in ``_rows``)."""
        self._slots.remove(index)
        last = self._rows.pop()
        if index < len(self._rows):
            self._rows[index] = last
