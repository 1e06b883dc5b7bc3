"""Forward values and gradients against PyTorch in float64, for every op family and for the
PyTorch-named API (most calls below are written once and run against both libraries).

Where we differ from PyTorch on purpose (causal alignment when Nq != Nk), the comparison is made
against the explicit equivalent in PyTorch (a bottom-right mask).
"""

from __future__ import annotations

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.ops import merge_heads, split_heads

from .reference import check_op

rng = np.random.default_rng(1234)


def randn(*shape):
    return rng.standard_normal(shape)


def pos(*shape):
    return rng.uniform(0.3, 2.0, size=shape)


def ints(high, *shape):
    return rng.integers(0, high, size=shape)


def bools(*shape, p=0.5):
    return rng.random(shape) < p


def distinct(*shape):
    n = int(np.prod(shape))
    return ((rng.permutation(n) - n / 2) * 0.1).reshape(shape)


def case(name, inputs, ours, theirs=None, **options):
    return pytest.param(inputs, ours, theirs, options, id=name)


ELEMENTWISE = [
    case("add", [randn(3, 4), randn(4)], lambda m, F, x, y: x + y),
    case("add-method", [randn(3, 4), randn(3, 1)], lambda m, F, x, y: x.add(y)),
    case("radd-scalar", [randn(3)], lambda m, F, x: 2 + x),
    case("sub", [randn(2, 3), randn(2, 3)], lambda m, F, x, y: m.sub(x, y) - 1.5),
    case("rsub", [randn(3)], lambda m, F, x: 1 - x),
    case("mul", [randn(2, 3), randn(2, 1)], lambda m, F, x, y: m.mul(x, y) * 0.5),
    case("div", [randn(2, 3), pos(3)], lambda m, F, x, y: x / y),
    case("rdiv", [pos(2, 3)], lambda m, F, x: 3 / x),
    case("div-method", [randn(2, 3), pos(2, 3)], lambda m, F, x, y: x.div(y)),
    case("neg", [randn(4)], lambda m, F, x: -x),
    case("pow-scalar", [randn(3, 4)], lambda m, F, x: x**3),
    case("pow-half", [pos(3, 4)], lambda m, F, x: x**0.5),
    case("pow-negative", [pos(3, 4)], lambda m, F, x: m.pow(x, -2)),
    case("pow-tensor", [pos(3, 4), randn(3, 4)], lambda m, F, x, y: x**y),
    case("pow-tensor-bcast", [pos(3, 1), randn(4)], lambda m, F, x, y: m.pow(x, y)),
    case("rpow", [randn(4)], lambda m, F, x: 2.0**x),
    case("exp", [randn(3, 4)], lambda m, F, x: m.exp(x)),
    case("log", [pos(3, 4)], lambda m, F, x: x.log()),
    case("sqrt", [pos(3, 4)], lambda m, F, x: m.sqrt(x)),
    case("rsqrt", [pos(3, 4)], lambda m, F, x: m.rsqrt(x)),
    case("abs", [randn(3, 4)], lambda m, F, x: m.abs(x)),
    case("abs-zero", [np.array([0.0, -1.0, 2.0])], lambda m, F, x: abs(x)),
    case("sin-cos", [randn(3, 4)], lambda m, F, x: m.sin(x) * x.cos()),
    case("tanh", [randn(3, 4)], lambda m, F, x: m.tanh(x)),
    case("sigmoid", [randn(3, 4) * 10], lambda m, F, x: m.sigmoid(x)),
    case(
        "sigmoid-tails", [np.array([-800.0, -40.0, 0.0, 40.0, 800.0])], lambda m, F, x: F.sigmoid(x)
    ),
    case("relu", [np.array([-1.0, 0.0, 2.0, -0.0, 3.0])], lambda m, F, x: F.relu(x)),
    case("relu-method", [randn(3, 4)], lambda m, F, x: x.relu()),
    case("gelu-none", [randn(3, 4) * 3], lambda m, F, x: F.gelu(x)),
    case("gelu-tanh", [randn(3, 4) * 3], lambda m, F, x: F.gelu(x, approximate="tanh")),
    case("silu", [randn(3, 4) * 3], lambda m, F, x: F.silu(x)),
    case("maximum", [randn(3, 4), randn(4)], lambda m, F, x, y: m.maximum(x, y)),
    case("minimum", [randn(3, 4), randn(3, 1)], lambda m, F, x, y: x.minimum(y)),
    case("clamp", [randn(4, 5)], lambda m, F, x: m.clamp(x, -0.5, 0.5)),
    case("clamp-min", [randn(4, 5)], lambda m, F, x: x.clamp(min=0.1)),
    case("clamp-max", [randn(4, 5)], lambda m, F, x: x.clamp(max=0.1)),
    case("clip-at-bound", [np.array([-1.0, 0.0, 1.0, 2.0])], lambda m, F, x: x.clip(-1.0, 1.0)),
    case("where", [bools(3, 4), randn(3, 4), randn(4)], lambda m, F, c, x, y: m.where(c, x, y)),
    case("where-scalar", [bools(3, 4), randn(3, 4)], lambda m, F, c, x: m.where(c, x, 0.0)),
    case("masked_fill", [randn(3, 4), bools(1, 4)], lambda m, F, x, k: x.masked_fill(k, -3.0)),
    case("compare", [randn(3, 4), randn(4)], lambda m, F, x, y: ((x > y) & (x <= 0.5)) | (x == y)),
    case("logical-not-xor", [bools(4), bools(4)], lambda m, F, a, b: ~a ^ b),
]

