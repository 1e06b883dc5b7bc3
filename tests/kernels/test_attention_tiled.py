"""The tiled NumPy attention (FlashAttention-2) against the naive path, forward and gradients.

The naive path is the reference (it is gradchecked and compared with PyTorch elsewhere). Tiles of
32 queries × 16 keys are used so that no case's length is a multiple of a tile.
"""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.ops import attention_tiled
from tinytensor.ops.attention import choose_attention_impl
from tinytensor.ops.attention_tiled import AttentionSpec, flash_attention_forward

from .cases import CASE_IDS, CASES, make_inputs


@pytest.fixture
def small_tiles(monkeypatch):
    monkeypatch.setattr(attention_tiled, "DEFAULT_BLOCK_Q", 32)
    monkeypatch.setattr(attention_tiled, "DEFAULT_BLOCK_K", 16)


def run_attention(impl, case, arrays, dtype):
    """Output and gradients (q, k, v, bias) of one public call under backend `impl`."""
    leaves = {n: tt.tensor(arrays[n], dtype=dtype, requires_grad=True) for n in ("q", "k", "v")}
    mask = None
    if arrays["bias"] is not None:
        leaves["bias"] = tt.tensor(arrays["bias"], dtype=dtype, requires_grad=True)
        mask = leaves["bias"]
    elif arrays["mask"] is not None:
        mask = tt.tensor(arrays["mask"])
    with tt.attention_backend(impl):
        assert choose_attention_impl(leaves["q"], leaves["k"], leaves["v"], mask) == impl
        out = tt.scaled_dot_product_attention(
            leaves["q"],
            leaves["k"],
            leaves["v"],
            attn_mask=mask,
            is_causal=case.causal,
            scale=case.scale,
            enable_gqa=case.gqa,
            key_lengths=arrays["lengths"],
        )
    out.backward(tt.tensor(arrays["dout"], dtype=dtype))
    grads = {n: t.grad.numpy() for n, t in leaves.items()}
    return out.numpy(), grads


@pytest.mark.parametrize("dtype, tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_tiled_matches_naive(case, dtype, tol, small_tiles):
    arrays = make_inputs(case, dtype)
    ref_out, ref_grads = run_attention("naive", case, arrays, dtype)
    out, grads = run_attention("tiled", case, arrays, dtype)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, ref_out, rtol=tol, atol=tol, err_msg=f"{case.name}: output")
    assert grads.keys() == ref_grads.keys()
    for name, g in grads.items():
        assert np.isfinite(g).all(), f"{case.name}: d{name} has NaN/inf"
        scale = max(1.0, np.abs(ref_grads[name]).max())
        np.testing.assert_allclose(
            g, ref_grads[name], rtol=tol, atol=tol * scale, err_msg=f"{case.name}: d{name}"
        )


def test_fully_masked_rows_give_zeros_and_infinite_lse():
    """Causal with Nq > Nk: queries i < Nq − Nk see no key (bottom-right alignment)."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 40, 16))
    k, v = rng.standard_normal((2, 1, 2, 23, 16))
    spec = AttentionSpec(scale=0.25, causal=True)
    out, lse = flash_attention_forward(q, k, v, None, spec, block_q=16, block_k=8)
    assert np.all(out[:, :, :17] == 0) and np.all(lse[:, :, :17] == np.inf)
    # the other rows: L = logsumexp over the keys j ≤ i − 17, computed here with plain NumPy
    s = np.einsum("bhid,bhjd->bhij", q, k) * 0.25
    visible = np.arange(23)[None, :] <= np.arange(40)[:, None] - 17
    s = np.where(visible, s, -np.inf)[:, :, 17:]
    expected = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    np.testing.assert_allclose(lse[:, :, 17:], expected, rtol=1e-12)


def test_shared_bias_gradient_adds_up_over_layers(small_tiles):
    """T5 computes one bias and every layer uses it: dBias is the sum over those uses."""
    rng = np.random.default_rng(2)
    q1, q2, k, v = rng.standard_normal((4, 2, 2, 37, 16))
    bias_data = rng.standard_normal((1, 2, 37, 37))

    def total_grad(impl):
        bias = tt.tensor(bias_data, requires_grad=True)
        with tt.attention_backend(impl):
            o1 = tt.scaled_dot_product_attention(tt.tensor(q1), tt.tensor(k), tt.tensor(v), bias)
            o2 = tt.scaled_dot_product_attention(o1, tt.tensor(k), tt.tensor(v), bias)
        (o2 * o2).sum().backward()
        return bias.grad.numpy()

    np.testing.assert_allclose(total_grad("tiled"), total_grad("naive"), rtol=1e-10, atol=1e-12)


def test_auto_choice_and_fallbacks():
    small = tt.randn(1, 2, 8, 16)
    big = tt.randn(1, 8, 1024, 16)
    assert choose_attention_impl(small, small, small) == "naive"
    assert choose_attention_impl(big, big, big) == "tiled"
    # dropout and 5-D inputs always take the naive path, whatever is asked
    with tt.attention_backend("tiled"):
        assert choose_attention_impl(big, big, big, dropout_p=0.1) == "naive"
        five = tt.randn(1, 1, 2, 8, 16)
        assert choose_attention_impl(five, five, five) == "naive"
    with tt.attention_backend("naive"):
        assert choose_attention_impl(big, big, big) == "naive"
    with pytest.raises(RuntimeError, match="needs CUDA tensors"):
        with tt.attention_backend("cuda"):
            tt.scaled_dot_product_attention(small, small, small)
    with pytest.raises(ValueError, match="impl must be one of"):
        tt.attention_backend("flash")


def test_tiled_dropout_falls_back_to_naive():
    q = tt.randn(1, 2, 8, 16, requires_grad=True)
    with tt.attention_backend("tiled"):
        out = tt.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert out._ctx.name == "ScaledDotProductAttention"


def test_tiled_path_records_flash_node(small_tiles):
    q = tt.randn(1, 2, 8, 16, requires_grad=True)
    with tt.attention_backend("tiled"):
        out = tt.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert out._ctx.name == "FlashAttention"
