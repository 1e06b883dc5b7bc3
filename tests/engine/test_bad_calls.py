"""A battery of bad calls to the engine, made as a new user makes them: each must raise the
right exception with a message naming the function and the value the user wrote (never NumPy's
words, never a silent result), and where PyTorch has the same call, PyTorch must raise too.

Each case is one expression, evaluated twice: with `lib` = tinytensor and with `lib` = torch
(`F` is the library's nn.functional, `x` = lib.ones(3, 4), `q` = lib.ones(1, 2, 3),
`i([...])` an int64 tensor). Cases
marked `vs_torch=False` are not run on torch: PyTorch accepts them (NaN or out-of-range
probabilities in scaled_dot_product_attention, bools as sizes, beta=0 in softplus) or has no
such function (info_nce).
"""

from __future__ import annotations

import math
import re

import pytest

import tinytensor as tt


def bad(expr, kind, *fragments, vs_torch=True):
    return pytest.param(expr, kind, fragments, vs_torch, id=expr)


CASES = [
    # ---- creation: sizes are non-negative ints ------------------------------------------------
    bad("lib.zeros(2, -1)", ValueError, "zeros", "-1"),
    bad("lib.zeros((2, -3))", ValueError, "zeros", "-3"),
    bad("lib.zeros(2.5)", TypeError, "zeros", "2.5"),
    bad('lib.zeros("3")', TypeError, "zeros", "'3'"),
    bad("lib.zeros(True)", TypeError, "zeros", "True", vs_torch=False),
    bad("lib.zeros(None)", TypeError, "zeros", "None"),
    bad("lib.ones(-2)", ValueError, "ones", "-2"),
    bad("lib.ones(2, 3.0)", TypeError, "ones", "3.0"),
    bad("lib.empty(-1)", ValueError, "empty", "-1"),
    bad("lib.full((2, -1), 1.0)", ValueError, "full", "-1"),
    bad("lib.full((2.5,), 1.0)", TypeError, "full", "2.5"),
    bad("lib.randn(-2)", ValueError, "randn", "-2"),
    bad("lib.randn(2.0)", TypeError, "randn", "2.0"),
    bad("lib.rand(3, -3)", ValueError, "rand", "-3"),
    bad('lib.rand(2, "3")', TypeError, "rand", "'3'"),
    bad("lib.randint(0, 10, (-1,))", ValueError, "randint", "-1"),
    bad("lib.randint(5, 2, (3,))", ValueError, "randint", "5", "2"),
    bad("lib.randint(0, 2.5, (3,))", TypeError, "randint", "2.5", vs_torch=False),
    bad("lib.randperm(-1)", ValueError, "randperm", "-1"),
    bad("lib.randperm(2.5)", TypeError, "randperm", "2.5"),
    bad("lib.arange(0, 10, 0)", ValueError, "arange", "step", "0"),
    bad("lib.arange(0, 10, -1)", ValueError, "arange", "-1"),
    bad("lib.arange(nan)", ValueError, "arange", "nan"),
    bad("lib.arange(0, inf)", ValueError, "arange", "inf"),
    bad('lib.arange("5")', TypeError, "arange", "'5'"),
    bad("lib.linspace(0, 1, -1)", ValueError, "linspace", "-1"),
    bad("lib.linspace(0, 1, 2.5)", TypeError, "linspace", "2.5"),
    bad("lib.eye(-1)", ValueError, "eye", "-1"),
    bad("lib.eye(3, -2)", ValueError, "eye", "-2"),
    bad("lib.eye(2.5)", TypeError, "eye", "2.5"),
    bad("lib.zeros_like(2.0)", TypeError, "zeros_like", "float"),
    bad("lib.ones_like([1.0])", TypeError, "ones_like", "list"),
    bad("lib.randn_like(3)", TypeError, "randn_like", "int"),
    bad("lib.full_like(None, 1.0)", TypeError, "full_like", "None"),
    bad("lib.tensor([[1.0, 2.0], [3.0]])", ValueError, "tensor", "ragged"),
    bad('lib.tensor("abc")', TypeError, "tensor", "'abc'"),
    bad('lib.manual_seed("a")', TypeError, "manual_seed", "'a'"),
    # ---- elementwise: a Python scalar or list where a tensor is required ------------------------
    bad("lib.exp(2.0)", TypeError, "exp", "input", "float"),
    bad("lib.log([1.0])", TypeError, "log", "input", "list"),
    bad("lib.sqrt(4)", TypeError, "sqrt", "input", "int"),
    bad("lib.rsqrt(None)", TypeError, "rsqrt", "input", "None"),
    bad("lib.abs(-1.0)", TypeError, "abs", "input", "float"),
    bad("lib.neg(1)", TypeError, "neg", "input", "int"),
    bad("lib.sin(1.0)", TypeError, "sin", "input", "float"),
    bad("lib.cos([0.0])", TypeError, "cos", "input", "list"),
    bad("lib.tanh(0.5)", TypeError, "tanh", "input", "float"),
    bad("lib.sigmoid(0.5)", TypeError, "sigmoid", "input", "float"),
    bad("lib.relu(-1.0)", TypeError, "relu", "input", "float"),
    bad("F.silu(1.0)", TypeError, "silu", "input", "float"),
    bad("F.gelu(1.0)", TypeError, "gelu", "input", "float"),
    bad('F.gelu(x, approximate="fast")', ValueError, "gelu", "approximate", "'fast'"),
    bad("lib.log1p(1.0)", TypeError, "log1p", "input", "float"),
    bad("lib.expm1([1.0])", TypeError, "expm1", "input", "list"),
    bad("lib.erf(1.0)", TypeError, "erf", "input", "float"),
    bad("lib.floor(1.5)", TypeError, "floor", "input", "float"),
    bad("lib.sign(-3)", TypeError, "sign", "input", "int"),
    bad("lib.square(3.0)", TypeError, "square", "input", "float"),
    bad("lib.reciprocal(2.0)", TypeError, "reciprocal", "input", "float"),
    bad("lib.div([1.0], [2.0])", TypeError, "div", "list"),
    bad("lib.maximum(x, 1.0)", TypeError, "maximum", "other", "float"),
    bad("lib.minimum(1.0, x)", TypeError, "minimum", "input", "float"),
    bad('x + "a"', TypeError, "add", "'a'"),
    bad("lib.clamp(x)", ValueError, "clamp", "min", "max"),
    bad('lib.clamp(x, min="0")', TypeError, "clamp", "min", "'0'"),
    bad("lib.bitwise_not(x)", TypeError, "bitwise_not", "float32", vs_torch=False),
    bad("lib.logical_not(2.0)", TypeError, "logical_not", "input", "float"),
    bad("lib.where(x, x, x)", TypeError, "where", "condition", "float32"),
    bad("lib.where([True], x, x)", TypeError, "where", "condition", "list"),
    bad("x.masked_fill(x, 0.0)", TypeError, "masked_fill", "mask", "float32"),
    bad('x.masked_fill(x > 0, "a")', TypeError, "masked_fill", "value", "'a'"),
    bad('lib.pow(x, "2")', TypeError, "pow", "exponent", "'2'"),
    bad('lib.lerp(x, x, "0.5")', TypeError, "lerp", "weight", "'0.5'"),
    # ---- reductions: dims in range, no duplicates, ints -----------------------------------------
    bad("x.sum(dim=(0, 0))", ValueError, "sum", "dim", "(0, 0)"),
    bad("x.sum(dim=(1, -1))", ValueError, "sum", "(1, -1)"),
    bad("x.sum(dim=2)", IndexError, "sum", "2"),
    bad("x.sum(dim=1.0)", TypeError, "sum", "dim", "1.0"),
    bad("x.sum(dim=True)", TypeError, "sum", "dim", "True", vs_torch=False),
    bad('x.sum(dim="0")', TypeError, "sum", "dim", "'0'", vs_torch=False),
    bad("lib.sum(3.0)", TypeError, "sum", "input", "float"),
    bad("x.mean(dim=[0, -2])", ValueError, "mean", "[0, -2]"),
    bad("lib.mean(i([1, 2]))", TypeError, "mean", "int64"),
    bad("lib.mean([1.0, 2.0])", TypeError, "mean", "input", "list"),
    bad("x.var(dim=(1, 1))", ValueError, "var", "(1, 1)"),
    bad("x.std(dim=-3)", IndexError, "std", "-3"),
    bad("x.amax(dim=(0, 0))", ValueError, "amax", "(0, 0)"),
    bad("x.amin(dim=5)", IndexError, "amin", "5"),
    bad("x.max(dim=(0, 1))", TypeError, "max", "dim", "(0, 1)"),
    bad("lib.zeros(0).max()", ValueError, "max", "(0,)"),
    bad("lib.zeros(0, 3).min(dim=0)", ValueError, "min", "(0, 3)"),
    bad("x.argmax(dim=2)", IndexError, "argmax", "2"),
    bad("lib.zeros(0).argmax()", ValueError, "argmax", "(0,)"),
    bad("x.argmin(dim=0.0)", TypeError, "argmin", "0.0"),
    bad("lib.logsumexp(x, dim=(0, 0))", ValueError, "logsumexp", "(0, 0)"),
    bad("(x > 0).any(dim=3)", IndexError, "any", "3"),
    bad("(x > 0).all(dim=(0, 0))", ValueError, "all", "(0, 0)"),
    bad("lib.prod(x, dim=2)", IndexError, "prod", "2"),
    bad("lib.cumsum(x, dim=2)", IndexError, "cumsum", "2"),
    bad('lib.norm(x, p="bogus")', ValueError, "norm", "'bogus'"),
    bad("lib.norm(x, dim=(0, 0))", ValueError, "norm", "(0, 0)"),
    # ---- movement -------------------------------------------------------------------------------
    bad("x.flatten(1, 0)", ValueError, "flatten", "start_dim", "1", "end_dim", "0"),
    bad("x.flatten(0, 5)", IndexError, "flatten", "5"),
    bad("x.flatten(0.0)", TypeError, "flatten", "0.0"),
    bad("x.reshape(2, 6.0)", TypeError, "reshape", "6.0"),
    bad("x.reshape(True, 12)", TypeError, "reshape", "True", vs_torch=False),
    bad("x.reshape(-2, 6)", ValueError, "reshape", "-2"),
    bad('x.reshape("12")', TypeError, "reshape", "'12'"),
    bad("x.view(12.0)", TypeError, "reshape", "12.0"),
    bad("x.permute(0, 0)", ValueError, "permute", "(0, 0)"),
    bad("x.permute(0)", ValueError, "permute", "(0,)"),
    bad("x.permute(1.0, 0)", TypeError, "permute", "1.0"),
    bad("x.transpose(0, 5)", IndexError, "transpose", "5"),
    bad("x.transpose(0, 1.0)", TypeError, "transpose", "1.0"),
    bad("lib.ones(1, 4).expand(-2, 4)", ValueError, "expand", "-2"),
    bad("lib.ones(1, 4).expand(3.0, 4)", TypeError, "expand", "3.0"),
    bad("lib.ones(4).expand(-1, 4)", ValueError, "expand", "-1"),
    bad("x.squeeze(5)", IndexError, "squeeze", "5"),
    bad("x.squeeze(0.0)", TypeError, "squeeze", "0.0"),
    bad("x.unsqueeze(4)", IndexError, "unsqueeze", "4"),
    bad("x.unsqueeze(1.0)", TypeError, "unsqueeze", "1.0"),
    bad("x.gather(1, i([[-1]] * 3))", IndexError, "gather", "-1"),
    bad("x.gather(1, i([[4]] * 3))", IndexError, "gather", "4"),
    bad("x.gather(1, i([0, 1]))", ValueError, "gather", "index", "(2,)"),
    bad("x.gather(1, x)", TypeError, "gather", "index", "float32"),
    bad("x.gather(1, [[0]])", TypeError, "gather", "index", "list"),
    bad("x.gather(2, i([[0]]))", IndexError, "gather", "2"),
    bad("lib.index_select(x, 0, i([-1]))", IndexError, "index_select", "-1"),
    bad("lib.index_select(x, 1, i([4]))", IndexError, "index_select", "4"),
    bad("lib.index_select(x, 0, i([[0]]))", ValueError, "index_select", "index", "(1, 1)"),
    bad("lib.index_select(x, 0, lib.tensor([0.0]))", TypeError, "index_select", "index", "float32"),
    bad("lib.index_select(x, 0, [0])", TypeError, "index_select", "index", "list"),
    bad("lib.cat([x, x], dim=2)", IndexError, "cat", "2"),
    bad("lib.cat([x, 1.0])", TypeError, "cat", "float"),
    bad("lib.cat(x)", TypeError, "cat", "Tensor"),
    bad("lib.stack([lib.ones(2), [1.0, 2.0]])", TypeError, "stack", "list"),
    bad("lib.stack(x)", TypeError, "stack", "Tensor"),
    bad("lib.stack([x], dim=4)", IndexError, "stack", "4"),
    bad("x.split(0)", ValueError, "split", "0"),
    bad("x.split(-1)", ValueError, "split", "-1"),
    bad("x.split([2, -1, 2])", ValueError, "split", "-1"),
    bad("x.split(1.5)", TypeError, "split", "1.5"),
    bad("x.split([1, 1])", ValueError, "split", "[1, 1]"),
    bad("x.chunk(0)", ValueError, "chunk", "chunks", "0"),
    bad("x.chunk(-2)", ValueError, "chunk", "-2"),
    bad("x.chunk(2.0)", TypeError, "chunk", "2.0"),
    bad("x.tril(0.5)", TypeError, "tril", "diagonal", "0.5"),
    bad("lib.ones(3).triu()", ValueError, "triu", "(3,)"),
    bad("x.repeat_interleave(-1, 0)", ValueError, "repeat_interleave", "-1"),
    bad("x.repeat(-1, 1)", ValueError, "repeat", "-1"),
    bad("x.repeat(2)", ValueError, "repeat", "(2,)"),
    bad("x.repeat(2.0, 1)", TypeError, "repeat", "2.0"),
    bad("lib.tile(x, (-1,))", ValueError, "tile", "-1"),
    bad("lib.narrow(x, 0, 2, 5)", IndexError, "narrow", "5"),
    bad("lib.narrow(x, 0, 0, -1)", ValueError, "narrow", "-1"),
    bad("lib.narrow(x, 0, 5, 0)", IndexError, "narrow", "5"),
    bad("lib.select(x, 0, 3)", IndexError, "select", "3"),
    bad("lib.select(x, 0, -4)", IndexError, "select", "-4"),
    bad("lib.select(x, 0, 1.0)", TypeError, "select", "1.0"),
    bad("lib.unflatten(x, 1, (3, 3))", ValueError, "unflatten", "(3, 3)"),
    bad("lib.unbind(x, 5)", IndexError, "unbind", "5"),
    bad("lib.movedim(x, 0, 5)", IndexError, "movedim", "5"),
    bad("lib.movedim(x, (0, 0), (0, 1))", ValueError, "movedim", "(0, 0)"),
    bad("lib.flip(x, (0, 0))", ValueError, "flip", "(0, 0)"),
    bad("lib.flip(x, (5,))", IndexError, "flip", "5"),
    bad("lib.roll(x, 1, 5)", IndexError, "roll", "5"),
    bad("lib.roll(x, 1.5, 0)", TypeError, "roll", "1.5"),
    bad("F.pad(x, (1,))", ValueError, "pad", "(1,)"),
    bad('F.pad(x, (1, 1), mode="bogus")', ValueError, "pad", "'bogus'"),
    bad("F.pad(x, (1.5, 1))", TypeError, "pad", "1.5"),
    bad("F.pad(x, (1, 1, 1, 1, 1, 1))", ValueError, "pad", "(1, 1, 1, 1, 1, 1)"),
    bad("lib.diagonal(x, 0, 0, 0)", RuntimeError, "diagonal", "0"),
    bad("lib.diagonal(x, 0, 0, 2)", IndexError, "diagonal", "2"),
    bad("x[3]", IndexError, "getitem", "3"),
    bad("x[1.0]", IndexError, "1.0"),
    bad("x[i([3])]", IndexError, "getitem", "3"),
    bad("x[lib.tensor([0.0])]", IndexError, "getitem", "float32"),
    # ---- sorting, sampling, scatter ---------------------------------------------------------
    bad("lib.topk(x, 5)", ValueError, "topk", "5"),
    bad("lib.topk(x, -1)", ValueError, "topk", "-1"),
    bad("lib.topk(x, 1.0)", TypeError, "topk", "1.0"),
    bad("lib.sort(x, dim=5)", IndexError, "sort", "5"),
    bad("lib.argsort(x, dim=0.0)", TypeError, "argsort", "0.0"),
    bad("lib.multinomial(lib.ones(3), 0)", ValueError, "multinomial", "0"),
    bad("lib.multinomial(lib.tensor([0.5, -0.1]), 1)", ValueError, "multinomial", "-0.1"),
    bad("lib.multinomial(lib.tensor([0.5, nan]), 1)", ValueError, "multinomial", "nan"),
    bad("lib.multinomial(lib.ones(3), 5)", ValueError, "multinomial", "5"),
    bad("lib.multinomial(lib.ones(3), 1.0)", TypeError, "multinomial", "1.0"),
    bad("lib.scatter(x, 1, i([[-1]]), x)", IndexError, "scatter", "-1"),
    bad("lib.scatter_add(x, 1, i([[4]]), x)", IndexError, "scatter_add", "4"),
    bad("lib.index_add(x, 0, i([-1]), lib.ones(1, 4))", IndexError, "index_add", "-1"),
    bad("lib.index_fill(x, 0, i([3]), 0.0)", IndexError, "index_fill", "3"),
    # ---- nn ops ------------------------------------------------------------------------------
    bad("lib.softmax(x, 2)", IndexError, "softmax", "2"),
    bad("lib.softmax(x, 1.0)", TypeError, "softmax", "1.0"),
    bad("lib.softmax(1.0, 0)", TypeError, "softmax", "input", "float"),
    bad("F.log_softmax(x, dim=-3)", IndexError, "log_softmax", "-3"),
    bad("F.dropout(x, p=1.5)", ValueError, "dropout", "p", "1.5"),
    bad("F.dropout(x, p=-0.1)", ValueError, "dropout", "p", "-0.1"),
    bad("F.dropout(x, p=nan)", ValueError, "dropout", "p", "nan", vs_torch=False),
    bad('F.dropout(x, p="0.1")', TypeError, "dropout", "p", "'0.1'"),
    bad("F.dropout(x, p=2.0, training=False)", ValueError, "dropout", "2.0"),
    bad(
        "F.scaled_dot_product_attention(q, q, q, dropout_p=1.5)",
        ValueError,
        "scaled_dot_product_attention",
        "dropout_p",
        "1.5",
        vs_torch=False,
    ),
    bad(
        "F.scaled_dot_product_attention(q, q, q, dropout_p=-0.5)",
        ValueError,
        "scaled_dot_product_attention",
        "dropout_p",
        "-0.5",
        vs_torch=False,
    ),
    bad(
        "F.scaled_dot_product_attention(q, q, q, dropout_p=nan)",
        ValueError,
        "scaled_dot_product_attention",
        "dropout_p",
        "nan",
        vs_torch=False,
    ),
    bad(
        "F.scaled_dot_product_attention(q, q, q, scale=nan)",
        ValueError,
        "scaled_dot_product_attention",
        "scale",
        "nan",
        vs_torch=False,
    ),
    bad(
        "F.scaled_dot_product_attention(1.0, q, q)",
        TypeError,
        "scaled_dot_product_attention",
        "query",
        "float",
    ),
    bad("F.embedding(i([-1]), lib.ones(5, 2))", IndexError, "embedding", "-1"),
    bad("F.embedding(i([5]), lib.ones(5, 2))", IndexError, "embedding", "5"),
    bad("F.embedding(lib.tensor([1.0]), lib.ones(5, 2))", TypeError, "embedding", "float32"),
    bad(
        "F.embedding(i([1]), lib.ones(5, 2), padding_idx=7)",
        ValueError,
        "embedding",
        "padding_idx",
        "7",
    ),
    bad("F.one_hot(i([3]), 2)", IndexError, "one_hot", "3"),
    bad("F.one_hot(i([-1]), 3)", IndexError, "one_hot", "-1"),
    bad("F.one_hot(lib.tensor([1.0]), 3)", TypeError, "one_hot", "float32"),
    bad("F.cross_entropy(x, i([0, 1, 4]))", IndexError, "cross_entropy", "4"),
    bad("F.cross_entropy(x, i([0, 1, -1]))", IndexError, "cross_entropy", "-1"),
    bad(
        "F.cross_entropy(x, i([0, 1, 2]), label_smoothing=1.5)",
        ValueError,
        "cross_entropy",
        "label_smoothing",
        "1.5",
    ),
    bad('F.cross_entropy(x, i([0, 1, 2]), reduction="avg")', ValueError, "cross_entropy", "'avg'"),
    bad("F.nll_loss(x, i([0, 1, 9]))", IndexError, "nll_loss", "9"),
    bad("F.layer_norm(x, (5,))", ValueError, "layer_norm", "(5,)"),
    bad("F.layer_norm(x, (4.0,))", TypeError, "layer_norm", "4.0"),
    bad("F.rms_norm(x, (3,))", ValueError, "rms_norm", "(3,)"),
    bad('F.mse_loss(x, x, reduction="bogus")', ValueError, "mse_loss", "'bogus'"),
    bad("F.mse_loss(x, 1.0)", TypeError, "mse_loss", "target", "float"),
    bad("F.huber_loss(x, x, delta=-1.0)", ValueError, "huber_loss", "delta", "-1.0"),
    bad("F.smooth_l1_loss(x, x, beta=-1.0)", ValueError, "smooth_l1_loss", "beta", "-1.0"),
    bad("F.normalize(x, dim=2)", IndexError, "normalize", "2"),
    bad("F.cosine_similarity(x, x, dim=3)", IndexError, "cosine_similarity", "3"),
    bad(
        "F.info_nce(x, x, temperature=nan)",
        ValueError,
        "info_nce",
        "temperature",
        "nan",
        vs_torch=False,
    ),
    bad(
        "F.info_nce(x, x, temperature=0.0)",
        ValueError,
        "info_nce",
        "temperature",
        "0.0",
        vs_torch=False,
    ),
    bad(
        'F.leaky_relu(x, negative_slope="0.1")', TypeError, "leaky_relu", "negative_slope", "'0.1'"
    ),
    bad("F.softplus(x, beta=0.0)", ValueError, "softplus", "beta", "0.0", vs_torch=False),
    bad("F.linear(x, 2.0)", TypeError, "linear", "weight", "float"),
    bad("lib.matmul(x, 2.0)", TypeError, "matmul", "float"),
    # ---- Tensor methods and the less common functions ----------------------------------------
    bad("x.repeat(-1, 1)", ValueError, "repeat", "-1"),
    bad("x.new_zeros(-1)", ValueError, "zeros", "-1"),
    bad("x.new_ones(2.5)", TypeError, "ones", "2.5"),
    bad("x.expand(2.0, 4)", TypeError, "expand", "2.0"),
    bad("x.masked_fill(x > 0, None)", TypeError, "masked_fill", "value", "None"),
    bad("x.index_select(0, i([-1]))", IndexError, "index_select", "-1"),
    bad("x.narrow(0, -4, 1)", IndexError, "narrow", "-4"),
    bad("x.unflatten(1, (2, 3))", ValueError, "unflatten", "(2, 3)"),
    bad("x.movedim(0, 2)", IndexError, "movedim", "2"),
    bad("x.split([1, 2], dim=2)", IndexError, "split", "2"),
    bad("x.topk(0.5)", TypeError, "topk", "0.5"),
    bad("x.std(dim=(0, 0))", ValueError, "std", "(0, 0)"),
    bad("x.cumsum(1.5)", TypeError, "cumsum", "1.5"),
    bad("x.squeeze((0, 0))", ValueError, "squeeze", "(0, 0)"),
    bad("x.softmax(None)", TypeError, "softmax", "None"),
    bad("x.log_softmax(1.5)", TypeError, "log_softmax", "1.5"),
    bad("lib.where(x > 0, x, 'a')", TypeError, "where", "'a'"),
    bad("lib.einsum(5, x)", TypeError, "einsum", "equation", "int"),
    bad("lib.einsum('ij,jk->ik', x, 2.0)", TypeError, "einsum", "operands[1]", "float"),
    bad("lib.cat([x], dim=1.5)", TypeError, "cat", "1.5"),
    bad("lib.full((2,), 'a')", TypeError, "full", "fill_value", "'a'"),
    bad("lib.randint(-5, -10, (2,))", ValueError, "randint", "-5", "-10"),
    bad("lib.multinomial(lib.ones(3), 2, replacement='yes')", TypeError, "multinomial", "'yes'"),
    bad("lib.mm(x, 2)", TypeError, "mm", "mat2", "int"),
    bad("lib.dot(lib.ones(3), 3.0)", TypeError, "dot", "float"),
    bad("lib.outer(lib.ones(3), 3.0)", TypeError, "outer", "float"),
    bad("lib.hstack(x)", TypeError, "hstack", "Tensor"),
    bad("lib.vstack([x, 1.0])", TypeError, "vstack", "float"),
    bad("lib.masked_select(x, x)", TypeError, "masked_select", "mask", "float32"),
    bad("lib.numel(3)", TypeError, "numel", "int"),
    bad("F.binary_cross_entropy(x, x * 2)", ValueError, "binary_cross_entropy", "target", "2.0"),
    bad("F.nll_loss(x, i([0, 1, -5]))", IndexError, "nll_loss", "-5"),
    bad("F.cosine_similarity(x, x, eps=nan)", ValueError, "cosine_similarity", "eps", "nan"),
    bad("F.normalize(x, p=nan)", ValueError, "normalize", "p", "nan", vs_torch=False),
    bad("F.pad(x, (1, 1), value='a')", TypeError, "pad", "value", "'a'"),
    bad("F.embedding(i([1]), 5)", TypeError, "embedding", "weight", "int"),
    bad("F.one_hot(i([1]), 1.5)", TypeError, "one_hot", "num_classes", "1.5"),
    bad("F.layer_norm(x, (4,), eps=nan)", ValueError, "layer_norm", "eps", "nan", vs_torch=False),
    bad("F.rms_norm(x, (4,), eps=-1.0)", ValueError, "rms_norm", "eps", "-1.0", vs_torch=False),
    bad("F.dropout(x, p=0.5, training='yes')", TypeError, "dropout", "training", "'yes'"),
]


