"""A robustness sweep of `tt.scaled_dot_product_attention` over shapes and arguments.

Every path (naive, tiled NumPy, the CUDA kernels on the CPU executor, and the real kernels where a
GPU is present) is compared, output and gradients, with an independent float64 reference written
here: O = softmax(τ·Q·Kᵀ + bias, masked)·V in PyTorch, gradients by torch autograd. Rows that may
attend to nothing give O = 0 and no gradient. The executor runs the kernels behind the public op
by standing in for the tiled runner, so the dispatcher's reshapes and mask handling are covered.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.kernels.cpu_executor import CpuModule
from tinytensor.kernels.flash_attention import FlashAttentionKernels, kernel_source
from tinytensor.ops import attention, attention_tiled
from tinytensor.ops.attention import choose_attention_impl

from .conftest import require_gxx

IMPLS = ("naive", "tiled", "executor", "cuda")
TOL = {np.float32: 3e-5, np.float64: 1e-11}


@pytest.fixture(scope="module")
def executor():
    require_gxx()
    return FlashAttentionKernels(
        CpuModule(kernel_source(), schedule="random", seed=11, name="flash_attention")
    )


@pytest.fixture
def small_tiles(monkeypatch):
    """Tiles of 8 queries × 16 keys in the NumPy path, so that the sweep's lengths cross tiles."""
    monkeypatch.setattr(attention_tiled, "DEFAULT_BLOCK_Q", 8)
    monkeypatch.setattr(attention_tiled, "DEFAULT_BLOCK_K", 16)


def allowed_pairs(scores_shape, causal, mask, key_lengths):
    """Bool array of the scores' shape: which (query, key) pairs count."""
    n_q, n_k = scores_shape[-2:]
    allowed = np.ones(scores_shape, bool)
    if causal:  # bottom-right alignment: query i sees key j iff j ≤ i + Nk − Nq
        allowed &= np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + n_k - n_q
    if mask is not None:
        allowed &= mask
    if key_lengths is not None:
        lengths = np.asarray(key_lengths).reshape((-1,) + (1,) * (len(scores_shape) - 1))
        allowed &= np.arange(n_k) < lengths
    return allowed


def reference(torch, a, causal=False, scale=None, key_lengths=None):
    """(O, {name: gradient}) in float64 by PyTorch autograd; `a` holds q, k, v, dout, bias, mask."""
    leaves = {
        n: torch.tensor(a[n], dtype=torch.float64, requires_grad=True)
        for n in ("q", "k", "v", "bias")
        if a.get(n) is not None
    }
    q, k, v = leaves["q"], leaves["k"], leaves["v"]
    if q.ndim >= 3 and k.shape[-3] != q.shape[-3]:  # GQA: query head h uses K/V head h // G
        groups = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(groups, dim=-3), v.repeat_interleave(groups, dim=-3)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-1, -2) * scale
    if "bias" in leaves:
        s = s + leaves["bias"]
    allowed = allowed_pairs(tuple(s.shape), causal, a.get("mask"), key_lengths)
    allowed = torch.tensor(allowed)
    empty = ~allowed.any(-1, keepdim=True)
    s = torch.where(allowed, s, -torch.inf)
    s = torch.where(empty, torch.zeros_like(s), s)  # no NaN from a row of -inf
    p = torch.where(allowed, torch.softmax(s, -1), torch.zeros_like(s))
    out = p @ v
    out.backward(torch.tensor(a["dout"], dtype=torch.float64))
    return out.detach().numpy(), {n: t.grad.numpy() for n, t in leaves.items()}


def ours(impl, a, executor=None, causal=False, scale=None, key_lengths=None, gqa=False):
    """(O, {name: gradient}, the autograd node's name) of one public call under `impl`."""
    device = "cuda" if impl == "cuda" else "cpu"
    leaves = {
        n: tt.tensor(a[n], device=device, requires_grad=True)
        for n in ("q", "k", "v", "bias")
        if a.get(n) is not None
    }
    attn_mask = leaves.get("bias")
    if a.get("mask") is not None:
        attn_mask = tt.tensor(a["mask"], device=device)
    stand_in = contextlib.nullcontext()
    if impl == "executor":  # the kernels, on the CPU executor, take the tiled path's place
        stand_in = _patched(attention, "_runner", lambda _: executor)
    backend = {"executor": "tiled"}.get(impl, impl)
    with stand_in, tt.attention_backend(backend):
        out = tt.scaled_dot_product_attention(
            leaves["q"],
            leaves["k"],
            leaves["v"],
            attn_mask=attn_mask,
            is_causal=causal,
            scale=scale,
            enable_gqa=gqa,
            key_lengths=key_lengths,
        )
        node = out._ctx.name
        out.backward(tt.tensor(a["dout"], dtype=out.dtype, device=device))
    return out.numpy(), {n: t.grad.numpy() for n, t in leaves.items()}, node