REDUCTIONS = [
    case("sum-all", [randn(3, 4)], lambda m, F, x: x.sum()),
    case("sum-dim", [randn(2, 3, 4)], lambda m, F, x: x.sum(dim=1)),
    case("sum-dims-keepdim", [randn(2, 3, 4)], lambda m, F, x: m.sum(x, dim=(0, 2), keepdim=True)),
    case("sum-neg-dim", [randn(2, 3)], lambda m, F, x: m.sum(x, -1)),
    case("mean-all", [randn(3, 4)], lambda m, F, x: m.mean(x)),
    case("mean-dim-keepdim", [randn(3, 4)], lambda m, F, x: x.mean(1, keepdim=True)),
    case("var-default", [randn(3, 5)], lambda m, F, x: x.var()),
    case("var-unbiased-false", [randn(3, 5)], lambda m, F, x: x.var(1, unbiased=False)),
    case("var-correction0", [randn(3, 5)], lambda m, F, x: m.var(x, dim=0, correction=0)),
    case(
        "var-correction1-keepdim",
        [randn(3, 5)],
        lambda m, F, x: x.var(1, keepdim=True, correction=1),
    ),
    case("var-correction2", [randn(2, 6)], lambda m, F, x: x.var(dim=-1, correction=2)),
    case("std", [randn(3, 5)], lambda m, F, x: x.std(dim=1)),
    case("std-keepdim", [randn(2, 3, 4)], lambda m, F, x: x.std((0, 2), keepdim=True)),
    case(
        "std-constant-rows",
        [np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]])],
        lambda m, F, x: x.std(1),
    ),
    case("var-single-element", [np.array([2.0])], lambda m, F, x: x.var()),
    case("pow-zero-at-zero", [np.array([0.0, 1.5])], lambda m, F, x: x**0),
    case("std-unbiased-false", [randn(3, 5)], lambda m, F, x: m.std(x, 0, unbiased=False)),
    case("max-all", [distinct(3, 4)], lambda m, F, x: x.max()),
    case("max-dim", [distinct(3, 4)], lambda m, F, x: x.max(dim=1)),
    case("max-dim-keepdim", [distinct(2, 3, 4)], lambda m, F, x: m.max(x, 0, keepdim=True)),
    case("min-dim", [distinct(3, 4)], lambda m, F, x: x.min(-1)),
    case("min-all", [distinct(3, 4)], lambda m, F, x: m.min(x)),
    case("amax", [distinct(2, 3, 4)], lambda m, F, x: x.amax(dim=(0, 2))),
    case("amin", [distinct(2, 3, 4)], lambda m, F, x: m.amin(x, dim=1, keepdim=True)),
    case("logsumexp", [randn(3, 4) * 50], lambda m, F, x: x.logsumexp(1)),
    case("logsumexp-dims", [randn(2, 3, 4)], lambda m, F, x: m.logsumexp(x, (0, 2), keepdim=True)),
    case("argmax", [distinct(3, 4)], lambda m, F, x: (x.argmax(), x.argmax(dim=1))),
    case("argmin-keepdim", [distinct(3, 4)], lambda m, F, x: m.argmin(x, dim=0, keepdim=True)),
    case(
        "reduce-0d-with-dim",
        [np.array(1.5)],
        lambda m, F, x: x.sum(0) + x.mean(-1) + x.amax(0) + m.logsumexp(x, 0),
    ),
    case("any-all", [bools(3, 4)], lambda m, F, x: (x.any(), x.all(dim=1), m.any(x, 0))),
]