def namespace(lib):
    """The names a case expression may use, bound to tinytensor or to torch."""
    return {
        "lib": lib,
        "F": lib.nn.functional,
        "x": lib.ones(3, 4),
        "q": lib.ones(1, 2, 3),  # (heads, tokens, features) for attention
        "i": lambda values: lib.tensor(values, dtype=lib.int64),
        "nan": math.nan,
        "inf": math.inf,
    }


def message_with(fragments):
    """A regex that matches a message holding every fragment literally, in any order."""
    return "(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments)


@pytest.mark.parametrize("expr, kind, fragments, vs_torch", CASES)
def test_bad_call_raises_naming_function_and_value(expr, kind, fragments, vs_torch):
    with pytest.raises(kind, match=message_with(fragments)):
        eval(expr, namespace(tt))  # noqa: S307 - the expressions are this file's own


@pytest.mark.parametrize("expr, kind, fragments, vs_torch", [c for c in CASES if c.values[3]])
def test_pytorch_raises_for_the_same_call(expr, kind, fragments, vs_torch, torch):
    with pytest.raises(Exception):  # noqa: B017, PT011 - torch's types vary; that it raises matters
        eval(expr, namespace(torch))  # noqa: S307


def test_the_battery_is_large():
    assert len(CASES) >= 150, len(CASES)