@contextlib.contextmanager
def _patched(module, name, value):
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def assert_matches(ours_result, ref_result, tol, what):
    out, grads, node = ours_result
    ref_out, ref_grads = ref_result
    assert grads.keys() == ref_grads.keys(), what
    for name, mine, theirs in [("O", out, ref_out)] + [(n, grads[n], ref_grads[n]) for n in grads]:
        label = f"{what} via {node}: {'O' if name == 'O' else 'd' + name}"
        assert mine.shape == theirs.shape, f"{label}: shape {mine.shape} vs {theirs.shape}"
        assert np.isfinite(mine).all(), f"{label}: NaN or inf"
        scale = max(1.0, np.abs(theirs).max(initial=0.0))
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=tol * scale, err_msg=label)


def skip_unavailable(impl):
    if impl == "cuda" and not tt.cuda.is_available():
        pytest.skip("no CUDA GPU here (CuPy missing or no device): the cuda kernels are skipped")


def arrays(shapes, seed, dtype=np.float32, mask=None, bias=None):
    """q, k, v, dout of the given shapes (bias of shape `bias`, bool mask of shape `mask`)."""
    rng = np.random.default_rng(seed)
    out = {n: rng.standard_normal(s).astype(dtype) for n, s in zip(("q", "k", "v", "dout"), shapes)}
    if bias is not None:
        out["bias"] = rng.standard_normal(bias).astype(dtype)
    if mask is not None:
        out["mask"] = rng.random(mask) > 0.4
    return out


def qkv(batch_heads_q, n_q, n_k, d, batch_heads_kv=None, dv=None):
    kv = batch_heads_q if batch_heads_kv is None else batch_heads_kv
    dv = d if dv is None else dv
    return [(*batch_heads_q, n_q, d), (*kv, n_k, d), (*kv, n_k, dv), (*batch_heads_q, n_q, dv)]


