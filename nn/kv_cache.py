"""`KVCache`: the keys and values of earlier steps, so that decoding one token costs one step.

One cache serves a whole model: each attention module stores its own entry, keyed by the module
itself (so a model needs no layer indices). Self-attention entries grow by the new steps on every
call; a cross-attention entry holds the encoder's projected K/V, computed on the first call and
reused afterwards.

    cache = nn.KVCache()
    logits = model(prompt, cache=cache)          # fills the cache
    for _ in range(n):
        next_id = logits[:, -1].argmax(-1, keepdim=True)
        logits = model(next_id, cache=cache)     # positions continue at cache.seq_len

Growth: a self-attention entry preallocates its buffers along T and doubles their capacity when
full, as a dynamic array, so that appending T tokens one at a time copies O(T) numbers in all
(concatenating every step would copy O(T²)). `append` returns views of the filled part.
"""

from __future__ import annotations

import numpy as np

from tinytensor.backend import get_array_module
from tinytensor.function import is_grad_enabled
from tinytensor.ops import cat
from tinytensor.tensor import Tensor

MIN_CAPACITY = 16  # steps reserved by a new entry at least (one prompt, then a few decode steps)


def _tracks_graph(*tensors) -> bool:
    return is_grad_enabled() and any(t.requires_grad for t in tensors)


class GrowingKV:
    """One self-attention layer's keys and values (B, H_kv, T, d): buffers with spare capacity
    along T, of which the first `length` steps are filled.

    Iterating gives the filled (k, v) as Tensors (views of the buffers, no copy).

    NOTE: the buffers hold plain arrays, outside the autograd graph. When a call records a graph
    (grad enabled and k/v requiring grad, e.g. decoding in training mode), the entry keeps
    differentiable Tensors joined with `cat` instead, so that gradients still reach earlier
    steps; it returns to buffers at the next call that records nothing.
    """

    def __init__(self):
        self.k_buffer = self.v_buffer = None  # (B, H_kv, capacity, d) arrays
        self.length = 0
        self.graph = None  # (k, v) Tensors while a graph is recorded, else None
        self.reallocations = 0  # buffer allocations so far (the first one included)

    @property
    def capacity(self) -> int:
        return 0 if self.k_buffer is None else self.k_buffer.shape[-2]

    def views(self):
        if self.graph is not None:
            return self.graph
        n = self.length
        k = Tensor._wrap(self.k_buffer[:, :, :n], False, None)
        v = Tensor._wrap(self.v_buffer[:, :, :n], False, None)
        return k, v

    def __iter__(self):
        return iter(self.views())

    def arrays(self):
        """The filled arrays (what `cache_nbytes` counts): the spare capacity is not counted."""
        return self.views()

    def append(self, k, v):
        """Adds k, v (B, H_kv, T_new, d); returns the filled (k, v) so far."""
        if self.length:  # NOTE: the buffer's shape (not views' Tensors): a decoding step pays this
            old = self.graph[0].shape if self.graph is not None else self.k_buffer.shape
            if k.ndim != 4 or (k.shape[:2], k.shape[3:]) != (old[:2], old[3:]):
                raise ValueError(
                    f"KVCache.append: new keys {tuple(k.shape)} do not continue the cached "
                    f"{(*old[:2], self.length, *old[3:])} (batch, heads and head size must match)"
                )
        if self.graph is None and not _tracks_graph(k, v):
            self._write(k._array, v._array)
            return self.views()
        if self.length:
            old_k, old_v = self.views()
            k, v = cat([old_k, k], dim=-2), cat([old_v, v], dim=-2)
        self.k_buffer = self.v_buffer = self.graph = None
        self.length = 0
        if _tracks_graph(k, v):
            self.graph, self.length = (k, v), k.shape[-2]
            return k, v
        self._write(k._array, v._array)  # nothing left to differentiate: back to buffers
        return self.views()

    def _write(self, k, v):
        n, t = self.length, k.shape[-2]
        if n + t > self.capacity:
            self._grow(n + t, k)
        self.k_buffer[:, :, n : n + t] = k
        self.v_buffer[:, :, n : n + t] = v
        self.length = n + t

    def _grow(self, needed, like):
        """Reallocates to max(needed, 2·capacity, MIN_CAPACITY) steps: amortized O(1) per step."""
        xp = get_array_module(like)
        capacity = max(needed, 2 * self.capacity, MIN_CAPACITY)
        b, h, _, d = like.shape
        k_new = xp.empty((b, h, capacity, d), dtype=like.dtype)
        v_new = xp.empty((b, h, capacity, d), dtype=like.dtype)
        if self.length:
            k_new[:, :, : self.length] = self.k_buffer[:, :, : self.length]
            v_new[:, :, : self.length] = self.v_buffer[:, :, : self.length]
        self.k_buffer, self.v_buffer = k_new, v_new
        self.reallocations += 1

    def reorder(self, index) -> None:
        """Keeps batch rows `index` (an int array, (B',)), in place."""
        if self.graph is not None:
            idx = Tensor(index, device=self.graph[0].device)
            self.graph = (self.graph[0][idx], self.graph[1][idx])
            return
        if self.k_buffer is None:
            return
        xp = get_array_module(self.k_buffer)
        idx = xp.asarray(index)
        n = self.length
        # only the filled part is gathered; the spare capacity is kept
        shape = (len(idx),) + self.k_buffer.shape[1:]
        k_new = xp.empty(shape, dtype=self.k_buffer.dtype)
        v_new = xp.empty(shape, dtype=self.v_buffer.dtype)
        k_new[:, :, :n] = self.k_buffer[idx, :, :n]
        v_new[:, :, :n] = self.v_buffer[idx, :, :n]
        self.k_buffer, self.v_buffer = k_new, v_new