MOVEMENT = [
    case("reshape", [randn(3, 4)], lambda m, F, x: x.reshape(2, -1, 3)),
    case("reshape-tuple", [randn(3, 4)], lambda m, F, x: m.reshape(x, (4, 3))),
    case("view", [randn(3, 4)], lambda m, F, x: x.view(-1)),
    case("view_as", [randn(3, 4), randn(6, 2)], lambda m, F, x, y: x.view_as(y) * y),
    case("transpose", [randn(2, 3, 4)], lambda m, F, x: x.transpose(0, 2)),
    case("transpose-fn", [randn(2, 3, 4)], lambda m, F, x: m.transpose(x, -1, -2)),
    case("permute", [randn(2, 3, 4)], lambda m, F, x: x.permute(1, 2, 0)),
    case("permute-tuple", [randn(2, 3, 4)], lambda m, F, x: m.permute(x, (2, 0, 1))),
    case("T", [randn(3, 4)], lambda m, F, x: x.T),
    case("T-1d", [randn(5)], lambda m, F, x: x.T * x),
    case("T-3d", [randn(2, 3, 4)], lambda m, F, x: x.permute(2, 1, 0) * x.T),
    case("mT", [randn(2, 3, 4)], lambda m, F, x: x.mT),
    case(
        "split_heads",
        [randn(2, 5, 6)],
        lambda m, F, x: split_heads(x, 3),
        lambda m, F, x: x.view(2, 5, 3, 2).transpose(1, 2),
    ),
    case(
        "split_heads-non-contiguous",
        [randn(2, 6, 5)],
        lambda m, F, x: split_heads(x.transpose(1, 2), 2) * 2,
        lambda m, F, x: x.transpose(1, 2).reshape(2, 5, 2, 3).transpose(1, 2) * 2,
    ),
    case(
        "merge_heads",
        [randn(2, 3, 5, 2)],
        lambda m, F, x: merge_heads(x),
        lambda m, F, x: x.transpose(1, 2).reshape(2, 5, 6),
    ),
    case("expand", [randn(3, 1)], lambda m, F, x: x.expand(2, 3, 4)),
    case("expand-minus-one", [randn(1, 4)], lambda m, F, x: x.expand(3, -1)),
    case("expand_as", [randn(1, 4), randn(3, 4)], lambda m, F, x, y: x.expand_as(y) * y),
    case("squeeze-all", [randn(3, 1, 4, 1)], lambda m, F, x: x.squeeze()),
    case("squeeze-dim", [randn(3, 1, 4, 1)], lambda m, F, x: m.squeeze(x, -1)),
    case("squeeze-noop", [randn(3, 4)], lambda m, F, x: x.squeeze(0)),
    case("unsqueeze", [randn(3, 4)], lambda m, F, x: x.unsqueeze(1)),
    case("unsqueeze-neg", [randn(3, 4)], lambda m, F, x: m.unsqueeze(x, -1)),
    case("flatten", [randn(2, 3, 4)], lambda m, F, x: x.flatten()),
    case("flatten-range", [randn(2, 3, 4, 2)], lambda m, F, x: m.flatten(x, 1, 2)),
    case("getitem-int", [randn(3, 4)], lambda m, F, x: x[1]),
    case("getitem-ints", [randn(3, 4)], lambda m, F, x: x[-1, 2]),
    case("getitem-slices", [randn(4, 5)], lambda m, F, x: x[1:3, ::2]),
    case("getitem-none-ellipsis", [randn(2, 3, 4)], lambda m, F, x: x[None, ..., 1:]),
    case("getitem-long-dup", [randn(4, 3), np.array([0, 2, 2, 3])], lambda m, F, x, i: x[i]),
    case("getitem-list-dup", [randn(4, 3)], lambda m, F, x: x[:, [2, 0, 2]]),
    case(
        "getitem-two-arrays",
        [randn(4, 3), np.array([0, 1, 1]), np.array([2, 2, 0])],
        lambda m, F, x, i, j: x[i, j],
    ),
    case("getitem-bool", [randn(3, 4), bools(3, 4)], lambda m, F, x, k: x[k]),
    case(
        "getitem-bool-rows",
        [randn(4, 3), np.array([True, False, True, True])],
        lambda m, F, x, k: x[k],
    ),
    case("gather", [randn(3, 4), ints(4, 3, 5)], lambda m, F, x, i: x.gather(1, i)),
    case("gather-dim0", [randn(3, 4), ints(3, 2, 4)], lambda m, F, x, i: m.gather(x, 0, i)),
    case("cat", [randn(2, 3), randn(1, 3)], lambda m, F, a, b: m.cat([a, b])),
    case("cat-dim", [randn(2, 3), randn(2, 2)], lambda m, F, a, b: m.cat((a, b), dim=-1)),
    case("concat", [randn(2, 3), randn(2, 3)], lambda m, F, a, b: m.concat([a, b], 1)),
    case("stack", [randn(2, 3), randn(2, 3)], lambda m, F, a, b: m.stack([a, b])),
    case("stack-dim", [randn(2, 3), randn(2, 3)], lambda m, F, a, b: m.stack([a, b], dim=2)),
    case("split", [randn(5, 2)], lambda m, F, x: x.split(2)),
    case("split-sizes", [randn(2, 6)], lambda m, F, x: m.split(x, [1, 3, 2], dim=1)),
    case("chunk", [randn(7, 2)], lambda m, F, x: x.chunk(3)),
    case("chunk-dim", [randn(2, 6)], lambda m, F, x: m.chunk(x, 4, dim=1)),
    case("tril", [randn(4, 4)], lambda m, F, x: x.tril()),
    case("tril-diag", [randn(2, 3, 5)], lambda m, F, x: m.tril(x, 1)),
    case("triu", [randn(3, 5)], lambda m, F, x: x.triu(-1)),
    case("triu-fn", [randn(5, 3)], lambda m, F, x: m.triu(x, diagonal=2)),
    case("repeat_interleave", [randn(2, 3)], lambda m, F, x: x.repeat_interleave(2, dim=1)),
    case("clone", [randn(3)], lambda m, F, x: x.clone() * x),
]

