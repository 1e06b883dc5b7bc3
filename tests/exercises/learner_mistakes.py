"""Wrong backward passes of the kinds learners really write, one per function below, for the
checker to be measured on (test_mistakes.py).

Each is the body a learner would put in the exercise's `backward`, written the way they write
it (not derived from the reference solution), with the cause the checker should name: a
mistake key of checker/mistakes ("mistake:softmax-diagonal-only") or a kind of hint that
names the cause by itself ("sign", "inplace", "linear", ...), or None where no hint names it.
`python -m tests.exercises.learner_mistakes` prints, per exercise, how many are caught and how
many get a hint naming their cause.

The first group was written with the catalogue. The second to eighth were each written
afterwards without looking at it, and measured as they came: 20 of 29 named, then 9 of 24,
9 of 18 (one of those passed: a table sized by the largest id, which no case caught; now one
case has rows that are never looked up), 11 of 15, 10 of 16; the seventh writes the classic
mistakes (the ones issue 15 lists) again in other code: 14 of 14; the eighth: 8 of 14. The
catalogue then learned from each; the mistakes it still does not name carry cause None.
Exercise 14 (second order) came later: its first 25 were written with its catalogue; its second
group of 8, written afterwards in other forms, had 2 named as they came (a sign and a setting),
6 after the catalogue learned from it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from examples.exercises.checker import catalogue, grading

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class WrongSolution:
    exercise: str
    function: str  # the class whose backward is wrong
    cause: str | None  # the kind in the report that names the cause; None: none does (yet)
    backward: Callable

    @property
    def name(self) -> str:
        return self.backward.__name__

    @functools.cache  # noqa: B019 (a few dozen frozen instances, kept for the session)
    def grade(self):
        """The checker's report on the exercise with this backward (other parts: solutions)."""
        ex = catalogue.find(self.exercise)
        stubs = grading.load_module(ROOT / "examples" / "exercises" / f"{ex.stem}.py")
        solutions = grading.load_module(ROOT / "examples" / "solutions" / f"{ex.stem}.py")
        classes = {p.function: getattr(solutions, p.function) for p in ex.parts}
        stub = getattr(stubs, self.function)
        classes[self.function] = type(self.function, (stub,), {"backward": self.backward})
        return grading.grade(ex, module=SimpleNamespace(**classes))


WRONG: list[WrongSolution] = []


def wrong(exercise, cause, function=None):
    """Registers the decorated backward as a wrong solution of `exercise`."""

    def register(backward):
        fn = function or catalogue.find(exercise).parts[0].function
        WRONG.append(WrongSolution(exercise, fn, cause, backward))
        return backward

    return register


def _t(a):
    return a.swapaxes(-1, -2)


# ---- 1 ReLU -------------------------------------------------------------------------------


@wrong("relu", "inplace")
def relu_zeroes_g_in_place(self, g):
    g[self.x <= 0] = 0
    return g


@wrong("relu", "inplace")
def relu_multiplies_g_in_place(self, g):
    g *= self.x > 0
    return g


@wrong("relu", "mistake:relu-inverted-mask")
def relu_inverted_mask(self, g):
    return g * (self.x < 0)


@wrong("relu", "mistake:relu-times-output")
def relu_times_output(self, g):
    return g * np.maximum(self.x, 0)


@wrong("relu", "linear")
def relu_mask_without_g(self, g):
    return (self.x > 0).astype(self.x.dtype)


# ---- 2 sigmoid ------------------------------------------------------------------------------


@wrong("sigmoid", "sign")
def sigmoid_sign(self, g):
    return g * self.z * (self.z - 1)


@wrong("sigmoid", "mistake:sigmoid-missing-one-minus-z")
def sigmoid_only_z(self, g):
    return g * self.z


@wrong("sigmoid", "mistake:sigmoid-tanh-derivative")
def sigmoid_tanh_derivative(self, g):
    return g * (1 - self.z**2)


@wrong("sigmoid", "linear")
def sigmoid_without_g(self, g):
    return self.z * (1 - self.z)


# ---- 3 broadcasting add ---------------------------------------------------------------------


@wrong("broadcast_add", "reduce")
def add_no_reduction(self, g):
    return g, g


@wrong("broadcast_add", "mistake:add-mean-not-sum")
def add_averages(self, g):
    def back(shape):
        out = g.mean(axis=tuple(range(g.ndim - len(shape))))
        axes = tuple(i for i, n in enumerate(shape) if n == 1 and out.shape[i] > 1)
        return out.mean(axis=axes, keepdims=True)

    return back(self.x_shape), back(self.y_shape)


@wrong("broadcast_add", "mistake:add-no-keepdims")
def add_forgets_keepdims(self, g):
    def back(shape):
        lead = g.ndim - len(shape)
        out = g.sum(axis=tuple(range(lead)))
        axes = tuple(i for i, n in enumerate(shape) if n == 1 and out.shape[i] > 1)
        return out.sum(axis=axes)

    return back(self.x_shape), back(self.y_shape)


@wrong("broadcast_add", "mistake:add-only-leading")
def add_sums_only_leading_dims(self, g):
    def back(shape):
        while g.ndim > len(shape):
            return g.sum(axis=tuple(range(g.ndim - len(shape))))
        return g

    return back(self.x_shape), back(self.y_shape)


# ---- 4 sum and mean -------------------------------------------------------------------------


@wrong("sum_mean", "mistake:mean-missing-1/N", "MeanDim")
def mean_without_one_over_n(self, g):
    if not self.keepdim:
        g = np.expand_dims(g, self.dim)
    return np.broadcast_to(g, self.shape)


@wrong("sum_mean", "mistake:mean-N-from-last-dim", "MeanDim")
def mean_divides_by_last_dim(self, g):
    if not self.keepdim:
        g = np.expand_dims(g, self.dim)
    return np.broadcast_to(g, self.shape) / self.shape[-1]


@wrong("sum_mean", "expand", "SumDim")
def sum_returns_g(self, g):
    return g


@wrong("sum_mean", "mistake:sum-expanded-at-wrong-dim", "SumDim")
def sum_expands_last_dim(self, g):
    if not self.keepdim:
        g = np.expand_dims(g, -1)
    return np.broadcast_to(g, self.shape)


# ---- 5 matrix products ----------------------------------------------------------------------


@wrong("matmul", "mistake:matmul-gx-missing-transpose")
def matmul_gx_without_transpose(self, g):
    return g @ self.y, self.x.T @ g


@wrong("matmul", "mistake:swapped")
def matmul_swapped_outputs(self, g):
    gx = g @ self.y.T
    gy = self.x.T @ g
    return gy, gx


@wrong("matmul", "transposed")
def matmul_gy_transposed(self, g):
    return g @ self.y.T, g.T @ self.x


@wrong("matmul", "mistake:matmul-elementwise")
def matmul_elementwise(self, g):
    return g * self.y, g * self.x


@wrong("matmul", "mistake:batched-dot-T", "BatchedMatMul")
def bmm_with_dot_t(self, g):
    return g @ self.y.T, self.x.T @ g


@wrong("matmul", "mistake:bmm-batch-not-reduced", "BatchedMatMul")
def bmm_batch_not_reduced(self, g):
    return g @ self.y.swapaxes(-1, -2), self.x.swapaxes(-1, -2) @ g


# ---- 6 GELU ---------------------------------------------------------------------------------


