"""Each fused CPU kernel against the readable NumPy reference of the same op, forward and
backward, float32 and float64, on odd shapes and on sizes that take the parallel twin."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.kernels.cpu import dispatch

F = tt.nn.functional

# float32: the kernels' exp/tanh are within a few ulp and their sums are split differently from
# NumPy's pairwise sums; float64: only the summation order differs.
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}
DTYPES = (np.float32, np.float64)
BIG = dispatch.PARALLEL_MIN_ELEMENTS  # at least this many elements: the parallel twin runs


def run(mode, build, arrays, seed_grad=0):
    """Forward with `mode`, backward with a fixed random output gradient; returns numpy
    arrays: the output and each input's gradient."""
    with tt.cpu_kernels(mode):
        leaves = [tt.tensor(a.copy(), requires_grad=a.dtype.kind == "f") for a in arrays]
        out = build(*leaves)
        g = np.random.default_rng(seed_grad).standard_normal(out.shape).astype(out.dtype)
        out.backward(tt.tensor(g))
    grads = [t.grad.numpy() if t.grad is not None else None for t in leaves]
    return [out.numpy()] + grads


pytestmark = pytest.mark.usefixtures("restored_thread_policy")


def assert_fused_matches_reference(build, arrays, dtype, **tolerance):
    """At 1 thread (the serial twins) and 2 (the parallel twins above PARALLEL_MIN_ELEMENTS)."""
    ref = run("numpy", build, arrays)
    tol = {**TOL[dtype], **tolerance}
    for n_threads in (1, 2):
        tt.set_num_threads(n_threads)
        fused = run("numba", build, arrays)
        for i, (a, b) in enumerate(zip(fused, ref)):
            where = f"output {i} (0 = forward), {n_threads} thread(s)"
            if b is None:
                assert a is None, where
                continue
            assert a.dtype == b.dtype, f"{where}: {a.dtype} vs {b.dtype}"
            np.testing.assert_allclose(a, b, **tol, err_msg=where)


