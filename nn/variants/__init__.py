"""Attention variants and what they cache at inference (installed as tinytensor.nn.variants).

    MultiHeadLatentAttention   mla.py             DeepSeek-V2's low-rank latent KV cache
    SlidingWindowAttention     sliding_window.py  the last w keys; ring-buffer cache
    LinearAttention            linear_attention.py  φ(q)·φ(k) kernel; constant-size state
    make_attention             factory.py         a module from a name (mha|gqa|mqa|mla|...)
    cache_nbytes, tokens_seen  state.py           measured cache bytes; the next position

MHA, GQA and MQA are `nn.Attention` (n_kv_heads = H, a divisor, 1). Every variant
decodes with the ordinary `nn.KVCache`, so `models.generation` works unchanged.
"""

# ruff: noqa: F401 - this file re-exports the public API
from .factory import (
    ATTENTION_KINDS,
    POSITION_KINDS,
    check_attention_options,
    make_attention,
    resolve_kv_heads,
)
from .linear_attention import (
    LinearAttention,
    causal_linear_attention,
    elu_feature_map,
    recurrent_linear_attention,
)
from .mla import MLACacheEntry, MultiHeadLatentAttention
from .sliding_window import RingKVCache, SlidingWindowAttention, sliding_window_mask
from .state import cache_nbytes, set_variant_state, tokens_seen, variant_state, variant_tokens

__all__ = [name for name in dir() if not name.startswith("_")]
