"""The fused kernels' results do not depend on the thread count, bit for bit, on every machine.

Designed in, not observed: every reduction has one fixed order whatever the thread count. Rows
(softmax, norms, losses, attention's heads and query blocks) each go to one thread; the
products' blocks depend on the shapes alone (gemm.py); partial sums (weight gradients, the
embedding's scatter-add) are added in a fixed order; and an array's size, never the thread
count, picks the twin that computes it (dispatch.parallel_for: the serial and the parallel twin
are compiled apart and may round differently). CI runs this under emulated other machines too
(scripts/test_other_machines.sh).
"""

import types

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.kernels.cpu import dispatch, mkl_blas

F = tt.nn.functional
B, T, D, HEADS, VOCAB = 4, 128, 64, 4, 97  # 512 rows: the products split; 32k-element arrays


pytestmark = pytest.mark.usefixtures("restored_thread_policy")


@pytest.fixture
def parallel_calls(monkeypatch):
    """The names of the parallel twins that ran (every kernel module's twin_jit pairs)."""
    names = []
    for family in ("add", "attention", "embedding", "gelu", "gemm", "norms", "optimizers",
                   "softmax"):  # fmt: skip
        module = dispatch._modules.get(family) or dispatch._load(family)
        for twin in vars(module).values():
            if isinstance(twin, types.SimpleNamespace) and hasattr(twin, "parallel"):
                kernel = twin.parallel
                counting = lambda *a, _k=kernel, _n=twin.name: names.append(_n) or _k(*a)  # noqa: E731
                monkeypatch.setattr(twin, "parallel", counting)
    return names


def training_step(dtype, n_threads):
    """One GPT-like step (embedding, layer and RMS norms, causal and masked attention, both
    GELUs, linear layers, cross-entropy, AdamW) at `n_threads`; every array it makes."""
    tt.set_num_threads(n_threads)
    rng = np.random.default_rng(0)

    def param(*shape, scale=0.2):
        return tt.nn.Parameter(tt.tensor((rng.standard_normal(shape) * scale).astype(dtype)))

    emb, w_qkv, w_up, b_up = param(VOCAB, D), param(3 * D, D), param(4 * D, D), param(4 * D)
    w_down, w_out, ln_w, ln_b = param(D, 4 * D), param(VOCAB, D), param(D), param(D)
    params = [emb, w_qkv, w_up, b_up, w_down, w_out, ln_w, ln_b]
    ids = tt.tensor(rng.integers(0, VOCAB, (B, T)))
    targets = tt.tensor(rng.integers(0, VOCAB, (B * T,)))
    keep = tt.tensor(rng.random((T, T)) > 0.3)
    with tt.cpu_kernels("numba"):
        x = F.embedding(ids, emb)
        q, k, v = F.linear(F.layer_norm(x, (D,), ln_w, ln_b), w_qkv).split(D, dim=-1)
        q, k, v = (t.reshape(B, T, HEADS, D // HEADS).transpose(1, 2) for t in (q, k, v))
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        masked = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        x = x + (causal + masked).transpose(1, 2).reshape(B, T, D)
        h = F.linear(F.rms_norm(x, (D,), ln_w), w_up, b_up)
        x = x + F.linear(F.gelu(h) + F.gelu(h, approximate="tanh"), w_down)
        logits = F.linear(x, w_out).reshape(B * T, VOCAB)
        loss = F.cross_entropy(logits, targets) + F.log_softmax(logits, -1).mean() * 1e-3
        loss.backward()
        grads = [p.grad.numpy().copy() for p in params]
        tt.optim.AdamW(params, lr=1e-2, weight_decay=0.1).step()
    return [loss.numpy(), logits.numpy(), *grads, *(p.numpy() for p in params)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_training_step_is_the_same_at_every_thread_count(dtype, parallel_calls):
    one = training_step(dtype, 1)
    for n_threads in (2, 3):
        other = training_step(dtype, n_threads)
        for i, (a, b) in enumerate(zip(one, other, strict=True)):
            np.testing.assert_array_equal(b, a, err_msg=f"array {i}, {n_threads} threads vs 1")
    ran = set(parallel_calls)
    assert EXPECTED_PARALLEL <= ran, f"not in the parallel twin: {EXPECTED_PARALLEL - ran}"


# the kernels of the step above whose arrays are large enough for the parallel twin
EXPECTED_PARALLEL = {
    "_rows_product_mkl" if mkl_blas.gemm_functions() else "_rows_product", "_layer_norm_forward",
    "_layer_norm_backward", "_rms_norm_forward", "_rms_norm_backward", "_gelu_exact_forward",
    "_gelu_exact_backward", "_gelu_tanh_forward", "_gelu_tanh_backward", "_adam_update",
    "_scatter_add_rows", "_cross_entropy_forward", "_cross_entropy_backward",
    "_log_softmax_forward",
}  # fmt: skip
