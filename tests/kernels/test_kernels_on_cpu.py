"""The unchanged CUDA kernels, run on the CPU executor, against the tiled NumPy path in float64.

Every case of KERNELS.md runs under three thread schedules; the executor fills outputs with NaN
before each launch, so an element a kernel forgets to write fails the comparison.
"""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.ops.attention_tiled import (
    AttentionSpec,
    FlashAttention,
    flash_attention_backward,
    flash_attention_forward,
)

from .cases import CASES, make_inputs
from .conftest import SCHEDULES

TOL = 2e-5


def spec_and_bias(case, arrays):
    d = case.d
    scale = 1.0 / np.sqrt(d) if case.scale is None else case.scale
    mask = arrays["mask"]
    spec = AttentionSpec(
        scale=scale,
        groups=case.heads_q // case.heads_kv,
        causal=case.causal,
        key_lengths=arrays["lengths"],
        mask=mask,
    )
    bias = arrays["bias"]
    if bias is not None:
        bias = bias.reshape((1,) * (4 - bias.ndim) + bias.shape)
    return spec, bias


def reference(arrays, bias, spec):
    """The tiled NumPy path in float64: (O, L, dQ, dK, dV, dBias)."""
    f64 = {n: None if a is None else a.astype(np.float64) for n, a in arrays.items()}
    b64 = None if bias is None else bias.astype(np.float64)
    out, lse = flash_attention_forward(f64["q"], f64["k"], f64["v"], b64, spec, 16, 16)
    grads = flash_attention_backward(
        f64["q"], f64["k"], f64["v"], b64, out, lse, f64["dout"], spec, b64 is not None, 16, 16
    )
    return (out, lse, *grads)


def assert_close(ours, ref, what):
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} vs {ref.shape}"
    assert not np.isnan(ours).any(), f"{what}: NaN (an element never written?)"
    finite = np.isfinite(ref)
    assert np.array_equal(np.isfinite(ours), finite), f"{what}: infinities differ"
    scale = max(1.0, np.abs(ref[finite]).max(initial=0.0))
    np.testing.assert_allclose(ours[finite], ref[finite], rtol=TOL, atol=TOL * scale, err_msg=what)
    assert np.array_equal(ours[~finite], ref[~finite]), f"{what}: L is not +inf where expected"


# NOTE: head dims above 16 run under one schedule only, to keep the suite fast.
RUNS = [(c, s) for c in CASES for s in SCHEDULES if s == "ascending" or c.d <= 16]


@pytest.mark.parametrize("case, schedule", RUNS, ids=[f"{c.name}-{s}" for c, s in RUNS])
def test_kernels_match_numpy(case, schedule, executor_kernels):
    kernels = executor_kernels[schedule]
    arrays = make_inputs(case, np.float32)
    spec, bias = spec_and_bias(case, arrays)
    ref = reference(arrays, bias, spec)
    out, lse = kernels.forward(arrays["q"], arrays["k"], arrays["v"], bias, spec)
    grads = kernels.backward(
        arrays["q"],
        arrays["k"],
        arrays["v"],
        bias,
        out,
        lse,
        arrays["dout"],
        spec,
        bias is not None,
    )
    names = ("O", "L", "dQ", "dK", "dV", "dBias")
    for name, ours, theirs in zip(names, (out, lse, *grads), ref):
        if theirs is None:
            assert ours is None, f"{case.name}: {name} should not be computed"
            continue
        assert_close(ours, theirs, f"{case.name} [{schedule}]: {name}")


def test_bool_mask_and_bias_together(executor_kernels):
    """The kernels take a bool mask and a bias at once (the public op passes one of them)."""
    rng = np.random.default_rng(3)
    q, k, v, dout = (rng.standard_normal((2, 2, 45, 32)).astype(np.float32) for _ in range(4))
    bias = rng.standard_normal((2, 1, 45, 45)).astype(np.float32)
    mask = rng.random((1, 2, 45, 45)) > 0.4
    spec = AttentionSpec(scale=0.3, causal=True, mask=mask)
    arrays = {"q": q, "k": k, "v": v, "dout": dout}
    ref = reference(arrays, bias, spec)
    kernels = executor_kernels["random"]
    out, lse = kernels.forward(q, k, v, bias, spec)
    grads = kernels.backward(q, k, v, bias, out, lse, dout, spec, True)
    for name, ours, theirs in zip(("O", "L", "dQ", "dK", "dV", "dBias"), (out, lse, *grads), ref):
        assert_close(ours, theirs, name)


def test_kernels_behind_the_autograd_op(executor_kernels):
    """FlashAttention with the kernels as runner gives the naive op's output and gradients."""
    rng = np.random.default_rng(4)
    data = [rng.standard_normal(s).astype(np.float32) for s in [(1, 4, 20, 16), (1, 2, 33, 16)]]
    q, k, v = (tt.tensor(a, requires_grad=True) for a in (data[0], data[1], data[1] * 0.5))
    spec = AttentionSpec(scale=0.25, groups=2, causal=True)
    out = FlashAttention.apply(q, k, v, spec=spec, runner=executor_kernels["ascending"])
    (out * out).sum().backward()
    ours = [out.numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()]
    for t in (q, k, v):
        t.grad = None
    with tt.attention_backend("naive"):
        ref = tt.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.25, enable_gqa=True)
    (ref * ref).sum().backward()
    theirs = [ref.numpy(), q.grad.numpy(), k.grad.numpy(), v.grad.numpy()]
    for name, a, b in zip(("O", "dQ", "dK", "dV"), ours, theirs):
        np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL, err_msg=name)