LINALG = [
    case("matmul-2d", [randn(3, 4), randn(4, 2)], lambda m, F, a, b: a @ b),
    case("matmul-vec-mat", [randn(4), randn(4, 2)], lambda m, F, a, b: m.matmul(a, b)),
    case("matmul-mat-vec", [randn(3, 4), randn(4)], lambda m, F, a, b: a @ b),
    case("matmul-vec-vec", [randn(4), randn(4)], lambda m, F, a, b: a.matmul(b)),
    case("matmul-batch", [randn(2, 3, 4), randn(2, 4, 5)], lambda m, F, a, b: a @ b),
    case("matmul-batch-bcast", [randn(2, 1, 3, 4), randn(5, 4, 2)], lambda m, F, a, b: a @ b),
    case("matmul-batch-vec", [randn(2, 3, 4), randn(4)], lambda m, F, a, b: a @ b),
    case(
        "linear", [randn(2, 3, 4), randn(5, 4), randn(5)], lambda m, F, x, w, b: F.linear(x, w, b)
    ),
    case("linear-no-bias", [randn(3, 4), randn(2, 4)], lambda m, F, x, w: F.linear(x, w)),
]

NN = [
    case("softmax", [randn(3, 4)], lambda m, F, x: x.softmax(-1)),
    case("softmax-dim0", [randn(3, 4) * 30], lambda m, F, x: F.softmax(x, dim=0)),
    case("log_softmax", [randn(3, 4) * 30], lambda m, F, x: x.log_softmax(1)),
    case("log_softmax-fn", [randn(2, 3, 4)], lambda m, F, x: F.log_softmax(x, dim=-2)),
    case("ce", [randn(4, 5), ints(5, 4)], lambda m, F, z, t: F.cross_entropy(z, t)),
    case(
        "ce-sum",
        [randn(4, 5), ints(5, 4)],
        lambda m, F, z, t: F.cross_entropy(z, t, reduction="sum"),
    ),
    case(
        "ce-none",
        [randn(4, 5), ints(5, 4)],
        lambda m, F, z, t: F.cross_entropy(z, t, reduction="none"),
    ),
    case(
        "ce-ignore",
        [randn(5, 3), np.array([0, -100, 2, -100, 1])],
        lambda m, F, z, t: F.cross_entropy(z, t),
    ),
    case(
        "ce-ignore-custom-none",
        [randn(4, 3), np.array([0, 2, 1, 2])],
        lambda m, F, z, t: F.cross_entropy(z, t, ignore_index=2, reduction="none"),
    ),
    case(
        "ce-all-ignored",
        [randn(2, 3), np.array([-100, -100])],
        lambda m, F, z, t: F.cross_entropy(z, t, label_smoothing=0.1),
    ),
    case(
        "ce-smoothing",
        [randn(4, 5), ints(5, 4)],
        lambda m, F, z, t: F.cross_entropy(z, t, label_smoothing=0.2),
    ),
    case(
        "ce-smoothing-ignore",
        [randn(4, 5), np.array([1, -100, 4, 0])],
        lambda m, F, z, t: F.cross_entropy(z, t, label_smoothing=0.1),
    ),
    case(
        "ce-smoothing-ignore-sum",
        [randn(4, 5), np.array([1, -100, 4, 0])],
        lambda m, F, z, t: F.cross_entropy(z, t, label_smoothing=0.1, reduction="sum"),
    ),
    case(
        "ce-smoothing-ignore-none",
        [randn(4, 5), np.array([1, -100, 4, 0])],
        lambda m, F, z, t: F.cross_entropy(z, t, label_smoothing=0.1, reduction="none"),
    ),
    case(
        "ce-probabilities",
        [randn(3, 4), rng.dirichlet(np.ones(4), size=3)],
        lambda m, F, z, p: F.cross_entropy(z, p),
    ),
    case(
        "ce-probabilities-smoothing-none",
        [randn(3, 4), rng.dirichlet(np.ones(4), size=3)],
        lambda m, F, z, p: F.cross_entropy(z, p, label_smoothing=0.3, reduction="none"),
    ),
    case(
        "ce-probabilities-sum",
        [randn(3, 4), rng.dirichlet(np.ones(4), size=3)],
        lambda m, F, z, p: F.cross_entropy(z, p, reduction="sum"),
    ),
    case("ce-spatial", [randn(2, 3, 4), ints(3, 2, 4)], lambda m, F, z, t: F.cross_entropy(z, t)),
    case(
        "ce-spatial-none",
        [randn(2, 3, 2, 2), ints(3, 2, 2, 2)],
        lambda m, F, z, t: F.cross_entropy(z, t, reduction="none"),
    ),
    case("ce-unbatched", [randn(5), np.array(3)], lambda m, F, z, t: F.cross_entropy(z, t)),
    case(
        "ce-large-logits", [randn(3, 4) * 500, ints(4, 3)], lambda m, F, z, t: F.cross_entropy(z, t)
    ),
    case(
        "layer_norm",
        [randn(3, 5), randn(5), randn(5)],
        lambda m, F, x, w, b: F.layer_norm(x, (5,), w, b),
    ),
    case("layer_norm-no-affine", [randn(2, 3, 4)], lambda m, F, x: F.layer_norm(x, [4])),
    case(
        "layer_norm-2dims-eps",
        [randn(2, 3, 4), randn(3, 4), randn(3, 4)],
        lambda m, F, x, w, b: F.layer_norm(x, (3, 4), w, b, eps=1e-3),
    ),
    case("rms_norm", [randn(3, 5), randn(5)], lambda m, F, x, w: F.rms_norm(x, (5,), w, eps=1e-6)),
    case("rms_norm-no-weight", [randn(2, 3, 4)], lambda m, F, x: F.rms_norm(x, [3, 4], eps=1e-6)),
    case(
        "embedding-repeated",
        [np.array([[0, 2, 2], [3, 0, 2]]), randn(5, 3)],
        lambda m, F, i, w: F.embedding(i, w),
    ),
    case(
        "embedding-padding",
        [np.array([1, 0, 1, 3]), randn(4, 2)],
        lambda m, F, i, w: F.embedding(i, w, padding_idx=1),
    ),
    case("one_hot", [np.array([0, 3, 1])], lambda m, F, i: F.one_hot(i, 5)),
]


