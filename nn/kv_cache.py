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
"""

from __future__ import annotations

from tinytensor.ops import cat


class KVCache:
    """Per-layer keys and values, (B, H_kv, T, d_head) each, stored before head repetition."""

    def __init__(self):
        self._self_attn = {}  # module -> [k, v], grows along T
        self._cross_attn = {}  # module -> (k, v), fixed

    @property
    def seq_len(self) -> int:
        """Tokens cached so far (by the first self-attention layer): the position offset of the
        next token. 0 for an empty cache."""
        for k, _ in self._self_attn.values():
            return k.shape[-2]
        return 0

    def length(self, module) -> int:
        """Tokens cached by this self-attention module (its RoPE/ALiBi offset)."""
        entry = self._self_attn.get(module)
        return 0 if entry is None else entry[0].shape[-2]

    def append(self, module, k, v):
        """Adds the new steps' k, v (B, H_kv, T_new, d) and returns all of them so far."""
        entry = self._self_attn.get(module)
        if entry is not None:
            k, v = cat([entry[0], k], dim=-2), cat([entry[1], v], dim=-2)
        self._self_attn[module] = [k, v]
        return k, v

    def cross(self, module):
        """The cached encoder K/V of a cross-attention module, or None before its first call."""
        return self._cross_attn.get(module)

    def set_cross(self, module, k, v) -> None:
        self._cross_attn[module] = (k, v)

    def reorder(self, index) -> None:
        """Selects batch rows (beam search): every entry becomes entry[index] along dim 0."""
        for store in (self._self_attn, self._cross_attn):
            for module, (k, v) in list(store.items()):
                store[module] = type(store[module])((k[index], v[index]))

    def __len__(self):
        return len(self._self_attn) + len(self._cross_attn)

    def __repr__(self):
        return (
            f"KVCache(seq_len={self.seq_len}, self_attn_layers={len(self._self_attn)}, "
            f"cross_attn_layers={len(self._cross_attn)})"
        )
