"""Key/value caches for batched decoding: a running batch's cache in preallocated buffers, and a store of
finished sequences' caches that later prompts extending them start from.

:class:`SlotCache` keeps row ``r`` of the running batch in slot ``r`` of one buffer per layer. Every row
writes its next token at the same column (``width``); what a row has read sits in columns before it, in any
order, with the attention mask saying which (positions travel with the keys, so the order of columns does
not matter). A row that leaves hands its slot to the last row, a row that joins takes the next free slot:
decoding a step never copies the batch, where ``DynamicCache`` would concatenate it every step.

:class:`PrefixStore` keeps, per finished request, the cache of everything the model read (the prompt and all
sampled tokens but the last), so a multi-turn episode's next turn only reads its new tokens; an entry replaces the
entries it extends, so the store holds one entry per live conversation branch, not one per turn. Stored caches
hold for one set of weights: :func:`weights_fingerprint` changes when a parameter is replaced or changed in
place (an optimizer step, ``load_state_dict``), and the store empties itself then.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Hashable

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

LayerKV = tuple[torch.Tensor, torch.Tensor]
MIN_COLUMNS = 256


def weights_fingerprint(model: Any) -> Hashable | None:
    """Changes whenever a parameter is replaced or modified in place; ``None`` where that cannot be told
    (inference-mode tensors have no version counter)."""
    try:
        return tuple((p.data_ptr(), p._version) for p in model.parameters())
    except RuntimeError:
        return None


@dataclass
class StoredPrefix:
    """The cache of ``token_ids``: per layer ``(keys, values)`` of one row, every column read."""

    token_ids: list[int]
    tensors: list[LayerKV]

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.tensors)


class PrefixStore:
    """Least-recently-used caches of token sequences within ``capacity_bytes``; a prompt is served by the
    stored sequence it shares the longest start with."""

    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = capacity_bytes
        self.nbytes = 0
        self._entries: OrderedDict[int, StoredPrefix] = OrderedDict()
        self._next_key = 0
        self._fingerprint: Hashable | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def check_weights(self, model: Any) -> None:
        """Empty the store if the model's weights changed since the last check (always, where unknown)."""
        fingerprint = weights_fingerprint(model)
        if fingerprint is None or fingerprint != self._fingerprint:
            self.clear()
        self._fingerprint = fingerprint

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def add(self, prefix: StoredPrefix) -> None:
        """Keep ``prefix`` in place of the entries it extends (it serves every prompt they serve, as far), evicting
        the least recently used entries beyond the capacity: one entry per conversation branch, not one per turn."""
        if prefix.nbytes > self.capacity_bytes:
            return
        ids, size = prefix.token_ids, len(prefix.token_ids)
        for key in [key for key, entry in self._entries.items()
                    if len(entry.token_ids) <= size and ids[:len(entry.token_ids)] == entry.token_ids]:
            self.nbytes -= self._entries.pop(key).nbytes
        self._entries[self._next_key] = prefix
        self._next_key += 1
        self.nbytes += prefix.nbytes
        while self.nbytes > self.capacity_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.nbytes -= evicted.nbytes

    def longest_prefix(self, token_ids: list[int], limit: int) -> tuple[StoredPrefix | None, int]:
        """The entry sharing the longest start with ``token_ids`` and how many of its columns serve it (at
        most ``limit``; only whole entries, or entries cut at ``limit``, count)."""
        best_key, best = None, 0
        for key, entry in self._entries.items():
            length = min(len(entry.token_ids), limit)
            if length > best and token_ids[:length] == entry.token_ids[:length]:
                best_key, best = key, length
        if best_key is None:
            return None, 0
        self._entries.move_to_end(best_key)
        return self._entries[best_key], best


class SlotLayer(DynamicLayer):
    """One layer of a :class:`SlotCache` as the model sees it: rows ``[low, high)``, the columns before
    ``start``; ``update`` writes the new columns into the buffer from ``start`` on instead of concatenating."""

    def __init__(self, cache: SlotCache, index: int, low: int, high: int, start: int):
        super().__init__()
        self.cache, self.index, self.low, self.high, self.start = cache, index, low, high, start
        self.is_initialized = True
        if index < len(cache.keys):
            self.dtype, self.device = cache.keys[index].dtype, cache.keys[index].device
            self.keys = cache.keys[index][low:high, :, :start]
            self.values = cache.values[index][low:high, :, :start]
        else:
            self.keys = self.values = torch.empty(0)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> LayerKV:
        start, end = self.start, self.start + key_states.shape[-2]
        self.cache.allocate(self.index, key_states, end)
        self.dtype, self.device = key_states.dtype, key_states.device
        keys, values = self.cache.keys[self.index], self.cache.values[self.index]
        keys[self.low:self.high, :, start:end] = key_states
        values[self.low:self.high, :, start:end] = value_states
        self.keys, self.values = keys[self.low:self.high, :, :end], values[self.low:self.high, :, :end]
        return self.keys, self.values