class KVCache:
    """Per-layer keys and values, (B, H_kv, T, d_head) each, stored before head repetition."""

    def __init__(self):
        self._self_attn = {}  # module -> GrowingKV, grows along T
        self._cross_attn = {}  # module -> (k, v), fixed

    @property
    def seq_len(self) -> int:
        """Tokens cached so far (by the first self-attention layer): the position offset of the
        next token. 0 for an empty cache."""
        for entry in self._self_attn.values():
            return entry.length
        return 0

    def length(self, module) -> int:
        """Tokens cached by this self-attention module (its RoPE/ALiBi offset)."""
        entry = self._self_attn.get(module)
        return 0 if entry is None else entry.length

    def append(self, module, k, v):
        """Adds the new steps' k, v (B, H_kv, T_new, d) and returns all of them so far (views of
        the layer's buffers; amortized O(T_new) copying)."""
        entry = self._self_attn.get(module)
        if entry is None:
            entry = self._self_attn[module] = GrowingKV()
        return entry.append(k, v)

    def reallocations(self, module=None) -> int:
        """Buffer allocations made so far by one module's entry (or by all entries)."""
        entries = self._self_attn.values() if module is None else [self._self_attn[module]]
        return sum(e.reallocations for e in entries)

    def cross(self, module):
        """The cached encoder K/V of a cross-attention module, or None before its first call."""
        return self._cross_attn.get(module)

    def set_cross(self, module, k, v) -> None:
        self._cross_attn[module] = (k, v)

    def reorder(self, index) -> None:
        """Selects batch rows (beam search): every entry becomes entry[index] along dim 0, the
        self- and cross-attention K/V and the attention variants' states alike."""
        index = _index_array(index)
        for entry in self._self_attn.values():
            entry.reorder(index)
        for module, (k, v) in list(self._cross_attn.items()):
            idx = Tensor(index, device=k.device)
            self._cross_attn[module] = (k[idx], v[idx])
        # the variants (nn/variants) keep their states in a side table of this object
        from .variants.state import reorder_variant_states

        reorder_variant_states(self, index)

    def __len__(self):
        return len(self._self_attn) + len(self._cross_attn)

    def __repr__(self):
        return (
            f"KVCache(seq_len={self.seq_len}, self_attn_layers={len(self._self_attn)}, "
            f"cross_attn_layers={len(self._cross_attn)})"
        )


def _index_array(index):
    """A 1-D int64 host array of batch rows from a Tensor, list or array."""
    data = index._array if isinstance(index, Tensor) else index
    if hasattr(data, "get"):  # a CuPy array
        data = data.get()
    data = np.asarray(data)
    if data.ndim != 1 or data.dtype.kind not in "iu":
        raise ValueError(
            f"KVCache.reorder: index must be a 1-D integer array of batch rows, got "
            f"{data.shape} {data.dtype}"
        )
    return data.astype(np.int64)