def test_two_python_numbers_make_a_tensor_as_in_pytorch(torch):
    """torch.add(1, 2) is tensor(3): not a bad call, so it must not raise here either."""
    for ours, theirs in ((tt.add(1, 2), torch.add(1, 2)), (tt.mul(2.0, 3.0), torch.mul(2.0, 3.0))):
        assert ours.item() == theirs.item()
        assert (ours.dtype == tt.int64) == (theirs.dtype == torch.int64)


def test_bitwise_not_keeps_integer_and_bool_semantics(torch):
    a, b = [0, 1, -3], [True, False]
    assert tt.bitwise_not(tt.tensor(a)).tolist() == (~torch.tensor(a)).tolist()
    assert tt.bitwise_not(tt.tensor(b)).tolist() == (~torch.tensor(b)).tolist()


def test_invert_of_a_float_tensor_raises():
    with pytest.raises(TypeError, match="bitwise_not"):
        ~tt.ones(3, 4)


def test_gather_reads_only_the_index_sized_corner_as_pytorch(torch):
    """An index smaller than the input outside `dim` reads x[:i0, :i1, ...] (NumPy's
    take_along_axis would broadcast it over all rows instead)."""
    x = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    ours = tt.tensor(x).gather(1, tt.tensor([[2, 0]]))
    theirs = torch.tensor(x).gather(1, torch.tensor([[2, 0]]))
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize(
    "expr",
    [
        "lib.index_fill(x, 0, i([-1]), 0.0)",
        "lib.select(x, 1, -1)",
        "lib.narrow(x, 1, -3, 2)",
        "x[i([-1, 0])]",
        "x.transpose(-1, -2)",
        "x.flatten(-2, -1)",
    ],
)
def test_negative_indices_that_pytorch_wraps_are_wrapped_here_too(expr, torch):
    """Where PyTorch reads -1 as the last position, so does tinytensor (same values)."""
    x = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    ours = eval(expr, {**namespace(tt), "x": tt.tensor(x)})  # noqa: S307
    theirs = eval(expr, {**namespace(torch), "x": torch.tensor(x)})  # noqa: S307
    assert ours.tolist() == theirs.tolist()
