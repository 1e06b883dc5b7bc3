"""Attention heads: a Transformer's feature dim split into heads, and the heads merged back.

    split_heads(x, n_heads)   (B, T, H·D) -> (B, H, T, D)   = x.view(B, T, H, D).transpose(1, 2)
    merge_heads(x)            (B, H, T, D) -> (B, T, H·D)   = x.transpose(1, 2).reshape(B, T, H·D)

Each is the two movement ops on its right in one graph node, with the same values, memory and
gradient (the VJP of one is the other). Why one node: an attention layer splits q, k and v and
merges the output, which is 8 of a GPT layer's ~22 ops; while decoding one token every op is
mostly its fixed cost, so these two halve that share (nn.Attention uses them).
"""

from __future__ import annotations

from ..function import Function
from ._checks import check_int, check_tensor


class SplitHeads(Function):
    """z = x (B, T, H·D) viewed as (B, T, H, D), axes 1 and 2 swapped;  dL/dx = merge_heads(g)."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    saves_arrays = False  # only the head count (which graph labels show)
    may_alias = True  # a view of x (a copy only when x's strides do not allow one)

    def forward(self, x, n_heads=1):
        b, t, c = x.shape
        self.heads = n_heads
        return x.reshape(b, t, n_heads, c // n_heads).transpose(0, 2, 1, 3)

    def backward(self, g):
        b, h, t, d = g.shape
        return g.transpose(0, 2, 1, 3).reshape(b, t, h * d)


class MergeHeads(Function):
    """z = x (B, H, T, D) with axes 1 and 2 swapped, as (B, T, H·D);  dL/dx = split_heads(g, H)."""

    linear = True  # create_graph: its VJP's VJP is the op itself (higher_order.py)
    saves_arrays = False  # only the head count
    may_alias = True  # a copy unless H or T is 1 (NumPy's reshape decides, as torch's)

    def forward(self, x):
        b, h, t, d = x.shape
        self.heads = h
        return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)

    def backward(self, g):
        b, t, c = g.shape
        return g.reshape(b, t, self.heads, c // self.heads).transpose(0, 2, 1, 3)


def split_heads(x, n_heads):
    """(B, T, H·D) -> (B, H, T, D) with H = `n_heads`: `x.view(B, T, H, D).transpose(1, 2)`."""
    shape = check_tensor(x, "split_heads")._array.shape
    check_int(n_heads, "split_heads", "n_heads", minimum=1)
    if len(shape) != 3 or shape[2] % n_heads:
        raise ValueError(
            f"split_heads: expected x of shape (B, T, n_heads·D) with n_heads={n_heads}, "
            f"got {tuple(shape)}"
        )
    return SplitHeads.apply_unary(x, n_heads)


def merge_heads(x):
    """(B, H, T, D) -> (B, T, H·D): `x.transpose(1, 2).reshape(B, T, H·D)`."""
    if check_tensor(x, "merge_heads")._array.ndim != 4:
        raise ValueError(f"merge_heads: expected x of shape (B, H, T, D), got {tuple(x.shape)}")
    return MergeHeads.apply(x)
