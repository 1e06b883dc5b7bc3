"""Matrix products on the kernels' thread pool (kernels/cpu/gemm.py): the same products as NumPy's,
results that do not depend on the thread count, OpenBLAS at one thread while the pool does the
splitting, and a forked child that stays off the pool."""

import multiprocessing

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.kernels.cpu import dispatch, mkl_blas, threads

# gemm.py is numba code: without numba, skip (saying why) rather than fail to collect
gemm = pytest.importorskip("tinytensor.kernels.cpu.gemm", reason="numba is not installed")

F = tt.nn.functional
DTYPES = (np.float32, np.float64)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


@pytest.fixture(autouse=True)
def restore_thread_policy():
    dispatch.kernels_for("gemm", np.ones(1))  # sets the pool up, as the first product would
    saved = dict(threads._state)
    with tt.cpu_kernels("numba"):  # OpenBLAS at one thread, as when the ops call this module
        yield
    threads._state.update(saved)
    threads._state["current"] = None
    threads._apply(saved["fixed"] or threads.cores_allowed())


@pytest.fixture(params=["openblas", "mkl"])
def blas(request, monkeypatch):
    """Each test runs with the blocks calling OpenBLAS (through numba's np.dot) and MKL."""
    if request.param == "openblas":
        monkeypatch.setattr(gemm, "gemm_functions", lambda: {})
    elif not mkl_blas.gemm_functions():
        pytest.skip(f"{mkl_blas.why_not_in_use()}: OpenBLAS case only")
    return request.param


def randn(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


# (rows, inner, cols): GPT sizes, odd sizes, and a tall one split into many blocks
SHAPES = [(1024, 128, 512), (1024, 512, 128), (1000, 100, 37), (4099, 64, 33)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_row_split_product_does_not_depend_on_the_thread_count(dtype, shape, blas):
    """The same blocks at every thread count, so the same bits (designed in: the shapes alone
    cut the product); NumPy's product only within rounding, since no BLAS promises that a
    block of rows rounds as the whole product does on every CPU."""
    m, k, n = shape
    rng = np.random.default_rng(0)
    a, w, bias = randn(rng, (m, k), dtype), randn(rng, (n, k), dtype), randn(rng, n, dtype)
    w_c = np.ascontiguousarray(w.T)
    exact = a.astype(np.float64) @ w.T.astype(np.float64)
    scale = np.sqrt(k)  # the sums grow like √k
    tol = {**TOL[dtype], "atol": TOL[dtype]["atol"] * scale}
    results = {}
    for n_threads in (1, 2, 3):
        tt.set_num_threads(n_threads)
        products = [gemm.product(a, w.T), gemm.product(a, w_c), gemm.product(a, w.T, bias)]
        results[n_threads] = products
    for result in results[1][:2]:
        np.testing.assert_allclose(result, exact, **tol)
    np.testing.assert_allclose(results[1][2], exact + bias, **tol)
    for n_threads in (2, 3):
        for result, reference in zip(results[n_threads], results[1]):
            np.testing.assert_array_equal(result, reference, err_msg=f"{n_threads} threads")


def test_the_blocks_depend_on_the_rows_alone():
    """Powers of two (even shares for 2 and 4 threads), 256 rows or more where the rows allow."""
    assert [gemm.row_blocks(r) for r in (256, 511, 1023, 1024, 2048, 4099, 1 << 20)] == [
        2, 2, 2, 4, 8, 16, gemm.MAX_ROW_BLOCKS,
    ]  # fmt: skip
    for n_threads in (1, 2):
        tt.set_num_threads(n_threads)
        assert gemm.splits(1024, 128, 128)
        assert not gemm.splits(2 * gemm.MIN_BLOCK_ROWS - 1, 4096, 4096)  # too few rows
        assert not gemm.splits(1024, 8, 8)  # too little work


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES + [(5, 3, 2)])
def test_transposed_product_and_column_sums(dtype, shape, blas):
    m, p, q = shape
    rng = np.random.default_rng(1)
    a, b = randn(rng, (m, p), dtype), randn(rng, (m, q), dtype)
    product, sums = gemm.transposed_product(a, b, want_column_sums=True)
    assert product.dtype == sums.dtype == dtype
    exact = a.astype(np.float64).T @ b.astype(np.float64)
    scale = np.sqrt(m)  # the sums grow like √m
    np.testing.assert_allclose(product, exact, **{**TOL[dtype], "atol": TOL[dtype]["atol"] * scale})
    np.testing.assert_allclose(sums, a.astype(np.float64).sum(axis=0), **TOL[dtype])
    assert gemm.transposed_product(a, b)[1] is None


@pytest.mark.parametrize("p, q", [(96, 200), (200, 96)])  # blocks of out's columns, rows
def test_transposed_product_does_not_depend_on_the_thread_count(blas, p, q):
    rng = np.random.default_rng(2)
    a, b = randn(rng, (1500, p), np.float32), randn(rng, (1500, q), np.float32)
    results = []
    for n in (1, 2, 3, 2):
        tt.set_num_threads(n)
        results.append(gemm.transposed_product(a, b, want_column_sums=True))
    for product, sums in results[1:]:
        np.testing.assert_array_equal(product, results[0][0])
        np.testing.assert_array_equal(sums, results[0][1])


@pytest.mark.parametrize("n_threads", [1, 2])
def test_which_products_come_here_does_not_depend_on_the_thread_count(blas, n_threads):
    """Products that split come here at every thread count (one thread runs their blocks in
    turn); below that only MKL takes them; the smallest stay on NumPy's @."""
    tt.set_num_threads(n_threads)
    f32 = np.dtype(np.float32)
    assert gemm.takes(1024, 128, 128, f32)
    assert gemm.takes(200, 64, 64, f32) == (blas == "mkl")  # does not split: MKL's one call
    assert not gemm.takes(8, 8, 8, f32)  # tiny: NumPy's @ costs less


def test_fits_takes_c_or_fortran_order_of_the_same_dtype():
    w = np.ones((8, 4), np.float32)
    assert gemm.fits(w, np.float32) and gemm.fits(w.T, np.float32)
    assert not gemm.fits(w[:, ::2], np.float32)  # neither order
    assert not gemm.fits(w, np.float64)
    assert not gemm.fits(w[None], np.float32)


def linear_and_matmul(x, w, b, m):
    return (F.linear(x, w, b) @ m).tanh()


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_and_matmul_on_the_pool_match_the_numpy_reference(dtype, blas):
    rng = np.random.default_rng(3)
    arrays = [randn(rng, (4, 300, 64), dtype), randn(rng, (96, 64), dtype) * 0.2,
              randn(rng, 96, dtype), randn(rng, (96, 80), dtype) * 0.2]  # fmt: skip
    calls = []
    original = gemm.product

    def counting(*args):
        calls.append(1)
        return original(*args)

    def run(mode):
        with tt.cpu_kernels(mode):
            leaves = [tt.tensor(a, requires_grad=True) for a in arrays]
            linear_and_matmul(*leaves).sum().backward()
            return [leaves[0].grad] + [t.grad for t in leaves[1:]]

    tt.set_num_threads(2)
    gemm.product = counting
    try:
        reference = run("numpy")
        assert not calls  # the reference never takes the pool
        fused = run("numba")
    finally:
        gemm.product = original
    assert len(calls) >= 4  # forward and the input gradients of both products
    for name, a, b in zip(("x", "weight", "bias", "m"), fused, reference):
        scale = np.abs(b.numpy()).max()
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=TOL[dtype]["rtol"],
                                   atol=TOL[dtype]["rtol"] * scale, err_msg=name)  # fmt: skip


