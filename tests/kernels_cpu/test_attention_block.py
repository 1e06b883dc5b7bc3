"""The fused attention-block kernels (kernels/cpu/attention_block.py) against the NumPy
reference of ScaledDotProductAttention: forward and the three input gradients, float32 and
float64, 1 and 2 threads, masks with fully masked rows, odd sizes; run-to-run identity, a float64
gradcheck through the kernel, PyTorch's attention, and the calls the kernel declines."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.kernels.cpu import attention_block, threads
from tinytensor.ops import attention as attention_op

F = tt.nn.functional
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}


@pytest.fixture(autouse=True)
def block_on_and_thread_policy_restored(monkeypatch):
    """The block kernel is opt-in (USE_ATTENTION_BLOCK): on for these tests."""
    monkeypatch.setattr(attention_op, "USE_ATTENTION_BLOCK", True)
    saved = dict(threads._state)
    yield
    threads._state.update(saved)
    threads._state["current"] = None
    threads._apply(saved["fixed"] or threads.cores_allowed())


@pytest.fixture
def block_calls(monkeypatch):
    """Counts the fused forward and backward calls, so that a comparison compares something."""
    calls = {"forward": 0, "backward": 0}
    for name in ("forward", "backward"):
        original = getattr(attention_block, f"attention_{name}")

        def counted(*args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(attention_block, f"attention_{name}", counted)
    return calls


def run(mode, arrays, seed_grad=0, **kwargs):
    """Output and the gradients of q, k, v (numpy arrays) under `mode`, for a fixed random dO."""
    with tt.cpu_kernels(mode):
        leaves = [tt.tensor(a.copy(), requires_grad=True) for a in arrays]
        out = F.scaled_dot_product_attention(*leaves, **kwargs)
        g = np.random.default_rng(seed_grad).standard_normal(out.shape).astype(out.dtype)
        out.backward(tt.tensor(g))
    return [out.numpy()] + [t.grad.numpy() for t in leaves]


def qkv(shape_q, n_keys, dtype, seed=0, d_v=None):
    rng = np.random.default_rng(seed)
    *lead, n_q, d = shape_q
    d_v = d if d_v is None else d_v
    shapes = (shape_q, (*lead, n_keys, d), (*lead, n_keys, d_v))
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def assert_block_matches_reference(arrays, dtype, calls, **kwargs):
    ref = run("numpy", arrays, **kwargs)
    for n_threads in (1, 2):
        tt.set_num_threads(n_threads)
        before = dict(calls)
        fused = run("numba", arrays, **kwargs)
        assert calls["forward"] == before["forward"] + 1, "the fused forward did not run"
        assert calls["backward"] == before["backward"] + 1, "the fused backward did not run"
        for name, a, b in zip(("output", "dq", "dk", "dv"), fused, ref):
            where = f"{name}, {n_threads} thread(s)"
            assert a.dtype == b.dtype and a.shape == b.shape, where
            np.testing.assert_allclose(a, b, **TOL[dtype], err_msg=where)


def random_mask(n_q, n_k, seed=1):
    allowed = np.random.default_rng(seed).random((n_q, n_k)) > 0.4
    allowed[n_q // 2] = False  # a query that may attend to nothing: zeros, not NaN
    return allowed


SHAPES = [  # (q shape, Nk)
    ((2, 3, 7, 5), 7),
    ((1, 2, 1, 1), 1),  # T = 1, D = 1
    ((2, 2, 65, 33), 65),  # odd sizes, and enough scores for the parallel twin
    ((3, 9, 5), 9),  # 3-D, Nq != Nk
    ((2, 1, 7, 5), 65),
    ((16, 4, 64, 32), 64),  # the GPT shape
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mask", ["none", "causal", "random"])
@pytest.mark.parametrize("shape_q, n_keys", SHAPES)
def test_block_matches_reference(shape_q, n_keys, mask, dtype, block_calls):
    arrays = qkv(shape_q, n_keys, dtype)
    kwargs = {"is_causal": mask == "causal"}
    if mask == "random":
        kwargs["attn_mask"] = tt.tensor(random_mask(shape_q[-2], n_keys))
    assert_block_matches_reference(arrays, dtype, block_calls, **kwargs)


def test_value_dim_differs_and_fully_masked_row_gives_zeros(block_calls):
    arrays = qkv((2, 3, 6, 4), 6, np.float64, d_v=7)
    allowed = random_mask(6, 6)
    assert_block_matches_reference(arrays, np.float64, block_calls, attn_mask=tt.tensor(allowed))
    out, dq, _, _ = run("numba", arrays, attn_mask=tt.tensor(allowed))
    assert (out[..., 3, :] == 0).all() and (dq[..., 3, :] == 0).all()


def test_only_the_needed_gradients(block_calls):
    q, k, v = qkv((2, 2, 9, 4), 9, np.float64)
    with tt.cpu_kernels("numba"):
        tq = tt.tensor(q, requires_grad=True)
        out = F.scaled_dot_product_attention(tq, tt.tensor(k), tt.tensor(v), is_causal=True)
        out.sum().backward()
    with tt.cpu_kernels("numpy"):
        ref = tt.tensor(q, requires_grad=True)
        F.scaled_dot_product_attention(
            ref, tt.tensor(k), tt.tensor(v), is_causal=True
        ).sum().backward()
    assert block_calls["backward"] == 1
    np.testing.assert_allclose(tq.grad.numpy(), ref.grad.numpy(), **TOL[np.float64])


@pytest.mark.parametrize("n_threads", [1, 2])
def test_same_result_run_to_run(n_threads, block_calls):
    tt.set_num_threads(n_threads)
    arrays = qkv((16, 4, 64, 32), 64, np.float32, seed=3)
    first = run("numba", arrays, is_causal=True)
    for _ in range(3):
        again = run("numba", arrays, is_causal=True)
        for a, b in zip(first, again):
            assert np.array_equal(a, b)


def test_float64_gradcheck_through_the_block(block_calls):
    rng = np.random.default_rng(9)
    q, k, v = (tt.tensor(rng.standard_normal((1, 2, 5, 3)), requires_grad=True) for _ in "qkv")
    allowed = tt.tensor(random_mask(5, 5, seed=4))
    sdpa = F.scaled_dot_product_attention
    with tt.cpu_kernels("numba"):
        assert tt.gradcheck(lambda q, k, v: sdpa(q, k, v, is_causal=True), [q, k, v])
        assert tt.gradcheck(lambda q, k, v: sdpa(q, k, v, attn_mask=allowed), [q, k, v])
    assert block_calls["forward"] > 0 and block_calls["backward"] > 0


def test_matches_pytorch(block_calls):
    torch = pytest.importorskip("torch")
    arrays = qkv((2, 4, 33, 16), 33, np.float64, seed=5)
    ours = run("numba", arrays, is_causal=True)
    leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=True)
    g = np.random.default_rng(0).standard_normal(out.shape)
    out.backward(torch.tensor(g))
    theirs = [out.detach().numpy()] + [t.grad.numpy() for t in leaves]
    assert block_calls["forward"] == 1
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", ["bias", "dropout", "gqa", "batched_mask", "off"])
def test_declined_calls_give_the_reference(case, block_calls, monkeypatch):
    dtype = np.float64
    arrays = qkv((2, 4, 6, 5), 6, dtype, seed=6)
    kwargs = {"is_causal": True}
    if case == "bias":
        bias = np.random.default_rng(7).standard_normal((6, 6))
        kwargs = {"attn_mask": tt.tensor(bias)}
    elif case == "gqa":
        arrays[1], arrays[2] = arrays[1][:, :2].copy(), arrays[2][:, :2].copy()
        kwargs["enable_gqa"] = True
    elif case == "batched_mask":  # one mask per batch element: not shared by every head
        allowed = np.random.default_rng(8).random((2, 1, 6, 6)) > 0.3
        kwargs = {"attn_mask": tt.tensor(allowed)}
    elif case == "off":
        monkeypatch.setattr(attention_op, "USE_ATTENTION_BLOCK", False)
    if case == "dropout":
        # the same dropout mask in both modes: the same seed before each run
        tt.manual_seed(0)
        ref = run("numpy", arrays, dropout_p=0.3, is_causal=True)
        tt.manual_seed(0)
        fused = run("numba", arrays, dropout_p=0.3, is_causal=True)
    else:
        ref = run("numpy", arrays, **kwargs)
        fused = run("numba", arrays, **kwargs)
    assert block_calls == {"forward": 0, "backward": 0}
    for a, b in zip(fused, ref):
        np.testing.assert_allclose(a, b, **TOL[dtype])


def test_numpy_mode_never_takes_the_block(block_calls):
    run("numpy", qkv((2, 2, 8, 4), 8, np.float32), is_causal=True)
    assert block_calls == {"forward": 0, "backward": 0}