@wrong("gelu", "mistake:gelu-missing-x-pdf")
def gelu_exact_only_cdf(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * (0.5 * (1 + self.t) + 0.5 * x * (1 - self.t**2) * du)
    return g * self.cdf


@wrong("gelu", "mistake:gelu-tanh-du-missing-3")
def gelu_tanh_du_without_3(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 0.044715 * x**2)
        return g * (0.5 * (1 + self.t) + 0.5 * x * (1 - self.t**2) * du)
    return g * (self.cdf + x * np.exp(-(x**2) / 2) / math.sqrt(2 * math.pi))


@wrong("gelu", "mistake:gelu-pdf-unnormalised")
def gelu_pdf_without_normalisation(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * (0.5 * (1 + self.t) + 0.5 * x * (1 - self.t**2) * du)
    return g * (self.cdf + x * np.exp(-(x**2) / 2))


@wrong("gelu", "mistake:gelu-tanh-one-minus-t")
def gelu_tanh_derivative_of_tanh_wrong(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * (0.5 * (1 + self.t) + 0.5 * x * (1 - self.t) * du)
    return g * (self.cdf + x * np.exp(-(x**2) / 2) / math.sqrt(2 * math.pi))


# ---- 7 embedding ----------------------------------------------------------------------------


@wrong("embedding", "mistake:embedding-written-once")
def embedding_fancy_index_add(self, g):
    gw = np.zeros(self.weight_shape, dtype=g.dtype)
    gw[self.ids] += g
    return gw


@wrong("embedding", "mistake:embedding-written-once")
def embedding_loop_assigns(self, g):
    gw = np.zeros(self.weight_shape, dtype=g.dtype)
    rows = g.reshape(-1, self.weight_shape[1])
    for p, i in enumerate(self.ids.reshape(-1)):
        gw[i] = rows[p]
    return gw


@wrong("embedding", "mistake:embedding-returned-g")
def embedding_returns_g(self, g):
    return g


@wrong("embedding", "dtype")
def embedding_float64_table(self, g):
    gw = np.zeros(self.weight_shape)
    np.add.at(gw, self.ids.reshape(-1), g.reshape(-1, self.weight_shape[1]))
    return gw


# ---- 8 softmax ------------------------------------------------------------------------------


@wrong("softmax", "mistake:softmax-diagonal-only")
def softmax_diagonal_only(self, g):
    return g * self.p * (1 - self.p)


@wrong("softmax", "mistake:softmax-sum-of-g")
def softmax_sum_of_g(self, g):
    p = self.p
    return p * g - p * g.sum(axis=self.dim, keepdims=True)


@wrong("softmax", "mistake:softmax-last-axis")
def softmax_sums_last_axis(self, g):
    p = self.p
    return p * (g - (g * p).sum(axis=-1, keepdims=True))


@wrong("softmax", "mistake:softmax-missing-outer-p")
def softmax_missing_outer_p(self, g):
    return g - (g * self.p).sum(axis=self.dim, keepdims=True)


@wrong("softmax", "mistake:softmax-no-keepdims")
def softmax_sum_without_keepdims(self, g):
    p = self.p
    return p * (g - (g * p).sum(axis=self.dim))


# ---- 9 softmax + cross-entropy ----------------------------------------------------------------


@wrong("softmax_cross_entropy", "mistake:ce-every-row-target")
def ce_every_row_every_target(self, g):
    grad = self.p.copy()
    grad[:, self.target] -= 1
    return grad * g


@wrong("softmax_cross_entropy", "mistake:ce-missing-1/N")
def ce_without_one_over_n(self, g):
    grad = self.p.copy()
    grad[np.arange(len(grad)), self.target] -= 1
    return grad * g


@wrong("softmax_cross_entropy", "sign")
def ce_true_minus_predicted(self, g):
    n = self.p.shape[0]
    onehot = np.zeros_like(self.p)
    onehot[np.arange(n), self.target] = 1
    return (onehot - self.p) / n * g


@wrong("softmax_cross_entropy", "mistake:ce-divides-by-C")
def ce_divides_by_classes(self, g):
    n, c = self.p.shape
    grad = self.p.copy()
    grad[np.arange(n), self.target] -= 1
    return grad / c * g


# ---- 10 RMSNorm -----------------------------------------------------------------------------


def _rows(g):
    return tuple(range(g.ndim - 1))


@wrong("rmsnorm", "mistake:rmsnorm-statistics-constant")
def rmsnorm_r_held_constant(self, g):
    return g * self.weight * self.r, (g * self.xhat).sum(axis=_rows(g))


@wrong("rmsnorm", "mistake:rmsnorm-sum-not-mean")
def rmsnorm_sum_in_correction(self, g):
    gh = g * self.weight
    gx = self.r * (gh - self.xhat * (gh * self.xhat).sum(axis=-1, keepdims=True))
    return gx, (g * self.xhat).sum(axis=_rows(g))


@wrong("rmsnorm", "reduce")
def rmsnorm_weight_grad_not_summed(self, g):
    gh = g * self.weight
    gx = self.r * (gh - self.xhat * (gh * self.xhat).mean(axis=-1, keepdims=True))
    return gx, g * self.xhat


@wrong("rmsnorm", "mistake:rmsnorm-forgot-weight")
def rmsnorm_forgets_weight(self, g):
    gx = self.r * (g - self.xhat * (g * self.xhat).mean(axis=-1, keepdims=True))
    return gx, (g * self.xhat).sum(axis=_rows(g))


# ---- 11 LayerNorm ---------------------------------------------------------------------------


def _ln_params(self, g):
    return (g * self.xhat).sum(axis=_rows(g)), g.sum(axis=_rows(g))


@wrong("layernorm", "mistake:layernorm-statistics-constant")
def layernorm_statistics_constant(self, g):
    return (g * self.weight * self.r, *_ln_params(self, g))


@wrong("layernorm", "mistake:layernorm-variance-constant")
def layernorm_only_mean_path(self, g):
    gh = g * self.weight
    return (self.r * (gh - gh.mean(axis=-1, keepdims=True)), *_ln_params(self, g))


@wrong("layernorm", "mistake:layernorm-mean-constant")
def layernorm_rmsnorm_formula(self, g):
    gh = g * self.weight
    gx = self.r * (gh - self.xhat * (gh * self.xhat).mean(axis=-1, keepdims=True))
    return (gx, *_ln_params(self, g))


@wrong("layernorm", "mistake:swapped")
def layernorm_bias_and_weight_swapped(self, g):
    gh = g * self.weight
    xhat = self.xhat
    gx = self.r * (
        gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True)
    )
    gw, gb = _ln_params(self, g)
    return gx, gb, gw


@wrong("layernorm", "mistake:layernorm-unbiased-variance")
def layernorm_n_minus_one(self, g):
    d = g.shape[-1]
    gh = g * self.weight
    xhat = self.xhat
    gx = self.r * (
        gh
        - gh.mean(axis=-1, keepdims=True)
        - xhat * (gh * xhat).sum(axis=-1, keepdims=True) / (d - 1)
    )
    return (gx, *_ln_params(self, g))


# ---- 12 BatchNorm ---------------------------------------------------------------------------


def _bn_params(self, g):
    return (g * self.xhat).sum(axis=0), g.sum(axis=0)


@wrong("batchnorm", "mistake:batchnorm-sum-not-mean")
def batchnorm_sums_instead_of_means(self, g):
    gh = g * self.weight
    xhat = self.xhat
    gx = self.r * (
        gh - gh.sum(axis=0, keepdims=True) - xhat * (gh * xhat).sum(axis=0, keepdims=True)
    )
    return (gx, *_bn_params(self, g))


@wrong("batchnorm", "mistake:batchnorm-layernorm-axes")
def batchnorm_copied_layernorm(self, g):
    gh = g * self.weight
    xhat = self.xhat
    gx = self.r * (
        gh - gh.mean(axis=-1, keepdims=True) - xhat * (gh * xhat).mean(axis=-1, keepdims=True)
    )
    return (gx, *_bn_params(self, g))


@wrong("batchnorm", "mistake:batchnorm-unbiased-variance")
def batchnorm_n_minus_one(self, g):
    n = g.shape[0]
    gh = g * self.weight
    xhat = self.xhat
    gx = self.r * (
        gh
        - gh.mean(axis=0, keepdims=True)
        - xhat * (gh * xhat).sum(axis=0, keepdims=True) / (n - 1)
    )
    return (gx, *_bn_params(self, g))


@wrong("batchnorm", "mistake:batchnorm-statistics-constant")
def batchnorm_eval_mode_gradient(self, g):
    return (g * self.weight * self.r, *_bn_params(self, g))


@wrong("batchnorm", "mistake:batchnorm-params-wrong-axis")
def batchnorm_params_over_channels(self, g):
    gh = g * self.weight
    xhat = self.xhat
    gx = self.r * (
        gh - gh.mean(axis=0, keepdims=True) - xhat * (gh * xhat).mean(axis=0, keepdims=True)
    )
    return gx, (g * xhat).sum(axis=1), g.sum(axis=1)


# ---- 13 attention ---------------------------------------------------------------------------


def _attention_parts(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    return p, dp, dv


@wrong("attention", "mistake:attention-dk-missing-transpose")
def attention_dk_is_ds_q(self, g):
    p, dp, dv = _attention_parts(self, g)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (ds @ self.q) * self.scale, dv


@wrong("attention", "mistake:attention-missing-scale")
def attention_without_scale(self, g):
    p, dp, dv = _attention_parts(self, g)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return ds @ self.k, _t(ds) @ self.q, dv


@wrong("attention", "mistake:attention-softmax-diagonal-only")
def attention_softmax_diagonal(self, g):
    p, dp, dv = _attention_parts(self, g)
    ds = dp * p * (1 - p)
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


@wrong("attention", "mistake:attention-softmax-sum-of-g")
def attention_softmax_sum_of_dp(self, g):
    p, dp, dv = _attention_parts(self, g)
    ds = p * (dp - dp.sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


@wrong("attention", "mistake:swapped")
def attention_dq_dk_swapped(self, g):
    p, dp, dv = _attention_parts(self, g)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = (ds @ self.k) * self.scale
    dk = (_t(ds) @ self.q) * self.scale
    return dk, dq, dv


@wrong("attention", "mistake:attention-softmax-wrong-axis")
def attention_softmax_sum_over_queries(self, g):
    p, dp, dv = _attention_parts(self, g)
    ds = p * (dp - (dp * p).sum(axis=-2, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


@wrong("attention", "mistake:attention-dv-missing-transpose")
def attention_dv_without_transpose(self, g):
    p, dp, _ = _attention_parts(self, g)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, p @ g


@wrong("attention", "mistake:batched-dot-T")
def attention_with_dot_t(self, g):
    p = self.p
    dv = p.T @ g
    dp = g @ self.v.T
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (ds.T @ self.q) * self.scale, dv


# ---- 14 second order -----------------------------------------------------------------------


@wrong("second_order", "mistake:tanh2-dx-sign")
def tanh2_dx_plus_two_y(self, g):
    y, gy = self.y, self.gy
    return 2 * g * gy * y * (1 - y**2), g * (1 - y**2)


@wrong("second_order", "mistake:tanh2-dx-missing-2")
def tanh2_dx_without_the_2(self, g):
    y, gy = self.y, self.gy
    return -g * gy * y * (1 - y**2), g * (1 - y**2)


@wrong("second_order", "mistake:tanh2-dx-missing-chain")
def tanh2_dx_derivative_in_y_only(self, g):
    y, gy = self.y, self.gy
    return -2 * y * gy * g, (1 - y * y) * g


@wrong("second_order", "mistake:tanh2-no-gy-path")
def tanh2_gy_is_a_constant(self, g):
    y = self.y
    return -2 * g * self.gy * y * (1 - y * y), None


@wrong("second_order", "mistake:tanh2-no-gy-path")
def tanh2_gy_gets_zeros(self, g):
    y = self.y
    return -2 * g * self.gy * y * (1 - y * y), np.zeros_like(self.gy)


@wrong("second_order", "mistake:tanh2-no-gy-path")
def tanh2_only_the_x_gradient(self, g):
    y = self.y
    return -2 * g * self.gy * y * (1 - y * y)


@wrong("second_order", "mistake:tanh2-dgy-y")
def tanh2_dgy_with_y(self, g):
    y = self.y
    return -2 * g * self.gy * y * (1 - y * y), g * y


@wrong("second_order", "linear")
def tanh2_dx_without_g(self, g):
    y = self.y
    return -2 * self.gy * y * (1 - y * y), g * (1 - y * y)


@wrong("second_order", "mistake:swapped")
def tanh2_gradients_swapped(self, g):
    d = 1 - self.y**2
    dx = -2 * g * self.gy * self.y * d
    dgy = g * d
    return dgy, dx


@wrong("second_order", "mistake:tanh2-dx-first-order")
def tanh2_first_order_for_both(self, g):
    gx = g * (1 - self.y**2)
    return gx, gx


@wrong("second_order", "mistake:tanh2-dgy-times-gy")
def tanh2_dgy_keeps_gy(self, g):
    d = 1 - self.y**2
    return -2 * g * self.gy * self.y * d, g * self.gy * d


@wrong("second_order", "mistake:tanh2-dx-missing-gy")
def tanh2_dx_forgets_gy(self, g):
    d = 1 - self.y**2
    return -2 * g * self.y * d, g * d


@wrong("second_order", "dtype")
def tanh2_float64_ones(self, g):
    d = np.ones(self.y.shape) - self.y**2
    return -2 * g * self.gy * self.y * d, g * d


def _v(p, a, dim):
    return p * (a - (a * p).sum(axis=dim, keepdims=True))


@wrong("second_order", "mistake:softmax2-s-held-constant", "SoftmaxBackward")
def softmax2_s_held_constant(self, g):
    p, d = self.p, self.dim
    return _v(p, g * (self.gy - self.s), d), _v(p, g, d)


@wrong("second_order", "mistake:softmax2-dp-not-through-softmax", "SoftmaxBackward")
def softmax2_returns_dp(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) - (g * p).sum(axis=d, keepdims=True) * self.gy
    return gp, _v(p, g, d)


@wrong("second_order", "mistake:softmax2-dgy-s-held-constant", "SoftmaxBackward")
def softmax2_dgy_p_times_g(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) - (g * p).sum(axis=d, keepdims=True) * self.gy
    return _v(p, gp, d), p * g


@wrong("second_order", "mistake:softmax2-no-gy-path", "SoftmaxBackward")
def softmax2_gy_is_a_constant(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) - (g * p).sum(axis=d, keepdims=True) * self.gy
    return _v(p, gp, d), None


@wrong("second_order", "setting", "SoftmaxBackward")
def softmax2_sums_over_last_axis(self, g):
    p = self.p
    gp = g * (self.gy - self.s) - (g * p).sum(axis=-1, keepdims=True) * self.gy
    return _v(p, gp, -1), _v(p, g, -1)


@wrong("second_order", "mistake:term:s", "SoftmaxBackward")
def softmax2_s_term_added(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) + (g * p).sum(axis=d, keepdims=True) * self.gy
    return _v(p, gp, d), _v(p, g, d)


@wrong("second_order", "mistake:softmax2-s-held-constant", "SoftmaxBackward")
def softmax2_ds_dp_is_one(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) - (g * p).sum(axis=d, keepdims=True)
    return _v(p, gp, d), _v(p, g, d)


@wrong("second_order", "mistake:softmax2-dp-diagonal-only", "SoftmaxBackward")
def softmax2_last_step_diagonal(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) - (g * p).sum(axis=d, keepdims=True) * self.gy
    return p * (1 - p) * gp, _v(p, g, d)


@wrong("second_order", "mistake:softmax2-dx-first-order", "SoftmaxBackward")
def softmax2_first_order_for_x(self, g):
    p, d = self.p, self.dim
    ggy = p * (g - (g * p).sum(axis=d, keepdims=True))
    return ggy, ggy


@wrong("second_order", "linear", "SoftmaxBackward")
def softmax2_dgy_is_the_forward(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) - (g * p).sum(axis=d, keepdims=True) * self.gy
    return _v(p, gp, d), p * (self.gy - self.s)


@wrong("second_order", "mistake:softmax2-no-keepdims", "SoftmaxBackward")
def softmax2_sums_without_keepdims(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) - (g * p).sum(axis=d) * self.gy
    return p * (gp - (gp * p).sum(axis=d)), p * (g - (g * p).sum(axis=d))


@wrong("second_order", "mistake:term:s", "SoftmaxBackward")
def softmax2_s_term_mean(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) - (g * p).mean(axis=d, keepdims=True) * self.gy
    return _v(p, gp, d), _v(p, g, d)


# ---- the second group: written after the first, then learned from (see the docstring) --------


@wrong("relu", "linear")
def relu_where_without_g(self, g):
    return np.where(self.x > 0, 1.0, 0.0)


@wrong("relu", None)
def relu_mask_and_relu_g(self, g):
    return np.maximum(g, 0) * (self.x > 0)


@wrong("sigmoid", "mistake:sigmoid-derivative-at-z")
def sigmoid_formula_on_z(self, g):
    return g * np.exp(-self.z) / (1 + np.exp(-self.z)) ** 2


@wrong("sigmoid", "mistake:sigmoid-missing-z")
def sigmoid_one_minus_z(self, g):
    return g * (1 - self.z)


@wrong("broadcast_add", "mistake:add-only-leading")
def add_axis0_only(self, g):
    gy = g.sum(axis=0) if g.ndim > len(self.y_shape) else g
    gx = g.sum(axis=0) if g.ndim > len(self.x_shape) else g
    return gx, gy


@wrong("sum_mean", None, "MeanDim")
def mean_ones_times_g(self, g):
    return np.ones(self.shape) * g / self.shape[self.dim]


@wrong("sum_mean", None, "SumDim")
def sum_repeat(self, g):
    n = self.shape[self.dim]
    return np.repeat(g, n).reshape(self.shape)


@wrong("matmul", "transposed")
def matmul_gx_transposed(self, g):
    return self.y @ g.T, self.x.T @ g


@wrong("matmul", "mistake:matmul-gy-missing-transpose")
def matmul_dot_gy_no_transpose(self, g):
    return np.dot(g, self.y.T), np.dot(self.x, g)


@wrong("matmul", "mistake:bmm-batch-not-reduced", "BatchedMatMul")
def bmm_sums_axis0(self, g):
    gx = g @ self.y.swapaxes(-1, -2)
    gy = self.x.swapaxes(-1, -2) @ g
    if gy.ndim > self.y.ndim:
        gy = gy.sum(axis=0)
    return gx, gy


@wrong("gelu", "mistake:term:second")
def gelu_pdf_sqrt_pi(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * (0.5 * (1 + self.t) + 0.5 * x * (1 - self.t**2) * du)
    return g * (self.cdf + x * np.exp(-(x**2) / 2) / np.sqrt(np.pi))


@wrong("gelu", "mistake:term:first")
def gelu_tanh_first_term_no_half(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * ((1 + self.t) + 0.5 * x * (1 - self.t**2) * du)
    return g * (self.cdf + x * np.exp(-(x**2) / 2) / math.sqrt(2 * math.pi))


@wrong("embedding", "dtype")
def embedding_zeros_like_ids(self, g):
    gw = np.zeros((self.weight_shape[0],) + g.shape[-1:], dtype=self.ids.dtype)
    np.add.at(gw, self.ids.reshape(-1), g.reshape(-1, self.weight_shape[1]))
    return gw


@wrong("softmax", "mistake:softmax-last-axis")
def softmax_row_jacobians(self, g):
    p2, g2 = self.p.reshape(-1, self.p.shape[-1]), g.reshape(-1, g.shape[-1])
    out = np.empty_like(p2)
    for i in range(len(p2)):
        jac = np.diag(p2[i]) - np.outer(p2[i], p2[i])
        out[i] = jac @ g2[i]
    return out.reshape(self.p.shape)


@wrong("softmax", "mistake:softmax-p-on-one-term")
def softmax_p_on_one_term(self, g):
    s = (g * self.p).sum(axis=self.dim, keepdims=True)
    return self.p * g - s


@wrong("softmax_cross_entropy", "linear")
def ce_forgets_g(self, g):
    n = len(self.p)
    grad = self.p.copy()
    grad[range(n), self.target] -= 1
    return grad / n


@wrong("softmax_cross_entropy", "mistake:ce-minus-one-everywhere")
def ce_minus_one_everywhere(self, g):
    return (self.p - 1) / len(self.p) * g


@wrong("softmax_cross_entropy", "mistake:ce-divides-by-C")
def ce_eye_over_c(self, g):
    c = self.p.shape[1]
    return (self.p - np.eye(c)[self.target]) * g / c


@wrong("rmsnorm", "mistake:rmsnorm-mean-over-everything")
def rms_mean_over_everything(self, g):
    gh = g * self.weight
    gx = self.r * (gh - self.xhat * (gh * self.xhat).mean())
    return gx, (g * self.xhat).reshape(-1, g.shape[-1]).sum(axis=0)


@wrong("rmsnorm", "reduce")
def rms_gw_axis0(self, g):
    gh = g * self.weight
    gx = self.r * (gh - self.xhat * (gh * self.xhat).mean(axis=-1, keepdims=True))
    return gx, (g * self.xhat).sum(axis=0)


@wrong("layernorm", "mistake:layernorm-mean-over-everything")
def ln_means_over_everything(self, g):
    gh = g * self.weight
    xh = self.xhat
    rows = tuple(range(g.ndim - 1))
    return self.r * (gh - gh.mean() - xh * (gh * xh).mean()), (g * xh).sum(rows), g.sum(rows)


@wrong("layernorm", "mistake:layernorm-forgot-weight")
def ln_forgot_weight(self, g):
    xh = self.xhat
    rows = tuple(range(g.ndim - 1))
    gx = self.r * (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True))
    return gx, (g * xh).sum(rows), g.sum(rows)


@wrong("layernorm", "mistake:layernorm-missing-r")
def ln_without_r(self, g):
    gh = g * self.weight
    xh = self.xhat
    rows = tuple(range(g.ndim - 1))
    gx = gh - gh.mean(-1, keepdims=True) - xh * (gh * xh).mean(-1, keepdims=True)
    return gx, (g * xh).sum(rows), g.sum(rows)


@wrong("batchnorm", "named")
def bn_extra_one_over_n(self, g):
    n = g.shape[0]
    gh = g * self.weight
    xh = self.xhat
    gx = self.r * (gh - gh.mean(0, keepdims=True) - xh * (gh * xh).mean(0, keepdims=True)) / n
    return gx, (g * xh).sum(0), g.sum(0)


@wrong("batchnorm", "mistake:batchnorm-mean-constant")
def bn_variance_path_only(self, g):
    gh = g * self.weight
    xh = self.xhat
    gx = self.r * (gh - xh * (gh * xh).mean(0, keepdims=True))
    return gx, (g * xh).sum(0), g.sum(0)


@wrong("attention", "mistake:attention-softmax-no-keepdims")
def attn_sum_no_keepdims(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1))
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


@wrong("attention", "nonfinite")
def attn_masks_ds_with_inf(self, g):
    p = self.p
    t = p.shape[-1]
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    ds = np.where(np.tri(t, t, dtype=bool), ds, -np.inf)
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


@wrong("attention", "mistake:attention-scale-inverted")
def attn_divides_by_scale(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return ds @ self.k / self.scale, _t(ds) @ self.q / self.scale, dv


@wrong("attention", "mistake:attention-dq-transposed-k")
def attn_dq_with_k_transposed(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ _t(self.k)) * self.scale, (_t(ds) @ self.q) * self.scale, dv


# ---- the third group: written after the second had been learned from ---------------------


@wrong("relu", "dtype")
def relu_int_mask(self, g):
    return g * (self.x > 0).astype(int)


@wrong("relu", "inplace")
def relu_alias_of_g(self, g):
    out = g
    out[self.x < 0] = 0
    return out


@wrong("sigmoid", "mistake:sigmoid-divides")
def sigmoid_divides(self, g):
    return g / (self.z * (1 - self.z))


@wrong("broadcast_add", "wrong-dims")
def add_size1_axes_from_left(self, g):
    def back(shape):
        out = g
        for i, n in enumerate(shape):
            if n == 1:
                out = out.sum(axis=i, keepdims=True)
        return out.sum(axis=tuple(range(out.ndim - len(shape)))) if out.ndim > len(shape) else out

    return back(self.x_shape), back(self.y_shape)


@wrong("sum_mean", "mistake:not-expanded", "SumDim")
def sum_broadcast_without_expand(self, g):
    return np.broadcast_to(g, self.shape)


@wrong("sum_mean", "named", "MeanDim")
def mean_n_minus_one(self, g):
    if not self.keepdim:
        g = np.expand_dims(g, self.dim)
    return np.broadcast_to(g, self.shape) / (self.shape[self.dim] - 1)


@wrong("matmul", "named")
def matmul_divides_by_k(self, g):
    return g @ self.y.T / self.y.shape[0], self.x.T @ g


@wrong("matmul", "mistake:bmm-batch-not-reduced", "BatchedMatMul")
def bmm_hardcoded_3d_transpose(self, g):
    gx = g @ np.transpose(self.y, (0, 2, 1))
    gy = np.transpose(self.x, (0, 2, 1)) @ g
    return gx, gy


@wrong("gelu", "mistake:term:second")
def gelu_tanh_second_term_sign(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * (0.5 * (1 + self.t) - 0.5 * x * (1 - self.t**2) * du)
    return g * (self.cdf + x * np.exp(-(x**2) / 2) / math.sqrt(2 * math.pi))


@wrong("gelu", None)
def gelu_tanh_one_minus_t_squared_wrong(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * (0.5 * (1 + self.t) + 0.5 * x * (1 - self.t) ** 2 * du)
    return g * (self.cdf + x * np.exp(-(x**2) / 2) / math.sqrt(2 * math.pi))


@wrong("embedding", "mistake:embedding-written-once")
def embedding_assign_flat(self, g):
    d = self.weight_shape[1]
    gw = np.zeros(self.weight_shape, dtype=g.dtype)
    gw[self.ids.reshape(-1)] = g.reshape(-1, d)
    return gw


@wrong("softmax", "mistake:softmax-sum-over-everything")
def softmax_sum_no_axis(self, g):
    s = np.sum(g * self.p)
    return self.p * (g - s)


@wrong("softmax", None)
def softmax_p_squared_sum_g(self, g):
    return self.p * g - self.p * self.p * g.sum(axis=self.dim, keepdims=True)


@wrong("softmax_cross_entropy", "mistake:ce-rows-by-target")
def ce_indexes_rows_by_target(self, g):
    n = len(self.p)
    grad = self.p.copy()
    grad[self.target] -= 1
    return grad / n * g


@wrong("softmax_cross_entropy", "reduced-away")
def ce_mean_over_rows(self, g):
    c = self.p.shape[1]
    onehot = np.eye(c)[self.target]
    return (self.p - onehot).mean(axis=0) * g


@wrong("rmsnorm", None)
def rms_r_cubed_with_xhat(self, g):
    gh = g * self.weight
    gx = self.r * gh - self.r**3 * self.xhat * (gh * self.xhat).mean(axis=-1, keepdims=True)
    return gx, (g * self.xhat).reshape(-1, g.shape[-1]).sum(axis=0)


@wrong("rmsnorm", "mistake:rmsnorm-params-over-features")
def rms_gw_over_last_axis(self, g):
    gh = g * self.weight
    gx = self.r * (gh - self.xhat * (gh * self.xhat).mean(axis=-1, keepdims=True))
    return gx, (g * self.xhat).sum(axis=-1)


@wrong("layernorm", "mistake:layernorm-mean-without-keepdims")
def ln_mean_without_keepdims(self, g):
    gh = g * self.weight
    xh = self.xhat
    rows = tuple(range(g.ndim - 1))
    gx = self.r * (gh - np.mean(gh, axis=-1) - xh * np.mean(gh * xh, axis=-1))
    return gx, (g * xh).sum(rows), g.sum(rows)


@wrong("layernorm", "mistake:layernorm-params-over-features")
def ln_bias_over_last_axis(self, g):
    gh = g * self.weight
    xh = self.xhat
    rows = tuple(range(g.ndim - 1))
    gx = self.r * (gh - gh.mean(-1, keepdims=True) - xh * (gh * xh).mean(-1, keepdims=True))
    return gx, (g * xh).sum(rows), g.sum(axis=-1)


@wrong("batchnorm", "named")
def bn_weight_grad_mean(self, g):
    gh = g * self.weight
    xh = self.xhat
    gx = self.r * (gh - gh.mean(0, keepdims=True) - xh * (gh * xh).mean(0, keepdims=True))
    return gx, (g * xh).mean(axis=0), g.sum(axis=0)


@wrong("batchnorm", "mistake:term:mean+variance")
def bn_n_minus_one_everywhere(self, g):
    n = g.shape[0]
    gh = g * self.weight
    xh = self.xhat
    gx = self.r * (
        gh - gh.sum(0, keepdims=True) / (n - 1) - xh * (gh * xh).sum(0, keepdims=True) / (n - 1)
    )
    return gx, (g * xh).sum(0), g.sum(0)


@wrong("attention", "mistake:attention-missing-scale")
def attn_dk_without_scale(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, _t(ds) @ self.q, dv


@wrong("attention", "mistake:attention-dp-missing-transpose")
def attn_dp_without_transpose(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ self.v
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


@wrong("attention", "mistake:attention-scale-twice")
def attn_scale_twice_on_dk(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(ds * self.scale) @ self.q) * self.scale, dv


# ---- the fourth group: written after the third had been learned from ----------------------


@wrong("relu", "mistake:relu-sign")
def relu_sign_of_x(self, g):
    return g * np.sign(self.x)


@wrong("sigmoid", "linear")
def sigmoid_typo_g(self, g):
    return g * self.z * (1 - g)


@wrong("broadcast_add", None)
def add_y_sum_axis0(self, g):
    gy = np.sum(g, axis=0) if g.shape != self.y_shape else g
    return g if g.shape == self.x_shape else np.sum(g, axis=0), gy


@wrong("sum_mean", "setting", "MeanDim")
def mean_ignores_keepdim(self, g):
    return np.full(self.shape, 1 / self.shape[self.dim]) * np.expand_dims(g, self.dim)


@wrong("matmul", "mistake:matmul-g-transposed")
def matmul_gx_gT_y(self, g):
    return g.T @ self.y, self.x.T @ g


@wrong("matmul", "mistake:bmm-batch-not-reduced", "BatchedMatMul")
def bmm_einsum_2d_weight(self, g):
    gx = g @ self.y.swapaxes(-1, -2)
    gy = np.einsum("bmk,bmn->kn", self.x, g)
    return gx, gy


@wrong("gelu", "linear")
def gelu_g_missing_in_second_term(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * (0.5 * (1 + self.t) + 0.5 * x * (1 - self.t**2) * du)
    pdf = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    return g * self.cdf + x * pdf


@wrong("embedding", "mistake:embedding-table-too-small")
def embedding_table_sized_by_max_id(self, g):
    d = self.weight_shape[1]
    gw = np.zeros((int(self.ids.max()) + 1, d), dtype=g.dtype)
    np.add.at(gw, self.ids.reshape(-1), g.reshape(-1, d))
    return gw


@wrong("softmax", "mistake:softmax-extra-one-minus-p")
def softmax_extra_one_minus_p(self, g):
    p = self.p
    return p * (g - (g * p).sum(axis=self.dim, keepdims=True)) * (1 - p)


@wrong("softmax", "mistake:softmax-last-axis")
def softmax_diag_of_matrix_product(self, g):
    p = self.p
    return p * (g - np.diag(g @ p.T)[:, None])


@wrong("softmax_cross_entropy", "mistake:ce-sets-minus-one")
def ce_sets_minus_one(self, g):
    n = len(self.p)
    grad = self.p.copy()
    grad[np.arange(n), self.target] = -1
    return grad / n * g


@wrong("rmsnorm", None)
def rms_constant_r_no_weight(self, g):
    return g * self.r, (g * self.xhat).reshape(-1, g.shape[-1]).sum(axis=0)


@wrong("layernorm", None)
def ln_weight_missing_in_third_term(self, g):
    gh = g * self.weight
    xh = self.xhat
    rows = tuple(range(g.ndim - 1))
    gx = self.r * (gh - gh.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True))
    return gx, (g * xh).sum(rows), g.sum(rows)


@wrong("layernorm", "mistake:layernorm-correction-missing-r")
def ln_r_squared_with_centered(self, g):
    gh = g * self.weight
    xc = self.xhat / self.r
    rows = tuple(range(g.ndim - 1))
    gx = self.r * (gh - gh.mean(-1, keepdims=True)) - self.r**2 * xc * (gh * xc).mean(
        -1, keepdims=True
    )
    return gx, (g * self.xhat).sum(rows), g.sum(rows)


@wrong("batchnorm", "mistake:batchnorm-layernorm-axes")
def bn_means_over_axis_1(self, g):
    gh = g * self.weight
    xh = self.xhat
    gx = self.r * (gh - gh.mean(axis=1, keepdims=True) - xh * (gh * xh).mean(axis=1, keepdims=True))
    return gx, (g * xh).sum(0), g.sum(0)


@wrong("batchnorm", "none")
def bn_forgets_bias(self, g):
    gh = g * self.weight
    xh = self.xhat
    gx = self.r * (gh - gh.mean(0, keepdims=True) - xh * (gh * xh).mean(0, keepdims=True))
    return gx, (g * xh).sum(0), None


@wrong("attention", "mistake:attention-missing-scale")
def attn_scale_only_on_dk(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return ds @ self.k, (_t(ds) @ self.q) * self.scale, dv


@wrong("attention", "mistake:attention-unmasked-p")
def attn_recomputes_p_without_mask(self, g):
    s = (self.q @ _t(self.k)) * self.scale
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


# ---- the fifth group: written after the fourth had been learned from -----------------------


@wrong("relu", "inplace")
def relu_multiply_out_g(self, g):
    return np.multiply(g, self.x > 0, out=g)


@wrong("sigmoid", "mistake:sigmoid-derivative-at-z")
def sigmoid_recomputed_from_z(self, g):
    s = 1 / (1 + np.exp(-self.z))
    return g * s * (1 - s)


@wrong("broadcast_add", "mistake:add-leading-kept")
def add_lead_kept_as_ones(self, g):
    def back(shape):
        lead = g.ndim - len(shape)
        out = g.sum(axis=tuple(range(lead)), keepdims=True)
        stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] > 1)
        return out.sum(axis=stretched, keepdims=True)

    return back(self.x_shape), back(self.y_shape)


@wrong("matmul", "named")
def matmul_gy_averaged_over_m(self, g):
    return g @ self.y.T, self.x.T @ g / self.x.shape[0]


@wrong("matmul", "mistake:bmm-batch-averaged", "BatchedMatMul")
def bmm_weight_grad_averaged(self, g):
    gx = g @ self.y.swapaxes(-1, -2)
    gy = self.x.swapaxes(-1, -2) @ g
    while gy.ndim > self.y.ndim:
        gy = gy.mean(axis=0)
    for i, n in enumerate(self.y.shape[:-2]):
        if n == 1 and gy.shape[i] > 1:
            gy = gy.mean(axis=i, keepdims=True)
    while gx.ndim > self.x.ndim:
        gx = gx.sum(axis=0)
    for i, n in enumerate(self.x.shape[:-2]):
        if n == 1 and gx.shape[i] > 1:
            gx = gx.sum(axis=i, keepdims=True)
    return gx, gy


@wrong("gelu", "named")
def gelu_exact_halved(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * (0.5 * (1 + self.t) + 0.5 * x * (1 - self.t**2) * du)
    pdf = np.exp(-(x**2) / 2) / np.sqrt(2 * np.pi)
    return 0.5 * g * (self.cdf + x * pdf)


@wrong("embedding", "mistake:ids-not-flattened")
def embedding_ids_not_flattened(self, g):
    d = self.weight_shape[1]
    gw = np.zeros(self.weight_shape, dtype=g.dtype)
    np.add.at(gw, self.ids, g.reshape(-1, d))
    return gw


@wrong("softmax", "mistake:softmax-no-keepdims")
def softmax_two_terms_no_keepdims(self, g):
    return self.p * g - self.p * np.sum(self.p * g, axis=self.dim)


@wrong("softmax", "mistake:softmax-diagonal-plus-row-sum")
def softmax_diag_plus_full_sum(self, g):
    jac_diag = self.p * (1 - self.p)
    return jac_diag * g - self.p * (g * self.p).sum(axis=self.dim, keepdims=True)


@wrong("rmsnorm", "mistake:rmsnorm-mean-over-other-axis")
def rms_mean_axis0(self, g):
    gh = g * self.weight
    gx = self.r * (gh - self.xhat * (gh * self.xhat).mean(axis=0, keepdims=True))
    return gx, (g * self.xhat).reshape(-1, g.shape[-1]).sum(axis=0)


@wrong("layernorm", "mistake:layernorm-weight-outside")
def ln_weight_applied_last(self, g):
    xh = self.xhat
    rows = tuple(range(g.ndim - 1))
    gx = (
        self.r
        * (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True))
        * self.weight
    )
    return gx, (g * xh).sum(rows), g.sum(rows)


@wrong("batchnorm", "offset")
def bn_r_missing_on_mean_term(self, g):
    gh = g * self.weight
    xh = self.xhat
    gx = self.r * gh - gh.mean(0, keepdims=True) - self.r * xh * (gh * xh).mean(0, keepdims=True)
    return gx, (g * xh).sum(0), g.sum(0)


@wrong("attention", "mistake:attention-scale-twice")
def attn_scale_on_ds_and_again(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * self.scale
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


@wrong("attention", "mistake:batched-dot-T")
def attn_p_dot_T(self, g):
    p = self.p
    dv = p.T @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


@wrong("attention", "mistake:attention-dp-g-transposed")
def attn_dp_from_gT(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = _t(g) @ self.v
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


# ---- the sixth group: written after the fifth had been learned from -----------------------


@wrong("relu", "linear")
def relu_ones_mask(self, g):
    grad = np.zeros_like(g)
    grad[self.x > 0] = 1
    return grad


@wrong("sigmoid", None)
def sigmoid_one_minus_z_squared_factor(self, g):
    return g * self.z * (1 - self.z) ** 2


@wrong("broadcast_add", "mistake:add-only-leading")
def add_stretched_from_g_shape(self, g):
    def back(shape):
        out = np.sum(g, axis=tuple(range(g.ndim - len(shape))))
        stretched = tuple(i for i, n in enumerate(out.shape) if n == 1)
        return np.sum(out, axis=stretched, keepdims=True)

    return back(self.x_shape), back(self.y_shape)


@wrong("sum_mean", "mistake:not-expanded", "SumDim")
def sum_keepdim_inverted(self, g):
    if self.keepdim:
        g = np.expand_dims(g, self.dim)
    return np.broadcast_to(g, self.shape)


@wrong("sum_mean", None, "MeanDim")
def mean_divides_by_ndim(self, g):
    if not self.keepdim:
        g = np.expand_dims(g, self.dim)
    return np.broadcast_to(g, self.shape) / len(self.shape)


@wrong("matmul", "transposed")
def matmul_extra_transpose(self, g):
    gx = g @ self.y.T
    gy = self.x.T @ g
    return gx.T, gy


@wrong("gelu", "mistake:term:first")
def gelu_misplaced_parenthesis(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * (0.5 * (1 + self.t) + 0.5 * x * (1 - self.t**2) * du)
    return g * (self.cdf + x * np.exp(-(x**2) / 2)) / np.sqrt(2 * np.pi)


@wrong("embedding", "mistake:embedding-rows-scrambled")
def embedding_g_reshaped_wrong(self, g):
    d = self.weight_shape[1]
    gw = np.zeros(self.weight_shape, dtype=g.dtype)
    np.add.at(gw, self.ids.reshape(-1), g.reshape(d, -1).T)
    return gw


@wrong("softmax", "mistake:softmax-extra-p")
def softmax_extra_p(self, g):
    p = self.p
    return p * (g - (g * p).sum(axis=self.dim, keepdims=True)) * p


@wrong("softmax", "mistake:term:row-sum")
def softmax_plus_row_sum(self, g):
    s = (g * self.p).sum(axis=self.dim, keepdims=True)
    return self.p * (g + s)


@wrong("softmax_cross_entropy", "mistake:ce-missing-1/N")
def ce_eye_without_mean(self, g):
    c = self.p.shape[1]
    return (self.p - np.eye(c)[self.target]) * g


@wrong("rmsnorm", "mistake:rmsnorm-weight-missing-in-correction")
def rms_weight_missing_in_correction(self, g):
    gh = g * self.weight
    gx = self.r * (gh - self.xhat * (g * self.xhat).mean(axis=-1, keepdims=True))
    return gx, (g * self.xhat).reshape(-1, g.shape[-1]).sum(axis=0)


@wrong("layernorm", "mistake:layernorm-correction-extra-r")
def ln_r_squared_on_third(self, g):
    gh = g * self.weight
    xh = self.xhat
    rows = tuple(range(g.ndim - 1))
    gx = self.r * (gh - gh.mean(-1, keepdims=True)) - self.r**2 * xh * (gh * xh).mean(
        -1, keepdims=True
    )
    return gx, (g * xh).sum(rows), g.sum(rows)


@wrong("batchnorm", "mistake:batchnorm-layernorm-axes")
def bn_layernorm_everything(self, g):
    gh = g * self.weight
    xh = self.xhat
    gx = self.r * (gh - gh.mean(-1, keepdims=True) - xh * (gh * xh).mean(-1, keepdims=True))
    return gx, (g * xh).sum(-1), g.sum(-1)


@wrong("attention", "mistake:attention-missing-scale")
def attn_no_scale_at_all(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return ds @ self.k, _t(ds) @ self.q, dv


@wrong("attention", "transposed")
def attn_dk_qT_ds(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(self.q) @ ds) * self.scale, dv


# ---- the seventh group: the classic mistakes, written anew in other forms -----------


def _reduce_to(g, shape):
    lead = g.ndim - len(shape)
    out = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and out.shape[i] != 1)
    return out.sum(axis=axes, keepdims=True)


@wrong("softmax", "mistake:softmax-diagonal-only")
def softmax_diag_expanded(self, g):
    return g * self.p - g * self.p**2


@wrong("attention", "mistake:attention-softmax-sum-of-g")
def attn_sum_dp_two_terms(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * dp - p * dp.sum(axis=-1, keepdims=True)
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


@wrong("softmax_cross_entropy", "mistake:ce-every-row-target")
def ce_column_minus_one(self, g):
    d = self.p.copy()
    d[:, self.target] = d[:, self.target] - 1
    return d * g


@wrong("layernorm", "mistake:layernorm-statistics-constant")
def ln_constant_stats(self, g):
    rows = tuple(range(g.ndim - 1))
    return (g * self.r) * self.weight, (g * self.xhat).sum(rows), g.sum(rows)


@wrong("attention", "mistake:attention-dk-missing-transpose")
def attn_dk_matmul_ds_q(self, g):
    p = self.p
    dv = np.matmul(_t(p), g)
    dp = np.matmul(g, _t(self.v))
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return np.matmul(ds, self.k) * self.scale, np.matmul(ds, self.q) * self.scale, dv


@wrong("attention", "mistake:attention-softmax-wrong-axis")
def attn_softmax_axis1(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=1, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, dv


@wrong("broadcast_add", "mistake:swapped")
def add_swapped(self, g):
    return _reduce_to(g, self.y_shape), _reduce_to(g, self.x_shape)


@wrong("attention", "mistake:attention-missing-scale")
def attn_dq_unscaled(self, g):
    p = self.p
    dv = _t(p) @ g
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return ds @ self.k, (_t(ds) @ self.q) * self.scale, dv


@wrong("softmax", "inplace")
def softmax_in_place(self, g):
    g -= (g * self.p).sum(axis=self.dim, keepdims=True)
    return self.p * g


@wrong("sum_mean", "mistake:mean-missing-1/N", "MeanDim")
def mean_repeat(self, g):
    if not self.keepdim:
        g = np.expand_dims(g, self.dim)
    return np.repeat(g, self.shape[self.dim], axis=self.dim)


@wrong("rmsnorm", "mistake:rmsnorm-statistics-constant")
def rms_r_constant_loop_rows(self, g):
    gw = np.zeros(g.shape[-1], dtype=g.dtype)
    for row in (g * self.xhat).reshape(-1, g.shape[-1]):
        gw += row
    return g * self.r * self.weight, gw


@wrong("batchnorm", "mistake:batchnorm-layernorm-axes")
def bn_sum_over_features(self, g):
    gh = g * self.weight
    xh = self.xhat
    n = g.shape[1]
    gx = self.r * (
        gh - gh.sum(axis=1, keepdims=True) / n - xh * (gh * xh).sum(axis=1, keepdims=True) / n
    )
    return gx, (g * xh).sum(axis=0), g.sum(axis=0)


@wrong("relu", "inplace")
def relu_where_in_place(self, g):
    np.putmask(g, self.x <= 0, 0)
    return g


@wrong("gelu", "mistake:term:first")
def gelu_exact_without_product_rule(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return g * 0.5 * (1 + self.t + x * (1 - self.t**2) * du)
    return g * x * np.exp(-(x**2) / 2) / math.sqrt(2 * math.pi)


# ---- the eighth group: written after the seventh, then learned from ------------------------


@wrong("relu", "mistake:term:negative")
def relu_leaky_slope(self, g):
    return g * (self.x > 0) + 0.01 * g * (self.x <= 0)


@wrong("sigmoid", None)
def sigmoid_one_plus_z(self, g):
    return g * self.z * (1 + self.z)


@wrong("broadcast_add", "mistake:add-only-leading")
def add_y_leading_only(self, g):
    gy = g.sum(axis=tuple(range(g.ndim - len(self.y_shape))))
    gx = g.sum(axis=tuple(range(g.ndim - len(self.x_shape))))
    return gx, gy


@wrong("sum_mean", "named", "SumDim")
def sum_divided_like_mean(self, g):
    if not self.keepdim:
        g = np.expand_dims(g, self.dim)
    return np.broadcast_to(g, self.shape) / self.shape[self.dim]


@wrong("matmul", "transposed")
def matmul_gy_transposed_at_end(self, g):
    gx = g @ self.y.T
    gy = self.x.T @ g
    return gx, gy.T


@wrong("matmul", "reduced-away", "BatchedMatMul")
def bmm_sums_every_batch_dim(self, g):
    gx = g @ self.y.swapaxes(-1, -2)
    gy = (self.x.swapaxes(-1, -2) @ g).sum(axis=tuple(range(g.ndim - 2)))
    return gx, gy


@wrong("gelu", None)
def gelu_tanh_du_linear(self, g):
    x = self.x
    if self.approximate == "tanh":
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x)
        return g * (0.5 * (1 + self.t) + 0.5 * x * (1 - self.t**2) * du)
    return g * (self.cdf + x * np.exp(-(x**2) / 2) / math.sqrt(2 * math.pi))


@wrong("embedding", "mistake:embedding-table-too-small")
def embedding_table_like_g(self, g):
    d = self.weight_shape[1]
    rows = g.reshape(-1, d)
    gw = np.zeros_like(rows)
    np.add.at(gw, self.ids.reshape(-1), rows)
    return gw


@wrong("softmax", "mistake:softmax-mean-not-sum")
def softmax_mean(self, g):
    return self.p * (g - (g * self.p).mean(axis=self.dim, keepdims=True))


@wrong("softmax_cross_entropy", "mistake:ce-divides-by-NC")
def ce_divides_by_size(self, g):
    n = len(self.p)
    grad = self.p.copy()
    grad[np.arange(n), self.target] -= 1
    return grad * g / self.p.size


@wrong("rmsnorm", "mistake:rmsnorm-param-grads-times-w")
def rms_weight_grad_times_weight(self, g):
    gh = g * self.weight
    gx = self.r * (gh - self.xhat * (gh * self.xhat).mean(axis=-1, keepdims=True))
    return gx, (gh * self.xhat).sum(axis=_rows(g))


@wrong("layernorm", "mistake:layernorm-param-grads-times-w")
def ln_bias_times_weight(self, g):
    gh = g * self.weight
    xh = self.xhat
    gx = self.r * (gh - gh.mean(-1, keepdims=True) - xh * (gh * xh).mean(-1, keepdims=True))
    return gx, (g * xh).sum(_rows(g)), gh.sum(_rows(g))


@wrong("batchnorm", None)
def bn_mixed_axes(self, g):
    gh = g * self.weight
    xh = self.xhat
    gx = self.r * (gh - gh.mean(0, keepdims=True) - xh * (gh * xh).mean(1, keepdims=True))
    return gx, (g * xh).sum(0), g.sum(0)


@wrong("attention", "transposed")
def attn_dv_gT_p(self, g):
    p = self.p
    dv = _t(_t(g) @ p)
    dp = g @ _t(self.v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ self.k) * self.scale, (_t(ds) @ self.q) * self.scale, _t(dv)


# ---- 14 second order, the second group: written after its catalogue, then learned from ------


@wrong("second_order", "mistake:tanh2-one-minus-y-all-squared")
def tanh2_power_binds_wrong(self, g):
    y = self.y
    return -2 * g * self.gy * y * (1 - y) ** 2, g * (1 - y) ** 2


@wrong("second_order", "mistake:tanh2-tanh-of-y")
def tanh2_tanh_applied_to_y(self, g):
    y = np.tanh(self.y)
    return -2 * g * self.gy * y * (1 - y * y), g * (1 - y * y)


@wrong("second_order", None)
def tanh2_derivative_one_minus_2y(self, g):
    y = self.y
    return g * self.gy * (1 - 2 * y) * (1 - y * y), g * (1 - y * y)


@wrong("second_order", "mistake:softmax2-dx-plus-first-order", "SoftmaxBackward")
def softmax2_adds_the_first_order_vjp(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) - (g * p).sum(axis=d, keepdims=True) * self.gy
    return _v(p, gp, d) + _v(p, g, d), _v(p, g, d)


@wrong("second_order", None, "SoftmaxBackward")
def softmax2_s_recomputed_as_mean(self, g):
    p, d = self.p, self.dim
    s = (self.gy * p).mean(axis=d, keepdims=True)
    gp = g * (self.gy - s) - (g * p).sum(axis=d, keepdims=True) * self.gy
    return _v(p, gp, d), _v(p, g, d)


@wrong("second_order", "setting", "SoftmaxBackward")
def softmax2_dgy_over_axis_0(self, g):
    p, d = self.p, self.dim
    gp = g * (self.gy - self.s) - (g * p).sum(axis=d, keepdims=True) * self.gy
    return _v(p, gp, d), _v(p, g, 0)


@wrong("second_order", "sign", "SoftmaxBackward")
def softmax2_dp_negated(self, g):
    p, d = self.p, self.dim
    gp = -g * (self.gy - self.s) + (g * p).sum(axis=d, keepdims=True) * self.gy
    return _v(p, gp, d), _v(p, g, d)


@wrong("second_order", "mistake:softmax2-front-term-keeps-p", "SoftmaxBackward")
def softmax2_front_term_from_gx(self, g):
    p, d = self.p, self.dim
    gx = p * (self.gy - self.s)
    gp = g * gx - (g * p).sum(axis=d, keepdims=True) * self.gy
    return _v(p, gp, d), _v(p, g, d)


def measure(wrongs=None):
    """{exercise: (written, caught, cause named, passed)} over `wrongs` (default: all)."""
    table = {}
    for w in wrongs or WRONG:
        report = w.grade()
        kinds = set().union(*(p.kinds for p in report.parts))
        row = table.setdefault(w.exercise, [0, 0, 0, 0])
        row[0] += 1
        row[1] += not report.ok
        row[2] += (not report.ok) and w.cause is not None and w.cause in kinds
        row[3] += report.ok
    return table


if __name__ == "__main__":
    table = measure()
    print(f"{'exercise':24} written caught named passed")
    for name, (n, caught, named, passed) in table.items():
        print(f"{name:24} {n:7d} {caught:6d} {named:5d} {passed:6d}")
    n, caught, named, passed = (sum(col) for col in zip(*table.values()))
    print(f"{'all':24} {n:7d} {caught:6d} {named:5d} {passed:6d}  ({named / n:.0%} named)")
