"""A paged KV cache (Kwon et al. 2023, "Efficient Memory Management for Large Language Model
Serving with PagedAttention", vLLM).

A contiguous cache reserves max_len positions per sequence up front; most of it stays empty, and
sequences cannot share a common prompt. Paging fixes both, as virtual memory does:

    pool      num_blocks physical blocks of `block_size` positions, preallocated once:
              k_pool, v_pool (num_blocks, H_kv, block_size, d_h)
    table     per sequence, its logical block i -> a physical block id
    allocator a free list; a block goes back to it when no sequence references it any more
    sharing   `fork` gives a child the parent's blocks by reference (refcount + 1). Full blocks
              are never written again (append-only); the partially filled last block is copied
              on the first write to it while shared (copy-on-write).

Waste is at most block_size - 1 positions per sequence. Attention reads a sequence's keys
through its table (`batch_kv` gathers the blocks of a batch at once), and equals attention over
a contiguous cache (tested).

    cache = PagedKVCache(num_blocks=64, block_size=4, n_kv_heads=2, d_head=8)
    cache.add_sequence("a"); cache.append("a", k, v)      # k, v (H_kv, T, d_h)
    cache.fork("a", "b")                                   # b shares a's prompt
    k, v, lengths = cache.batch_kv(["a", "b"])             # (B, H_kv, T_max, d_h), (B,)
    cache.free("a")
"""

from __future__ import annotations

from collections import deque

import numpy as np

from tinytensor.ops import cat, scaled_dot_product_attention
from tinytensor.tensor import Tensor


class PoolExhaustedError(RuntimeError):
    """No free block is left in the pool."""


class BlockAllocator:
    """Hands out physical block ids from a free list and counts references to each."""

    def __init__(self, num_blocks: int):
        if num_blocks < 1:
            raise ValueError(f"BlockAllocator: num_blocks must be positive, got {num_blocks}")
        self.num_blocks = int(num_blocks)
        self.free = deque(range(self.num_blocks))
        self.refcount = np.zeros(self.num_blocks, dtype=np.int64)

    @property
    def num_free(self) -> int:
        return len(self.free)

    def allocate(self) -> int:
        if not self.free:
            raise PoolExhaustedError(
                f"PagedKVCache: the pool is exhausted: all {self.num_blocks} blocks are in use; "
                "free finished sequences or build the cache with more num_blocks"
            )
        block = self.free.popleft()
        self.refcount[block] = 1
        return block

    def incref(self, block: int) -> None:
        self.refcount[block] += 1

    def decref(self, block: int) -> None:
        if self.refcount[block] <= 0:
            raise RuntimeError(f"BlockAllocator: block {block} is already free")
        self.refcount[block] -= 1
        if self.refcount[block] == 0:
            self.free.append(block)