def _bottom_right(torch, nq, nk):
    """PyTorch's explicit form of our causal mask for Nq != Nk: query i sees j <= i + Nk - Nq."""
    return torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)


def sdpa_case(name, shapes, ours, theirs=None):
    return case(name, [randn(*s) for s in shapes], ours, theirs)


QKV = [(2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2)]  # (B, H, Nq, d), (B, H, Nk, d), (B, H, Nk, dv)

ATTENTION = [
    sdpa_case("sdpa", QKV, lambda m, F, q, k, v: F.scaled_dot_product_attention(q, k, v)),
    sdpa_case(
        "sdpa-scale", QKV, lambda m, F, q, k, v: F.scaled_dot_product_attention(q, k, v, scale=1.0)
    ),
    case(
        "sdpa-bool-mask",
        [randn(2, 3, 4, 5), randn(2, 3, 6, 5), randn(2, 3, 6, 2), bools(2, 1, 4, 6, p=0.8)],
        lambda m, F, q, k, v, mask: F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask | (m.arange(6) == 0)
        ),
    ),
    case(
        "sdpa-float-mask",
        [randn(2, 3, 4, 5), randn(2, 3, 6, 5), randn(2, 3, 6, 2), randn(1, 3, 4, 6)],
        lambda m, F, q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b),
    ),
    case(
        "sdpa-float-mask-2d",
        [randn(2, 4, 5), randn(2, 6, 5), randn(2, 6, 3), randn(4, 6)],
        lambda m, F, q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b),
    ),
    sdpa_case(
        "sdpa-causal-square",
        [(2, 3, 5, 4), (2, 3, 5, 4), (2, 3, 5, 4)],
        lambda m, F, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    ),
    sdpa_case(
        "sdpa-causal-bottom-right",
        [(2, 3, 2, 4), (2, 3, 5, 4), (2, 3, 5, 4)],
        lambda m, F, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda m, F, q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=_bottom_right(m, 2, 5)
        ),
    ),
    case(
        "sdpa-causal-and-bool-mask",
        [randn(1, 2, 4, 3), randn(1, 2, 4, 3), randn(1, 2, 4, 3), bools(4, 4, p=0.7)],
        lambda m, F, q, k, v, mask: F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask | m.eye(4, dtype=m.bool), is_causal=True
        ),
        lambda m, F, q, k, v, mask: F.scaled_dot_product_attention(
            q, k, v, attn_mask=(mask | m.eye(4, dtype=m.bool)) & _bottom_right(m, 4, 4)
        ),
    ),
    sdpa_case(
        "sdpa-gqa",
        [(2, 4, 3, 5), (2, 2, 6, 5), (2, 2, 6, 3)],
        lambda m, F, q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
    ),
    sdpa_case(
        "sdpa-gqa-causal",
        [(1, 6, 4, 2), (1, 2, 4, 2), (1, 2, 4, 2)],
        lambda m, F, q, k, v: F.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=True
        ),
    ),
]


