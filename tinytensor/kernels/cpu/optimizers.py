"""Adam/AdamW and SGD updating every parameter of a group in one parallel pass (PyTorch's
"foreach"/"fused" optimizers): the parameters are cut into chunks of CHUNK elements, and the
threads share out all the chunks of all the parameters, so small biases and large matrices
balance. Each element is updated by the same formula as the NumPy reference in optim/adam.py and
optim/sgd.py, in the parameter's dtype, in place (every array keeps its identity).
"""

from __future__ import annotations

import numpy as np
from numba import prange
from numba.typed import List

from .dispatch import pick, twin_jit

CHUNK = 1 << 14


@twin_jit
def _adam_update(
    params, grads, exp_avgs, exp_avg_sqs, chunk_param, chunk_start, step_sizes, bias2_roots,
    shrink, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, decoupled, maximize,
):  # fmt: skip
    for c in prange(chunk_param.shape[0]):
        k, lo = chunk_param[c], chunk_start[c]
        hi = min(params[k].shape[0], lo + CHUNK)
        # NOTE: contiguous slices indexed from 0: the loop then vectorizes
        p, g = params[k][lo:hi], grads[k][lo:hi]
        m, v = exp_avgs[k][lo:hi], exp_avg_sqs[k][lo:hi]
        step_size, root = step_sizes[k], bias2_roots[k]
        for i in range(p.shape[0]):
            gi = -g[i] if maximize else g[i]
            if weight_decay != 0:
                if decoupled:
                    p[i] *= shrink
                else:
                    gi = gi + weight_decay * p[i]
            m[i] += one_minus_beta1 * (gi - m[i])
            v[i] = v[i] * beta2 + one_minus_beta2 * (gi * gi)
            p[i] -= step_size * (m[i] / (np.sqrt(v[i]) / root + eps))


@twin_jit
def _sgd_update(
    params, grads, buffers, fresh, chunk_param, chunk_start,
    lr, momentum, one_minus_dampening, weight_decay, nesterov, maximize,
):  # fmt: skip
    for c in prange(chunk_param.shape[0]):
        k, lo = chunk_param[c], chunk_start[c]
        hi = min(params[k].shape[0], lo + CHUNK)
        p, g, buf = params[k][lo:hi], grads[k][lo:hi], buffers[k][lo:hi]
        for i in range(p.shape[0]):
            gi = -g[i] if maximize else g[i]
            if weight_decay != 0:
                gi = gi + weight_decay * p[i]
            if momentum != 0:
                if fresh[k]:
                    buf[i] = gi
                else:
                    buf[i] = buf[i] * momentum + one_minus_dampening * gi
                gi = gi + momentum * buf[i] if nesterov else buf[i]
            p[i] -= lr * gi


def _chunks(flats):
    sizes = np.array([a.shape[0] for a in flats], np.int64)
    counts = (sizes + CHUNK - 1) // CHUNK
    chunk_param = np.repeat(np.arange(len(flats), dtype=np.int64), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    chunk_start = (np.arange(chunk_param.shape[0], dtype=np.int64) - first) * CHUNK
    return chunk_param, chunk_start, int(sizes.sum())


class FlatLists:
    """numba typed lists of 1-D views, each rebuilt only when the arrays behind it change
    (building one costs ~5 µs per array: the parameters' and buffers' lists are kept across
    steps, the gradients' is rebuilt when they are new arrays). A list holds its arrays, so an
    id in the key cannot be reused by another array while the list lives."""

    def __init__(self):
        self._keys, self._lists = [], []

    def get(self, *groups):
        while len(self._keys) < len(groups):
            self._keys.append(None)
            self._lists.append(None)
        for i, arrays in enumerate(groups):
            key = tuple(id(a) for a in arrays)
            if key != self._keys[i]:
                self._lists[i] = List([a.reshape(-1) for a in arrays])
                self._keys[i] = key
        return self._lists[: len(groups)]


def adam_update(lists, params, grads, exp_avgs, exp_avg_sqs, step_sizes, bias2_roots, hyper):
    """One Adam/AdamW step for every parameter (lists: a FlatLists per optimizer group).

    hyper: dict lr, beta1, beta2, eps, weight_decay, decoupled, maximize.
    """
    ps, gs, ms, vs = lists.get(params, grads, exp_avgs, exp_avg_sqs)
    chunk_param, chunk_start, total = _chunks(ps)
    t = params[0].dtype.type
    pick(_adam_update, total)(
        ps, gs, ms, vs, chunk_param, chunk_start,
        np.asarray(step_sizes, t), np.asarray(bias2_roots, t),
        t(1 - hyper["lr"] * hyper["weight_decay"]), t(1 - hyper["beta1"]), t(hyper["beta2"]),
        t(1 - hyper["beta2"]), t(hyper["eps"]), t(hyper["weight_decay"]),
        bool(hyper["decoupled"]), bool(hyper["maximize"]),
    )  # fmt: skip


def sgd_update(lists, params, grads, buffers, fresh, hyper):
    """One SGD step for every parameter; `fresh[k]` marks a momentum buffer set to g this step.

    hyper: dict lr, momentum, dampening, weight_decay, nesterov, maximize.
    """
    ps, gs, bs = lists.get(params, grads, buffers)
    chunk_param, chunk_start, total = _chunks(ps)
    t = params[0].dtype.type
    pick(_sgd_update, total)(
        ps, gs, bs, np.asarray(fresh, np.bool_), chunk_param, chunk_start,
        t(hyper["lr"]), t(hyper["momentum"]), t(1 - hyper["dampening"]), t(hyper["weight_decay"]),
        bool(hyper["nesterov"]), bool(hyper["maximize"]),
    )  # fmt: skip