class PagedKVCache:
    """One attention layer's keys and values for many sequences, in blocks of a shared pool.

    Args:
        num_blocks: physical blocks in the pool (allocated once, here).
        block_size: positions per block.
        n_kv_heads, d_head: the K/V shape per position.
        dtype: of the pool (NumPy dtype).
    """

    def __init__(self, num_blocks, block_size, n_kv_heads, d_head, dtype=np.float32):
        if block_size < 1:
            raise ValueError(f"PagedKVCache: block_size must be positive, got {block_size}")
        self.block_size, self.n_kv_heads, self.d_head = int(block_size), n_kv_heads, d_head
        shape = (num_blocks, n_kv_heads, block_size, d_head)
        self.k_pool, self.v_pool = np.zeros(shape, dtype), np.zeros(shape, dtype)
        self.allocator = BlockAllocator(num_blocks)
        self.block_tables: dict = {}  # sequence id -> [physical block ids]
        self.lengths: dict = {}  # sequence id -> positions stored

    # ---- sequences -----------------------------------------------------------------------

    def add_sequence(self, seq_id) -> None:
        if seq_id in self.block_tables:
            raise ValueError(f"PagedKVCache: sequence {seq_id!r} already exists")
        self.block_tables[seq_id], self.lengths[seq_id] = [], 0

    def _check(self, seq_id):
        if seq_id not in self.block_tables:
            raise KeyError(f"PagedKVCache: unknown sequence {seq_id!r}")

    def fork(self, parent, child) -> None:
        """`child` starts as a copy of `parent` that shares all of its blocks (refcounts + 1)."""
        self._check(parent)
        self.add_sequence(child)
        for block in self.block_tables[parent]:
            self.allocator.incref(block)
        self.block_tables[child] = list(self.block_tables[parent])
        self.lengths[child] = self.lengths[parent]

    def free(self, seq_id) -> None:
        """The sequence ended: its blocks lose a reference (and return to the free list at 0)."""
        self._check(seq_id)
        for block in self.block_tables.pop(seq_id):
            self.allocator.decref(block)
        del self.lengths[seq_id]

    def append(self, seq_id, k, v) -> None:
        """Stores k, v (H_kv, T_new, d_h) (arrays or Tensors) after the sequence's positions."""
        self._check(seq_id)
        k = k._array if isinstance(k, Tensor) else np.asarray(k)
        v = v._array if isinstance(v, Tensor) else np.asarray(v)
        expected = (self.n_kv_heads, self.d_head)
        if k.shape != v.shape or k.ndim != 3 or (k.shape[0], k.shape[2]) != expected:
            raise ValueError(
                f"PagedKVCache.append: k and v must be (H_kv={self.n_kv_heads}, T, "
                f"d_head={self.d_head}), got {k.shape} and {v.shape}"
            )
        table, bs = self.block_tables[seq_id], self.block_size
        n_blocks_needed = -(-(self.lengths[seq_id] + k.shape[1]) // bs)
        if n_blocks_needed - len(table) > self.allocator.num_free:
            # NOTE: checked before writing anything, so a failed append leaves the cache intact.
            raise PoolExhaustedError(
                f"PagedKVCache: sequence {seq_id!r} needs {n_blocks_needed - len(table)} more "
                f"blocks but only {self.allocator.num_free} of {self.allocator.num_blocks} are "
                "free; free finished sequences or build the cache with more num_blocks"
            )
        written = 0
        while written < k.shape[1]:
            pos = self.lengths[seq_id]
            logical, offset = divmod(pos, bs)
            if logical == len(table):
                table.append(self.allocator.allocate())
            elif self.allocator.refcount[table[logical]] > 1:
                table[logical] = self._copy_on_write(table[logical])
            n = min(bs - offset, k.shape[1] - written)
            block = table[logical]
            self.k_pool[block, :, offset : offset + n] = k[:, written : written + n]
            self.v_pool[block, :, offset : offset + n] = v[:, written : written + n]
            written += n
            self.lengths[seq_id] = pos + n

    def _copy_on_write(self, block: int) -> int:
        """A private copy of a shared, partially filled block (the only kind ever written)."""
        fresh = self.allocator.allocate()
        self.k_pool[fresh], self.v_pool[fresh] = self.k_pool[block], self.v_pool[block]
        self.allocator.decref(block)
        return fresh

    # ---- reading ---------------------------------------------------------------------------

    def gather(self, seq_id):
        """The sequence's k, v as contiguous (H_kv, T, d_h) arrays (copies)."""
        k, v, lengths = self.batch_kv([seq_id])
        return k[0, :, : lengths[0]], v[0, :, : lengths[0]]

    def batch_kv(self, seq_ids):
        """k, v (B, H_kv, T_max, d_h) gathered through the block tables, and lengths (B,);
        positions ≥ length are padding (blocks past a table's end read block 0)."""
        for s in seq_ids:
            self._check(s)
        n_max = max(len(self.block_tables[s]) for s in seq_ids) or 1
        tables = np.zeros((len(seq_ids), n_max), dtype=np.int64)
        for i, s in enumerate(seq_ids):
            tables[i, : len(self.block_tables[s])] = self.block_tables[s]
        b, h, bs, d = len(seq_ids), self.n_kv_heads, self.block_size, self.d_head

        def read(pool):  # (B, n_max, H, bs, d) -> (B, H, n_max·bs, d)
            return pool[tables].transpose(0, 2, 1, 3, 4).reshape(b, h, n_max * bs, d)

        lengths = np.array([self.lengths[s] for s in seq_ids], dtype=np.int64)
        return read(self.k_pool), read(self.v_pool), lengths

    # ---- memory ----------------------------------------------------------------------------

    @property
    def bytes_per_block(self) -> int:
        return 2 * self.k_pool[0].nbytes

    def blocks_in_use(self) -> int:
        return self.allocator.num_blocks - self.allocator.num_free

    def nbytes_used(self) -> int:
        """Bytes of the blocks some sequence references (shared blocks counted once)."""
        return self.blocks_in_use() * self.bytes_per_block

    def contiguous_nbytes(self, n_sequences: int, max_len: int) -> int:
        """What a contiguous cache reserving max_len positions per sequence would take."""
        return 2 * n_sequences * max_len * self.n_kv_heads * self.d_head * self.k_pool.itemsize

    def __repr__(self):
        return (
            f"PagedKVCache(sequences={len(self.block_tables)}, blocks_in_use="
            f"{self.blocks_in_use()}/{self.allocator.num_blocks}, block_size={self.block_size})"
        )


def paged_attention(q, cache: PagedKVCache, seq_ids, scale=None):
    """Attention of the newest T_new queries of each sequence over its paged keys and values.

    Args:
        q: (B, Hq, T_new, d_h) Tensor; row b belongs to seq_ids[b], whose last T_new cached
            positions are these queries' own tokens (append before attending).
        cache: the layer's `PagedKVCache`.
    Returns:
        (B, Hq, T_new, d_h): causal attention, each row over its own length (the batch may hold
        sequences of different lengths).
    """
    k, v, lengths = cache.batch_kv(seq_ids)
    t_new, t_max = q.shape[-2], k.shape[-2]
    if (lengths < t_new).any():
        raise ValueError(
            f"paged_attention: every sequence needs its {t_new} query tokens cached, lengths "
            f"are {lengths.tolist()}"
        )
    # query i of row b sits at position lengths[b] - t_new + i and sees keys j ≤ that position
    query_pos = lengths[:, None] - t_new + np.arange(t_new)[None, :]  # (B, T_new)
    allowed = np.arange(t_max)[None, None, :] <= query_pos[:, :, None]  # (B, T_new, T_max)
    k, v = Tensor(k.astype(q.dtype)), Tensor(v.astype(q.dtype))
    return scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=Tensor(allowed[:, None]),  # (B, 1, T_new, T_max)
        scale=scale,
        enable_gqa=q.shape[1] != k.shape[1],
    )