@pytest.mark.parametrize(
    "inputs, ours, theirs, options", ELEMENTWISE + REDUCTIONS + MOVEMENT + LINALG + NN + ATTENTION
)
def test_matches_torch(torch, request, inputs, ours, theirs, options):
    check_op(torch, inputs, ours, theirs, label=request.node.callspec.id, **options)


def test_max_dim_returns_values_and_indices_like_torch(torch):
    x = distinct(3, 4)
    ours, theirs = tt.tensor(x).max(dim=1), torch.tensor(x).max(dim=1)
    np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
    np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    values, indices = tt.tensor(x).min(0)
    np.testing.assert_array_equal(indices.numpy(), torch.tensor(x).min(0).indices.numpy())
    assert indices.dtype == tt.int64


def test_key_lengths_equal_a_padding_mask(torch):
    q, k, v = randn(2, 2, 3, 4), randn(2, 2, 5, 4), randn(2, 2, 5, 4)
    lengths = np.array([2, 5])
    padding = np.arange(5)[None, :] < lengths[:, None]  # (B, Nk): True = a real key
    check_op(
        torch,
        [q, k, v],
        lambda m, F, q, k, v: F.scaled_dot_product_attention(
            q, k, v, key_lengths=tt.tensor(lengths)
        ),
        lambda m, F, q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.from_numpy(padding)[:, None, None, :]
        ),
    )


