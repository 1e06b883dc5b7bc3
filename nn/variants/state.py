"""Decoding state of the attention variants, kept inside an ordinary `nn.KVCache`.

`nn.KVCache` stores full per-head K/V for `Attention`. The variants cache something
else: MLA a latent per token, sliding-window attention a ring buffer of w steps, linear attention
a fixed-size state. So that the same cache object (the one `models.generation` creates) serves a
model built from any variant, each variant keeps its entry in a side table of the cache, keyed by
the module, together with the number of tokens the module has seen (its position offset: a ring
buffer's size is not the position).

    state = variant_state(cache, module)          # None before the first call
    set_variant_state(cache, module, state, n_new_tokens)
    tokens_seen(cache)                            # the position of the next token
    cache_nbytes(cache)                           # bytes of every array held, all entries
"""

from __future__ import annotations

import dataclasses

from tinytensor.backend import get_array_module
from tinytensor.tensor import Tensor

_STATES = "_variant_states"  # module -> state object (anything with arrays)
_SEEN = "_variant_seen"  # module -> tokens seen so far
# fields of a state shared by all batch rows: the ring buffer's slot positions (w,)
_BATCH_FREE_FIELDS = frozenset({"positions"})


def _table(cache, name):
    table = getattr(cache, name, None)
    if table is None:
        table = {}
        setattr(cache, name, table)
    return table


def variant_state(cache, module):
    """The state `module` stored in `cache`, or None before its first call."""
    return _table(cache, _STATES).get(module)


def variant_tokens(cache, module) -> int:
    """Tokens `module` has seen through this cache: the position of its next token."""
    return _table(cache, _SEEN).get(module, 0)


def set_variant_state(cache, module, state, n_new: int) -> None:
    """Stores `module`'s new state after it consumed `n_new` more tokens."""
    _table(cache, _STATES)[module] = state
    seen = _table(cache, _SEEN)
    seen[module] = seen.get(module, 0) + int(n_new)


def _take_rows(obj, index):
    """obj with batch rows `index` (dim 0) of every array it holds; a new object of the same
    kind. Dataclass states (MLA's latents, linear attention's (S, z)) and the sliding window's
    ring are handled field by field; the ring's `positions` (one per slot, not per row) stay."""
    if isinstance(obj, Tensor):
        return obj[Tensor(index, device=obj.device)]
    if hasattr(obj, "nbytes") and hasattr(obj, "shape"):  # a raw NumPy/CuPy array
        return obj[get_array_module(obj).asarray(index)]
    if isinstance(obj, dict):
        return {k: _take_rows(v, index) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_take_rows(v, index) for v in obj)
    if dataclasses.is_dataclass(obj):
        changes = {
            f.name: _take_rows(getattr(obj, f.name), index)
            for f in dataclasses.fields(obj)
            if f.name not in _BATCH_FREE_FIELDS
        }
        return dataclasses.replace(obj, **changes)
    raise TypeError(f"KVCache.reorder: cannot select batch rows of a {type(obj).__name__}")


def reorder_variant_states(cache, index) -> None:
    """Selects batch rows `index` of every variant state in `cache` (beam search); called by
    `KVCache.reorder`. The tokens-seen counts do not depend on the row and stay."""
    states = getattr(cache, _STATES, None)
    if not states:
        return
    for module, state in list(states.items()):
        states[module] = _take_rows(state, index)


def tokens_seen(cache) -> int:
    """The position of the next token: `KVCache.seq_len` for plain K/V entries, else the count
    kept by the first variant module (a ring buffer or a recurrent state has no length)."""
    if cache is None:
        return 0
    seen = getattr(cache, _SEEN, None)
    if seen:
        return next(iter(seen.values()))
    return cache.seq_len


def _arrays(obj):
    if isinstance(obj, Tensor):
        yield obj._array
    elif hasattr(obj, "nbytes") and hasattr(obj, "shape"):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _arrays(v)
    elif hasattr(obj, "arrays"):
        yield from _arrays(obj.arrays())


def cache_nbytes(cache) -> int:
    """Bytes of every array `cache` holds: plain K/V entries (`KVCache`) and variant states.

    Counted from the arrays themselves (`.nbytes`), not from a formula, so that the experiments
    and tests can compare the two.
    """
    total = 0
    for store in (getattr(cache, "_self_attn", {}), getattr(cache, "_cross_attn", {})):
        for entry in store.values():
            total += sum(a.nbytes for a in _arrays(entry))
    for state in getattr(cache, _STATES, {}).values():
        total += sum(a.nbytes for a in _arrays(state))
    return total