def paged_self_attention(attn, x, cache: PagedKVCache, seq_ids):
    """One step of an `nn.Attention` (self-attention, causal) on a paged cache.

    x: (B, T_new, d_model), row b the next T_new tokens of sequence seq_ids[b] (the sequences
    may have different cached lengths). Appends this step's K/V and returns (B, T_new, d_model),
    equal to the module's causal forward over each whole sequence at these positions.
    """
    b, t, _ = x.shape
    q = attn._heads(attn.q_proj(x), attn.n_heads)  # (B, H, T, hs)
    k = attn._heads(attn.k_proj(x), attn.n_kv_heads)  # (B, H_kv, T, hs)
    v = attn._heads(attn.v_proj(x), attn.n_kv_heads)
    rows_q = []
    for i, s in enumerate(seq_ids):
        q_i, k_i = q[i : i + 1], k[i : i + 1]
        if attn.rotary is not None:  # each sequence continues at its own position
            q_i, k_i = attn.rotary(q_i, k_i, cache.lengths[s])
        cache.append(s, k_i[0], v[i])
        rows_q.append(q_i)
    q = cat(rows_q, dim=0)
    out = paged_attention(q, cache, seq_ids, scale=attn.scale)  # (B, H, T, hs)
    out = out.transpose(1, 2).reshape(b, t, attn.n_heads * attn.d_head)  # (B, T, H·hs)
    return attn.out_proj(out)