B, H, NQ, NK = 2, 2, 13, 37
# name: (shapes, call kwargs, array kwargs). Lengths are chosen so tiles of 8, 16, 32 cross them.
SWEEP = {
    **{
        f"head_dim_{d}": (qkv((1, 2), 19, 23, d), {"causal": True}, {})
        for d in (8, 16, 24, 40, 64, 72, 96, 128)
    },
    **{
        f"decode_nk{nk}{'_causal' if c else ''}": (qkv((B, H), 1, nk, 16), {"causal": c}, {})
        for nk in (1, 7, 33)
        for c in (False, True)
    },
    "more_queries_causal": (qkv((1, 2), 40, 9, 16), {"causal": True}, {}),  # 31 rows see nothing
    "no_keys": (qkv((1, 2), 5, 0, 8), {"causal": True}, {}),
    "2d_inputs": (qkv((), 20, 25, 16), {}, {}),
    "3d_inputs": (qkv((3,), 20, 25, 16), {"causal": True}, {}),
    "5d_inputs": (qkv((2, 2, 2), 9, 11, 8), {"causal": True}, {}),
    **{
        f"bool_mask_{'x'.join(map(str, s))}": (qkv((B, H), NQ, NK, 16), {"causal": c}, {"mask": s})
        for s, c in [
            ((NQ, NK), False),
            ((B, 1, 1, NK), True),
            ((B, H, NQ, NK), False),
            ((1, 1, NQ, NK), True),
        ]
    },
    **{
        f"bias_{'x'.join(map(str, s))}": (qkv((B, H), NQ, NK, 16), {"causal": True}, {"bias": s})
        for s in [(NK,), (1, H, NQ, NK), (B, 1, NQ, NK), (NQ, 1)]
    },
    "key_lengths_0_and_all": (qkv((B, H), NQ, NK, 16), {"key_lengths": (0, NK)}, {}),
    "key_lengths_bias_causal": (
        qkv((B, H), NQ, NK, 16),
        {"key_lengths": (NK, 5), "causal": True},
        {"bias": (1, H, NQ, NK)},
    ),
    "gqa_hkv1": (qkv((B, 4), NQ, NK, 16, (B, 1)), {"gqa": True, "causal": True}, {}),
    "gqa_hkv_half_bias": (
        qkv((B, 4), NQ, NK, 16, (B, 2)),
        {"gqa": True},
        {"bias": (1, 4, NQ, NK)},
    ),
    "gqa_3d_mask": (qkv((4,), NQ, NK, 16, (2,)), {"gqa": True}, {"mask": (NQ, NK)}),
    "scale_given": (qkv((B, H), NQ, NK, 16), {"scale": 0.7}, {"bias": (1, H, NQ, NK)}),
}
# What the kernels do not cover: the naive and tiled paths handle it, "cuda" falls back to naive.
BEYOND_KERNELS = {
    "head_dim_160": (qkv((1, 2), 9, 11, 160), {"causal": True}, {}),
    "value_dim_differs": (qkv((1, 2), 9, 11, 16, dv=8), {"causal": True}, {"bias": (9, 11)}),
}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", list(SWEEP) + list(BEYOND_KERNELS))
def test_sweep_matches_float64_reference(name, impl, torch, executor, small_tiles):
    skip_unavailable(impl)
    if impl == "executor" and name in BEYOND_KERNELS:
        pytest.skip("beyond the kernels (d > 128 or dv != d): the dispatcher never sends it there")
    shapes, call, extra = {**SWEEP, **BEYOND_KERNELS}[name]
    a = arrays(shapes, seed=len(name), **extra)
    reference_call = {k: v for k, v in call.items() if k != "gqa"}
    result = ours(impl, a, executor, **call)
    assert_matches(result, reference(torch, a, **reference_call), TOL[np.float32], name)


@pytest.mark.parametrize("impl", ("naive", "tiled", "cuda"))
def test_float64_is_not_downcast(impl, torch, small_tiles):
    """float64 inputs keep float64 (the kernels are float32-only: "cuda" falls back to naive)."""
    skip_unavailable(impl)
    a = arrays(qkv((B, H), NQ, NK, 16), seed=5, dtype=np.float64, bias=(1, H, NQ, NK))
    out, grads, node = result = ours(impl, a, causal=True)
    assert out.dtype == np.float64 and all(g.dtype == np.float64 for g in grads.values()), node
    assert_matches(result, reference(torch, a, causal=True), TOL[np.float64], "float64")


class Operand:
    """What `choose_attention_impl` reads of a tensor, on a pretended CUDA device."""

    def __init__(self, shape, dtype=np.float32):
        self.shape, self.ndim, self.dtype, self.device = shape, len(shape), np.dtype(dtype), "cuda"


@pytest.mark.parametrize(
    "q_dtype, kv_dtype, bias_dtype, d, dv, expected",
    [
        (np.float32, np.float32, None, 64, 64, "cuda"),
        (np.float32, np.float32, bool, 128, 128, "cuda"),
        (np.float64, np.float64, None, 64, 64, "naive"),
        (np.float32, np.float64, None, 64, 64, "naive"),  # key/value would be downcast
        (np.float32, np.float32, np.float64, 64, 64, "naive"),  # dBias would be downcast
        (np.float32, np.float32, None, 160, 160, "naive"),
        (np.float32, np.float32, None, 64, 32, "naive"),
    ],
)
def test_cuda_backend_falls_back_where_kernels_do_not_cover(
    q_dtype, kv_dtype, bias_dtype, d, dv, expected
):
    q = Operand((2, 4, 9, d), q_dtype)
    k, v = Operand((2, 4, 11, d), kv_dtype), Operand((2, 4, 11, dv), kv_dtype)
    mask = None if bias_dtype is None else Operand((1, 4, 9, 11), bias_dtype)
    with tt.attention_backend("cuda"):
        assert choose_attention_impl(q, k, v, mask) == expected


