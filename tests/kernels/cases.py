"""The attention cases of KERNELS.md as small problems: every implementation must agree on each.

A case gives shapes and mask arguments; `make_inputs` turns it into arrays drawn from a seeded
generator. Lengths such as 77 and 23 are chosen so that 32- and 16-row tiles do not divide them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Case:
    name: str
    batch: int = 2
    heads_q: int = 2
    heads_kv: int = 2
    n_q: int = 77
    n_k: int = 77
    d: int = 16
    causal: bool = False
    key_lengths: tuple | None = None
    bool_mask: str | None = None  # "keys": (B, 1, 1, Nk) padding mask; "full": (B, Hq, Nq, Nk)
    bias: str | None = None  # "shared": (1, Hq, Nq, Nk) (T5); "2d": (Nq, Nk); "keys": (B,1,1,Nk)
    scale: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def gqa(self):
        return self.heads_q != self.heads_kv


CASES = [
    Case("plain"),
    Case("causal", causal=True),
    Case("causal_decode", n_q=5, n_k=77, causal=True),  # KV cache: bottom-right alignment
    Case("causal_more_queries", n_q=40, n_k=23, causal=True),  # first 17 rows see no key
    Case("key_lengths", key_lengths=(77, 30)),
    Case("key_lengths_empty", key_lengths=(0, 50)),  # batch 0 is all padding: rows give zeros
    Case("bool_key_mask", bool_mask="keys"),
    Case("bool_full_mask", bool_mask="full", n_q=33, n_k=50),
    Case("bias_shared_t5", bias="shared", scale=1.0),
    Case("bias_2d", bias="2d", n_q=33, n_k=50),
    Case("bias_keys", bias="keys"),
    Case("cross_attention", n_q=33, n_k=50),
    Case("gqa", heads_q=4, heads_kv=2, causal=True),
    Case("mqa", heads_q=4, heads_kv=1, n_q=33, n_k=50, bias="shared"),
    Case(
        "everything",
        heads_q=4,
        heads_kv=2,
        n_q=40,
        n_k=57,
        causal=True,
        key_lengths=(57, 45),
        bias="shared",
    ),
    Case("head_dim_64", d=64, n_q=40, n_k=40, causal=True),
    Case("head_dim_128", d=128, batch=1, n_q=33, n_k=40, bias="2d"),
]

CASE_IDS = [c.name for c in CASES]


def make_inputs(case: Case, dtype=np.float32, seed=0):
    """Arrays for one case: dict with q, k, v, bias (or None), mask (or None), lengths, dout."""
    rng = np.random.default_rng(seed)
    b, hq, hk, nq, nk, d = case.batch, case.heads_q, case.heads_kv, case.n_q, case.n_k, case.d
    arrays = {
        "q": rng.standard_normal((b, hq, nq, d)),
        "k": rng.standard_normal((b, hk, nk, d)),
        "v": rng.standard_normal((b, hk, nk, d)),
        "dout": rng.standard_normal((b, hq, nq, d)),
    }
    bias_shapes = {"shared": (1, hq, nq, nk), "2d": (nq, nk), "keys": (b, 1, 1, nk)}
    arrays["bias"] = None if case.bias is None else rng.standard_normal(bias_shapes[case.bias])
    arrays = {k: None if a is None else a.astype(dtype) for k, a in arrays.items()}
    mask = None
    if case.bool_mask == "keys":
        mask = rng.random((b, 1, 1, nk)) > 0.3
        mask[..., 0] = True
    elif case.bool_mask == "full":
        mask = rng.random((b, hq, nq, nk)) > 0.5
        mask[0, 0, 3] = False  # a fully masked row
    arrays["mask"] = mask
    arrays["lengths"] = None if case.key_lengths is None else np.array(case.key_lengths)
    return arrays