def randn(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def test_the_fused_path_is_taken(monkeypatch):
    """The comparisons below compare something: under "numba" the kernel module runs."""
    from tinytensor.kernels.cpu import norms

    calls = []
    original = norms.layer_norm_forward
    monkeypatch.setattr(norms, "layer_norm_forward", lambda *a: calls.append(1) or original(*a))
    x = tt.randn(3, 5)
    with tt.cpu_kernels("numba"):
        F.layer_norm(x, (5,))
    with tt.cpu_kernels("numpy"):
        F.layer_norm(x, (5,))
    assert calls == [1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 5, 33), (BIG // 96 + 3, 96)])
def test_softmax_and_log_softmax(dtype, shape):
    rng = np.random.default_rng(1)
    x = randn(rng, shape, dtype, 4.0)
    assert_fused_matches_reference(lambda t: F.softmax(t, -1), [x], dtype)
    assert_fused_matches_reference(lambda t: F.log_softmax(t, -1), [x], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("rows", [1, 7, BIG // 50 + 5])
def test_cross_entropy(dtype, reduction, smoothing, rows):
    rng = np.random.default_rng(2)
    z = randn(rng, (rows, 50), dtype, 3.0)
    target = rng.integers(0, 50, rows)
    target[::3] = -100  # ignored rows: no loss, no gradient

    def build(logits, t):
        return F.cross_entropy(logits, t, reduction=reduction, label_smoothing=smoothing)

    assert_fused_matches_reference(build, [z, target], dtype)


@pytest.mark.parametrize("mode", ["numba", "numpy"])
@pytest.mark.parametrize("rows", [5, BIG // 50 + 5])
@pytest.mark.parametrize("bad_id", [50, -1, 2**40])
def test_cross_entropy_out_of_range_id_is_a_clear_error(mode, rows, bad_id):
    """The fused kernel flags ids out of range in its own pass (and reads nothing for them):
    the same IndexError as the reference's check, serial and parallel."""
    z = tt.tensor(np.zeros((rows, 50), np.float32), requires_grad=True)
    target = np.arange(rows) % 50
    target[rows // 2] = bad_id
    target[0] = 7  # the ignore_index below: ignored, never an error
    with tt.cpu_kernels(mode), pytest.raises(IndexError) as info:
        F.cross_entropy(z, tt.tensor(target), ignore_index=7)
    assert str(info.value) == f"cross_entropy: target id {bad_id} is out of range for 50 classes"


def test_cross_entropy_ignore_index_outside_the_classes_is_not_an_error():
    z = tt.tensor(np.zeros((BIG // 50 + 5, 50), np.float32))
    target = np.arange(z.shape[0]) % 50
    target[::2] = -100
    with tt.cpu_kernels("numba"):
        loss = F.cross_entropy(z, tt.tensor(target))
    np.testing.assert_allclose(loss.item(), np.log(50), rtol=1e-6)  # uniform logits: log C


def test_cross_entropy_every_target_ignored_is_nan_with_zero_gradient():
    z = tt.randn(4, 3, requires_grad=True)
    with tt.cpu_kernels("numba"):
        loss = F.cross_entropy(z, tt.tensor([-100] * 4))
        loss.backward()
    assert np.isnan(loss.item()) and not z.grad.numpy().any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 5, 33), (BIG // 128 + 3, 128)])
@pytest.mark.parametrize("affine", ["none", "weight", "weight+bias"])
def test_layer_norm(dtype, shape, affine):
    rng = np.random.default_rng(3)
    n = shape[-1]
    arrays = [randn(rng, shape, dtype, 2.0) + 1.5]
    if affine != "none":
        arrays.append(randn(rng, (n,), dtype))
    if affine == "weight+bias":
        arrays.append(randn(rng, (n,), dtype))
    assert_fused_matches_reference(lambda x, *wb: F.layer_norm(x, (n,), *wb), arrays, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (BIG // 64 + 3, 64)])
@pytest.mark.parametrize("weighted", [False, True])
def test_rms_norm(dtype, shape, weighted):
    rng = np.random.default_rng(4)
    n = shape[-1]
    arrays = [randn(rng, shape, dtype, 2.0)] + ([randn(rng, (n,), dtype)] if weighted else [])
    assert_fused_matches_reference(lambda x, *w: F.rms_norm(x, (n,), *w, eps=1e-6), arrays, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("shape", [(1,), (3, 7), (BIG + 13,)])
def test_gelu(dtype, approximate, shape):
    rng = np.random.default_rng(5)
    x = randn(rng, shape, dtype, 3.0)
    x.flat[:3] = [0.0, 12.0, -12.0][: x.size]  # saturated tails
    # NOTE: float32 tanh form: the reference's 1 - t² cancels for x < -3 (errors up to ~5e-7·|g|,
    # see the next test), so the gradient is compared with that allowance
    loose = dict(atol=5e-6) if dtype == np.float32 and approximate == "tanh" else {}
    build = lambda t: F.gelu(t, approximate=approximate)  # noqa: E731
    assert_fused_matches_reference(build, [x], dtype, **loose)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("size", [7, BIG + 3])  # the serial and the parallel twin
def test_gelu_without_a_graph_gives_the_same_values(dtype, approximate, size):
    """Under no_grad the exact form skips the array backward would read (the tanh form keeps
    it: see gelu_forward); the output is the recorded one, bit for bit."""
    x = randn(np.random.default_rng(6), (size,), dtype, 3.0)
    with tt.cpu_kernels("numba"):
        leaf = tt.tensor(x, requires_grad=True)
        recorded = F.gelu(leaf, approximate=approximate)
        with tt.no_grad():
            plain = F.gelu(leaf, approximate=approximate)
    assert recorded._ctx.saved is not None and plain._ctx is None
    np.testing.assert_array_equal(plain.numpy(), recorded.numpy())
    from tinytensor.kernels.cpu import gelu

    z, saved = gelu.gelu_forward(x, approximate, keep=False)
    assert (saved is None) == (approximate == "none")
    np.testing.assert_array_equal(z, recorded.numpy())


def test_gelu_tanh_tail_is_at_least_as_accurate_as_the_reference():
    """Against the float64 formula: in the negative tail the fused kernel keeps 1 + t without
    cancelling, where NumPy's float32 reference loses most digits of the gradient."""
    x = np.linspace(-6.0, -2.0, 41).astype(np.float32)
    x64 = x.astype(np.float64)
    k0 = np.sqrt(2 / np.pi)
    t = np.tanh(k0 * (x64 + 0.044715 * x64**3))
    truth = 0.5 * (1 + t) + 0.5 * x64 * (1 - t * t) * k0 * (1 + 3 * 0.044715 * x64**2)
    errors = {}
    for mode in ("numpy", "numba"):
        with tt.cpu_kernels(mode):
            leaf = tt.tensor(x, requires_grad=True)
            F.gelu(leaf, approximate="tanh").sum().backward()
        errors[mode] = np.abs(leaf.grad.numpy() - truth)
    assert errors["numba"].max() <= errors["numpy"].max(), errors
    assert (errors["numba"] <= 4e-6 * np.abs(truth)).all(), errors["numba"] / np.abs(truth)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape", [(1, 1, 1, 4), (2, 3, 5, 8), (2, 4, 70, 16)], ids=["tiny", "odd", "parallel"]
)
@pytest.mark.parametrize("mask", ["none", "causal", "bool2d"])
def test_attention_scale_mask_softmax(dtype, shape, mask):
    rng = np.random.default_rng(6)
    q, k, v = (randn(rng, shape, dtype) for _ in range(3))
    n = shape[-2]
    allowed = rng.random((n, n)) > 0.3
    if n > 1:
        allowed[1] = False  # a row that may attend to nothing: zeros, not NaN

    def build(q, k, v):
        if mask == "bool2d":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=tt.tensor(allowed))
        return F.scaled_dot_product_attention(q, k, v, is_causal=mask == "causal")

    assert_fused_matches_reference(build, [q, k, v], dtype)


@pytest.mark.parametrize("scale", [-0.3, 0.0, 0.7])
@pytest.mark.parametrize("mask", ["causal", "bool2d"])
def test_attention_any_scale_sign(scale, mask):
    """The kernel folds a positive scale into the exp (max(scale·s) = scale·max(s)); zero and
    negative scales take the scale-first path. All match the reference."""
    rng = np.random.default_rng(8)
    q, k, v = (randn(rng, (2, 3, 40, 8), np.float32) for _ in range(3))
    allowed = rng.random((40, 40)) > 0.4

    def build(q, k, v):
        attn_mask = tt.tensor(allowed) if mask == "bool2d" else None
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=mask == "causal", scale=scale
        )

    tt.set_num_threads(2)
    assert_fused_matches_reference(build, [q, k, v], np.float32)


def test_attention_reads_a_mask_only_where_the_key_spans_do_not_say_it_all():
    from tinytensor.kernels.cpu import attention

    causal = np.tril(np.ones((5, 5), bool))
    holes = causal.copy()
    holes[3, 1] = False
    for allowed, expected in ((None, False), (causal, False), (holes, True)):
        ends = attention.key_spans(allowed, 5, 5)
        assert attention.needs_mask(allowed, ends) is expected


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "case",
    ["strided heads", "cross", "gqa", "causal cross", "bool mask"],
    ids=lambda c: c.replace(" ", "-"),
)
@pytest.mark.parametrize("blas", ["openblas", "mkl"])
def test_attention_head_by_head_on_the_pool(dtype, case, blas, monkeypatch):
    """At 2 threads the whole block runs one head per pool task (products included): strided
    (B, T, H, d) views, Nq != Nk, grouped K/V heads, a bottom-right causal mask, and a boolean
    mask with holes whose first 40 query rows see no key (a whole query block of the forward's
    products is skipped: zero rows). MKL reads the strided heads in place (at 1 thread too);
    with OpenBLAS they are copied first."""
    from tinytensor.kernels.cpu import attention, mkl_blas

    if blas == "openblas":
        monkeypatch.setattr(attention, "gemm_functions", lambda: {})
    elif not mkl_blas.gemm_functions():
        pytest.skip(f"{mkl_blas.why_not_in_use()}: OpenBLAS case only")

    calls = []
    original = attention.heads_forward
    monkeypatch.setattr(attention, "heads_forward", lambda *a: calls.append(1) or original(*a))
    rng = np.random.default_rng(11)
    nq, nk, hq, hk = (48, 80, 6, 6) if "cross" in case else (64, 64, 6, 6)
    if case == "gqa":
        hk = 2
    q, k, v = (
        randn(rng, (3, nq, hq, 16), dtype),
        randn(rng, (3, nk, hk, 16), dtype),
        randn(rng, (3, nk, hk, 24), dtype),
    )
    mask = None
    if case == "bool mask":
        allowed = rng.random((nq, nk)) > 0.5
        allowed[:40] = False
        allowed[50, 60:] = False  # a row whose span ends early
        mask = tt.tensor(allowed)

    def build(q, k, v):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, d) views, as models make
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal="causal" in case, enable_gqa=case == "gqa"
        )
        return out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1)  # as models do

    assert_fused_matches_reference(build, [q, k, v], dtype)
    assert calls  # at 2 threads the head-by-head kernel ran


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("blas", ["openblas", "mkl"])
def test_attention_head_by_head_key_spans(dtype, blas, monkeypatch):
    """A mask made to catch wrong key spans of the query blocks (32 rows each): 100 queries
    (blocks of 32, 32, 32 and 4) over 90 keys, with spans 30, 0 (an empty block in the middle),
    80 (more than the blocks before it) and 20; in each block the widest row is neither the
    first nor the last, and no query sees keys 80-89 (their dK and dV rows must be 0). The
    kernels' output buffers start as NaN: an element they leave unwritten, or a row of dS
    past its span that a product reads, shows. At a fixed thread count, bit for bit run to run."""
    from tinytensor.kernels.cpu import attention, buffers, mkl_blas

    if blas == "openblas":
        monkeypatch.setattr(attention, "gemm_functions", lambda: {})
    elif not mkl_blas.gemm_functions():
        pytest.skip(f"{mkl_blas.why_not_in_use()}: OpenBLAS case only")
    monkeypatch.setattr(buffers, "empty", lambda shape, dtype: np.full(shape, np.nan, dtype))
    calls = []
    original = attention.heads_forward
    monkeypatch.setattr(attention, "heads_forward", lambda *a: calls.append(1) or original(*a))

    rng = np.random.default_rng(13)
    nq, nk = 100, 90
    allowed = rng.random((nq, nk)) > 0.4
    ends = np.array([30] * 32 + [0] * 32 + [80] * 32 + [20] * 4)
    ends[[3, 40, 77, 99]] = [12, 0, 35, 9]  # shorter rows: the block's span is their maximum
    ends[[10, 70, 97]] = [30, 80, 20]
    ends[[0, 31, 64, 95, 96]] = [5, 7, 50, 60, 3]  # not the first nor the last row of a block
    allowed &= np.arange(nk) < ends[:, None]
    allowed[np.arange(nq), np.maximum(ends - 1, 0)] = ends > 0  # each row's span is exact
    allowed[80] = False  # a row that sees nothing, in a block that sees keys
    np.testing.assert_array_equal(
        attention.key_spans(allowed, nq, nk), np.where(np.arange(nq) == 80, 0, ends)
    )
    mask = tt.tensor(allowed)
    q, k, v = (randn(rng, (2, n, 3, w), dtype) for n, w in ((nq, 16), (nk, 16), (nk, 8)))

    def build(q, k, v):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, d) views, as models make
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1)

    assert_fused_matches_reference(build, [q, k, v], dtype)
    assert calls
    grads = run("numba", build, [q, k, v])[2:]
    assert not grads[0][:, 80:].any() and not grads[1][:, 80:].any()  # dK, dV of keys 80-89
    for n_threads in (1, 2):
        tt.set_num_threads(n_threads)
        first, second = run("numba", build, [q, k, v]), run("numba", build, [q, k, v])
        for a, b in zip(first, second):
            np.testing.assert_array_equal(a, b)


def test_attention_query_blocks():
    """The backward's query blocks (first row, rows, key span): the forward's blocks of 32 rows,
    consecutive ones with the same span as one, the widest first."""
    from tinytensor.kernels.cpu.attention import query_blocks

    causal = np.arange(1, 101)  # each row's span: 1 + its index
    assert query_blocks(causal).tolist() == [[96, 4, 100], [64, 32, 96], [32, 32, 64], [0, 32, 32]]
    assert query_blocks(np.full(128, 90)).tolist() == [[0, 128, 90]]  # no mask: one block
    ends = np.array([3] * 40 + [0] * 60 + [7] * 5)
    assert query_blocks(ends).tolist() == [[96, 9, 7], [0, 64, 3], [64, 32, 0]]


def test_attention_head_by_head_passes_gradcheck(monkeypatch):
    from tinytensor.kernels.cpu import attention

    # small enough for gradcheck: the pool and the head-by-head path taken at any size
    monkeypatch.setattr(dispatch, "PARALLEL_MIN_ELEMENTS", 1)
    monkeypatch.setattr(attention, "HEADS_MIN_SCORES", 1)
    calls = []
    original = attention.heads_forward
    monkeypatch.setattr(attention, "heads_forward", lambda *a: calls.append(1) or original(*a))
    tt.set_num_threads(2)
    rng = np.random.default_rng(12)
    q, k, v = (tt.tensor(rng.standard_normal((2, 3, 5, 4)), requires_grad=True) for _ in "qkv")
    sdpa = F.scaled_dot_product_attention
    with tt.cpu_kernels("numba"):
        assert tt.gradcheck(lambda q, k, v: sdpa(q, k, v, is_causal=True), [q, k, v])
    assert calls


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("tokens", [5, BIG // 8 + 1])
def test_embedding_backward_with_repeated_ids(dtype, padding_idx, tokens):
    rng = np.random.default_rng(7)
    weight = randn(rng, (11, 9), dtype)
    ids = rng.integers(0, 11, tokens)
    ids[:3] = 4  # repeated ids add up

    def build(w, i):
        return F.embedding(i, w, padding_idx=padding_idx)

    assert_fused_matches_reference(build, [weight, ids], dtype)


@pytest.mark.parametrize(
    "build",
    [
        lambda x: F.softmax(x, -1),
        lambda x: F.log_softmax(x, -1),
        lambda x: F.gelu(x, approximate="tanh"),
        lambda x: F.gelu(x),
        lambda x: F.layer_norm(x, (5,)),
        lambda x: F.rms_norm(x, (5,)),
    ],
    ids=["softmax", "log_softmax", "gelu_tanh", "gelu", "layer_norm", "rms_norm"],
)
def test_fused_gradients_pass_gradcheck(build):
    """Central differences in float64 through the fused path itself."""
    x = tt.tensor(np.random.default_rng(8).standard_normal((3, 5)), requires_grad=True)
    with tt.cpu_kernels("numba"):
        assert tt.gradcheck(build, [x])


def test_fused_cross_entropy_and_attention_pass_gradcheck():
    rng = np.random.default_rng(9)
    z = tt.tensor(rng.standard_normal((4, 6)), requires_grad=True)
    t = tt.tensor([1, 5, -100, 0])
    q, k, v = (tt.tensor(rng.standard_normal((1, 2, 3, 4)), requires_grad=True) for _ in "qkv")
    with tt.cpu_kernels("numba"):
        assert tt.gradcheck(lambda z: F.cross_entropy(z, t, label_smoothing=0.2), [z])
        sdpa = F.scaled_dot_product_attention
        assert tt.gradcheck(lambda q, k, v: sdpa(q, k, v, is_causal=True), [q, k, v])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_special_values_match_the_reference(dtype, approximate):
    """inf, -inf, NaN, ±0 and the far tails (where exp(-2u) overflows in the tanh form) give what
    the NumPy reference gives: 0 as the limit, NaN for -inf (-inf·0) and NaN."""
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -20.0, -50.0, 20.0, 50.0, -1e30], dtype)
    out = {}
    for mode in ("numpy", "numba"):
        with tt.cpu_kernels(mode):
            out[mode] = F.gelu(tt.tensor(x), approximate=approximate).numpy()
    np.testing.assert_allclose(out["numba"], out["numpy"], rtol=1e-6, atol=1e-30, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(BIG + 3,), (4, BIG // 64, 33)])
def test_pooled_add_and_gradient_sums_are_numpys_bit_for_bit(dtype, shape, monkeypatch):
    """The residual add and autograd's sum of two paths' gradients run on the pool at 2 threads;
    an exactly rounded add, so the results equal NumPy's exactly."""
    from tinytensor.kernels.cpu import add as add_kernel

    calls = []
    original = add_kernel.add
    monkeypatch.setattr(add_kernel, "add", lambda a, b: calls.append(a.shape) or original(a, b))
    rng = np.random.default_rng(11)
    x_np, y_np = randn(rng, shape, dtype), randn(rng, shape, dtype)
    g_np = randn(rng, shape, dtype)
    tt.set_num_threads(2)
    results = {}
    for mode in ("numpy", "numba"):
        x, y = tt.tensor(x_np, requires_grad=True), tt.tensor(y_np, requires_grad=True)
        with tt.cpu_kernels(mode):
            h = x * 2.0  # h reaches the output along two paths: its gradients add up
            z = (h + y) + h * 3.0
            z.backward(tt.tensor(g_np))
        results[mode] = (z.numpy(), x.grad.numpy(), y.grad.numpy())
    assert len(calls) >= 2, "the pooled add did not run (forward add and gradient sum)"
    for fused, reference in zip(results["numba"], results["numpy"]):
        np.testing.assert_array_equal(fused, reference)
    np.testing.assert_array_equal(results["numpy"][0], (x_np * 2 + y_np) + x_np * 2 * 3)