FLOAT32 = [
    case(
        "mlp",
        [randn(4, 3), randn(5, 3), randn(5)],
        lambda m, F, x, w, b: F.gelu(F.linear(x, w, b)).sum(-1),
    ),
    case(
        "ce",
        [randn(4, 5), ints(5, 4)],
        lambda m, F, z, t: F.cross_entropy(z, t, label_smoothing=0.1),
    ),
    case(
        "layer_norm",
        [randn(3, 5), randn(5), randn(5)],
        lambda m, F, x, w, b: F.layer_norm(x, (5,), w, b),
    ),
    case("bcast-arith", [randn(3, 4), pos(4)], lambda m, F, x, y: (x * y - x / y) ** 2),
    case(
        "sdpa-bias",
        [randn(1, 2, 3, 4), randn(1, 2, 3, 4), randn(1, 2, 3, 4), randn(3, 3)],
        lambda m, F, q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b),
    ),
    case("reduce", [randn(3, 4)], lambda m, F, x: x.var(1) + x.amax(0).sum() + x.logsumexp(1)),
]


@pytest.mark.parametrize("inputs, ours, theirs, options", FLOAT32)
def test_float32_values_and_gradients_stay_float32(torch, request, inputs, ours, theirs, options):
    # check_op asserts every output and every gradient has the input dtype (float32 here)
    check_op(
        torch,
        inputs,
        ours,
        theirs,
        dtype="float32",
        atol=1e-5,
        rtol=1e-4,
        label=request.node.callspec.id,
    )


def test_python_scalars_keep_the_tensor_dtype():
    # PyTorch's promotion: a Python number takes the tensor's dtype; int / int and int * float
    # give the default float dtype (float32).
    x = tt.ones(3)
    for y in (x * 2, 2.5 * x, x / 3, x - 1, x**2, x.clamp(0.5), tt.where(x > 0, x, 0.0)):
        assert y.dtype == tt.float32
    i = tt.arange(3)
    assert (i * 2).dtype == tt.int64
    assert (i / 2).dtype == tt.float32
    assert (i * 0.5).dtype == tt.float32


PROMOTION_PAIRS = [
    ("float32", "int64"),
    ("int64", "float32"),
    ("float64", "int32"),
    ("float32", "float64"),
    ("bool", "float32"),
    ("int32", "int64"),
    ("int64", "bool"),
]


@pytest.mark.parametrize("left, right", PROMOTION_PAIRS)
def test_mixed_dtype_promotion_matches_torch(torch, left, right):
    a_np, b_np = np.array([1, 2, 3]), np.array([2, 1, 3])
    ours = [tt.tensor(a_np, dtype=getattr(tt, left)), tt.tensor(b_np, dtype=getattr(tt, right))]
    theirs = [
        torch.tensor(a_np, dtype=getattr(torch, left)),
        torch.tensor(b_np, dtype=getattr(torch, right)),
    ]
    for name, op in [("add", lambda x, y: x + y), ("mul", lambda x, y: x * y)]:
        got, want = op(*ours), op(*theirs)
        assert str(got.dtype) == str(want.dtype).replace("torch.", ""), (name, left, right)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    got, want = tt.maximum(*ours), torch.maximum(*theirs)
    assert str(got.dtype) == str(want.dtype).replace("torch.", ""), ("maximum", left, right)