class SlotCache:
    """The running batch's keys, values and attention mask: row ``r`` in slot ``r`` (``rows`` in use),
    ``width`` columns written so far, the mask zero from ``width`` on. ``grown`` and ``reclaimed`` count the
    times the buffers were enlarged and the rows' columns packed."""

    def __init__(self, max_rows: int, device: torch.device | str = "cpu"):
        self.max_rows = max_rows
        self.grown = 0
        self.reclaimed = 0
        self.rows = 0
        self.width = 0
        self.capacity = 0
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.mask = torch.zeros((0, 0), dtype=torch.long, device=device)

    def allocate(self, layer: int, like: torch.Tensor, columns: int) -> None:
        """Make room for ``columns`` columns, creating layer ``layer`` shaped like ``like`` (``(rows, heads,
        columns, head_dim)``) where it does not exist yet."""
        if columns > self.capacity:
            self._resize(self.rows, columns)
        if layer == len(self.keys):
            shape = (self.mask.shape[0], like.shape[1], self.capacity, like.shape[3])
            self.keys.append(like.new_zeros(shape))
            self.values.append(like.new_zeros(shape))

    def _resize(self, rows: int, columns: int) -> None:
        """Room for at least ``rows`` rows (at most ``max_rows``) and ``columns`` columns, each at least doubled
        where it grows."""
        held, capacity = self.mask.shape
        if rows <= held and columns <= capacity:
            return
        if rows > held:
            held = min(self.max_rows, max(rows, 2 * held, 8))
        if columns > capacity:
            capacity = max(MIN_COLUMNS, 2 * capacity, columns)

        def bigger(buffer: torch.Tensor) -> torch.Tensor:
            grown = buffer.new_zeros((held, buffer.shape[1], capacity, buffer.shape[3]))
            grown[:buffer.shape[0], :, :buffer.shape[2]] = buffer
            return grown

        self.keys = [bigger(k) for k in self.keys]
        self.values = [bigger(v) for v in self.values]
        mask = self.mask.new_zeros((held, capacity))
        mask[:self.mask.shape[0], :self.mask.shape[1]] = self.mask
        self.mask, self.capacity = mask, capacity
        self.grown += 1

    def view(self, low: int, high: int, start: int) -> DynamicCache:
        """Rows ``[low, high)`` as a ``DynamicCache`` the model reads (the columns before ``start``) and
        extends in place (from ``start`` on); the caller sets ``width`` after the forward pass."""
        cache = DynamicCache()
        cache.layers = [SlotLayer(self, index, low, high, start) for index in range(len(self.keys))]
        if not self.keys:
            created = itertools.count()
            cache.layer_class_to_replicate = lambda: SlotLayer(self, next(created), low, high, start)
        return cache

    def place(self, starts: list[tuple[StoredPrefix | None, int]], lengths: list[int], read: int) -> int:
        """Put new rows (cached starts of ``starts[i][1]`` columns, then ``lengths[i]`` tokens to read in a
        block of ``read`` columns) into the next free slots, so that their block ends at the batch's width
        (or past it, where their starts do not fit before it). Returns the block's first column: the new
        rows read their block in a forward pass over ``view(first new row, rows, column)``."""
        cached = max(length for _, length in starts)
        column = max(self.width - read, cached)
        if column + read > self.capacity:
            self._reclaim()
            column = max(self.width - read, cached)
        self._resize(self.rows + len(starts), column + read)
        low = self.rows
        for row, ((prefix, length), new) in enumerate(zip(starts, lengths), start=low):
            self.mask[row].zero_()
            self.mask[row, column - length:column] = 1
            self.mask[row, column + read - new:column + read] = 1
            if prefix is not None and length:
                for layer, (k, v) in enumerate(prefix.tensors):
                    self.allocate(layer, k, column + read)
                    self.keys[layer][row, :, column - length:column] = k[0, :, :length]
                    self.values[layer][row, :, column - length:column] = v[0, :, :length]
        self.rows += len(starts)
        return column

    def open_column(self) -> int:
        """Mark the next column read for every row (each row writes its next token there); returns it."""
        if self.width + 1 > self.capacity:
            self._reclaim()
            self._resize(self.rows, self.width + 1)
        self.mask[:self.rows, self.width] = 1
        return self.width

    def duplicate(self, source: int) -> None:
        """A new row, in the next free slot, holding what row ``source`` holds."""
        self._resize(self.rows + 1, self.width)
        self._copy_row(source, self.rows)
        self.rows += 1

    def _copy_row(self, source: int, target: int) -> None:
        for keys, values in zip(self.keys, self.values):
            keys[target, :, :self.width] = keys[source, :, :self.width]
            values[target, :, :self.width] = values[source, :, :self.width]
        self.mask[target] = self.mask[source]

    def remove(self, row: int) -> None:
        """Free ``row``'s slot; the last row moves into it."""
        last = self.rows - 1
        if row != last:
            self._copy_row(last, row)
        self.mask[last].zero_()
        self.rows = last
        if not self.rows:
            self.width = 0

    def sequence(self, row: int) -> list[LayerKV]:
        """``row``'s read columns, in order, as one row's cache (a copy)."""
        columns = self.mask[row, :self.width].nonzero().squeeze(-1)
        return [(k[row:row + 1].index_select(2, columns), v[row:row + 1].index_select(2, columns))
                for k, v in zip(self.keys, self.values)]

    def _reclaim(self) -> None:
        """Where the rows' read columns fill at most half the width (rows that joined after others and
        columns of rows since gone), move each row's to the right end of the narrowest width holding all."""
        counts = self.mask[:self.rows, :self.width].sum(dim=1)
        width = int(counts.max()) if self.rows else 0
        if 2 * width > self.width:
            return
        for row in range(self.rows):
            columns = self.mask[row, :self.width].nonzero().squeeze(-1)
            target = slice(width - len(columns), width)
            for keys, values in zip(self.keys, self.values):
                keys[row, :, target] = keys[row].index_select(1, columns)
                values[row, :, target] = values[row].index_select(1, columns)
            self.mask[row].zero_()
            self.mask[row, target] = 1
        self.width = width
        self.reclaimed += 1