@pytest.mark.parametrize("impl", ("naive", "tiled", "executor", "cuda"))
def test_non_contiguous_inputs(impl, torch, executor, small_tiles):
    """q, k, v permuted from (B, N, H, d) storage and a transposed bias: views, not copies."""
    skip_unavailable(impl)
    rng = np.random.default_rng(8)
    stored = {
        n: rng.standard_normal(s).astype(np.float32)
        for n, s in [("q", (B, NQ, H, 16)), ("k", (B, NK, H, 16)), ("v", (B, NK, H, 16))]
    }
    stored["bias"] = rng.standard_normal((B, 1, NK, NQ)).astype(np.float32)
    dout = rng.standard_normal((B, H, NQ, 16)).astype(np.float32)
    device = "cuda" if impl == "cuda" else "cpu"
    leaves = {n: tt.tensor(a, device=device, requires_grad=True) for n, a in stored.items()}
    q, k, v = (leaves[n].transpose(1, 2) for n in ("q", "k", "v"))
    bias = leaves["bias"].transpose(-1, -2)
    if impl != "cuda":
        assert not q._array.flags.c_contiguous and not bias._array.flags.c_contiguous
    stand_in = _patched(attention, "_runner", lambda _: executor)
    with stand_in if impl == "executor" else contextlib.nullcontext():
        with tt.attention_backend("tiled" if impl == "executor" else impl):
            out = tt.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=True)
            out.backward(tt.tensor(dout, device=device))
    views = {n: a.swapaxes(1, 2) for n, a in stored.items() if n != "bias"}
    views.update(bias=stored["bias"].swapaxes(-1, -2), dout=dout)
    ref_out, ref_grads = reference(torch, views, causal=True)
    ours_grads = {n: t.grad.numpy() for n, t in leaves.items()}
    ref_grads = {
        n: g.swapaxes(-1, -2) if n == "bias" else g.swapaxes(1, 2) for n, g in ref_grads.items()
    }
    assert_matches((out.numpy(), ours_grads, out._ctx.name), (ref_out, ref_grads), 3e-5, impl)


@pytest.mark.parametrize("backend", ("auto", "naive", "tiled"))
def test_dropout_takes_the_naive_path_and_is_seeded(backend):
    rng = np.random.default_rng(9)
    q, k, v = (tt.tensor(rng.standard_normal((2, 2, 6, 8)), requires_grad=True) for _ in range(3))
    with tt.attention_backend(backend):
        tt.manual_seed(5)
        first = tt.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        tt.manual_seed(5)
        again = tt.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        other = tt.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert first._ctx.name == "ScaledDotProductAttention"
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    assert not np.array_equal(first.numpy(), other.numpy()), "dropout did not draw a new mask"
    with tt.attention_backend("naive"):
        plain = tt.scaled_dot_product_attention(q, k, v)
    assert not np.allclose(first.numpy(), plain.numpy()), "dropout changed nothing"
    first.sum().backward()
    assert all(np.isfinite(t.grad.numpy()).all() for t in (q, k, v))


def test_forcing_tiled_on_5d_inputs_falls_back_to_naive_as_documented():
    q = tt.tensor(np.ones((2, 2, 2, 3, 4), np.float32), requires_grad=True)
    with tt.attention_backend("tiled"):
        out = tt.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert out._ctx.name == "ScaledDotProductAttention" and out.shape == q.shape


def test_clear_errors():
    q = tt.tensor(np.ones((2, 2, 5, 8), np.float32))
    with tt.attention_backend("cuda"), pytest.raises(RuntimeError, match="needs CUDA tensors"):
        tt.scaled_dot_product_attention(q, q, q)
    with pytest.raises(ValueError, match="impl must be one of"):
        tt.attention_backend("flash")
    # NOTE: a mask with more dims than the scores broadcasts, but would grow the output.
    bigger = tt.tensor(np.ones((3, 2, 2, 5, 5), bool))
    for backend in ("naive", "tiled"):
        with tt.attention_backend(backend), pytest.raises(ValueError, match=r"attn_mask of shape"):
            tt.scaled_dot_product_attention(q, q, q, attn_mask=bigger)
    with pytest.raises(ValueError, match="key_lengths must be"):
        tt.scaled_dot_product_attention(q, q, q, key_lengths=np.array([1.5, 2.0]))