def blas_thread_counts():
    """OpenBLAS's thread counts (NumPy's and SciPy's); MKL, where loaded, runs sequentially."""
    threadpoolctl = pytest.importorskip("threadpoolctl", reason="threadpoolctl is not installed")
    libraries = threadpoolctl.threadpool_info()
    return {lib["num_threads"] for lib in libraries if lib["internal_api"] == "openblas"}


def test_openblas_runs_one_thread_while_the_pool_splits_the_products():
    tt.set_num_threads(2)
    with tt.cpu_kernels("numba"):
        F.softmax(tt.randn(3, 4), -1)  # starts the pool if it has not started
        assert blas_thread_counts() == {1}
        with tt.cpu_kernels("numpy"):  # the reference: NumPy with OpenBLAS's own threads
            assert blas_thread_counts() == {2}
        assert blas_thread_counts() == {1}


def _forked_linear(queue, x, w):
    queue.put((threads.in_forked_child(), dispatch.parallel_for(x.shape[0] * w.shape[0]),
               F.linear(tt.tensor(x), tt.tensor(w)).numpy()))  # fmt: skip


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform"
)
def test_a_forked_child_runs_its_products_off_the_pool():
    """OpenMP's pool does not survive a fork: a child (a DataLoader worker) of a process that
    used it computes on its own thread, and gets the same numbers."""
    tt.set_num_threads(2)
    rng = np.random.default_rng(4)
    x, w = randn(rng, (1024, 128), np.float32), randn(rng, (256, 128), np.float32)
    expected = F.linear(tt.tensor(x), tt.tensor(w)).numpy()  # on the pool, in this process
    assert gemm.splits(1024, 128, 256) and dispatch.parallel_for(1024 * 256)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_forked_linear, args=(queue, x, w))
    child.start()
    forked, on_the_pool, result = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert forked and not on_the_pool
    np.testing.assert_array_equal(result, expected)


@pytest.fixture
def fresh_blas_choice():
    mkl_blas.gemm_functions.cache_clear()  # the choice is made once per process: redo it here
    yield
    mkl_blas.gemm_functions.cache_clear()


def test_mkl_is_used_exactly_when_it_is_installed(fresh_blas_choice, monkeypatch):
    import importlib.metadata

    monkeypatch.delenv("TINYTENSOR_BLAS", raising=False)
    try:
        installed = importlib.metadata.version("mkl") is not None
    except importlib.metadata.PackageNotFoundError:
        installed = False
    assert mkl_blas.name() == ("mkl" if installed else "openblas")
    if installed:
        assert set(mkl_blas.gemm_functions()) == {np.dtype(np.float32), np.dtype(np.float64)}


def test_the_blas_switch_forces_openblas_and_checks_its_value(fresh_blas_choice, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_BLAS", "openblas")
    assert mkl_blas.gemm_functions() == {} and mkl_blas.name() == "openblas"
    mkl_blas.gemm_functions.cache_clear()
    monkeypatch.setenv("TINYTENSOR_BLAS", "MKL!")
    with pytest.raises(
        ValueError, match="TINYTENSOR_BLAS must be 'auto', 'mkl' or 'openblas', got 'MKL!'"
    ):
        mkl_blas.gemm_functions()


def test_requiring_a_missing_mkl_says_how_to_install_it(fresh_blas_choice, monkeypatch):
    monkeypatch.setenv("TINYTENSOR_BLAS", "mkl")
    monkeypatch.setattr(mkl_blas, "_library_path", lambda: None)
    with pytest.raises(
        RuntimeError, match=r"TINYTENSOR_BLAS=mkl: .*pip install 'tinytensor\[mkl\]'"
    ):
        mkl_blas.gemm_functions()
