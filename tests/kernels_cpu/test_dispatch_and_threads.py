"""The switch, the predicate that keeps non-NumPy arrays (CuPy's) away from the CPU kernels,
reproducibility at a fixed thread count, and the thread-count settings."""

import os

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.kernels.cpu import dispatch, threads

F = tt.nn.functional


# set_num_threads fixes the count for the process: each test gives the next one the policy back
pytestmark = pytest.mark.usefixtures("restored_thread_policy")


def test_the_switch_forces_either_path():
    x = np.ones((4, 8), np.float32)
    with tt.cpu_kernels("numpy"):
        assert dispatch.kernels_for("softmax", x) is None
    with tt.cpu_kernels("numba"):
        assert dispatch.kernels_for("softmax", x).__name__.endswith("cpu.softmax")
    with tt.cpu_kernels("numba"), tt.cpu_kernels("numpy"):  # the innermost wins
        assert dispatch.kernels_for("softmax", x) is None


def test_a_bad_mode_names_the_function_and_the_value():
    with pytest.raises(ValueError, match=r"cpu_kernels: mode must be one of .*'fast'"):
        tt.cpu_kernels("fast")


def test_forcing_numba_without_numba_raises(monkeypatch):
    monkeypatch.setattr(dispatch, "fused_available", lambda: False)
    monkeypatch.setattr(dispatch, "_modules", {})
    with pytest.raises(RuntimeError, match="numba is not installed"):
        with tt.cpu_kernels("numba"):
            pass
    with tt.cpu_kernels("auto"):  # auto falls back quietly
        assert dispatch.kernels_for("softmax", np.ones(3, np.float32)) is None


class FakeDeviceArray:
    """Stands in for a cupy.ndarray: array-like, C-contiguous float32, but not numpy's."""

    dtype = np.dtype(np.float32)
    flags = np.ones(1).flags
    shape = (4,)


class NdarraySubclass(np.ndarray):
    pass


@pytest.mark.parametrize(
    "arrays, expected",
    [
        ((np.ones((3, 4), np.float32),), True),
        ((np.ones(3), np.ones(3)), True),
        ((np.ones(3, np.float32), None), True),  # absent optional inputs are skipped
        ((np.ones(3, np.float32), np.ones(3)), False),  # mixed dtypes
        ((np.ones(3, np.float16),), False),
        ((np.ones(3, np.int64),), False),
        ((np.ones((4, 4), np.float32).T[:, :3],), False),  # not C-contiguous
        ((FakeDeviceArray(),), False),
        ((np.ones(3, np.float32).view(NdarraySubclass),), False),
        ((None,), False),
    ],
)
def test_only_c_contiguous_float_numpy_arrays_qualify(arrays, expected):
    assert dispatch.arrays_qualify(arrays) is expected


def test_cupy_arrays_never_reach_a_cpu_kernel():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the stand-in test covers it")
    try:
        a = cupy.ones((3, 4), dtype=cupy.float32)
    except Exception as e:  # CuPy installed without a usable GPU
        pytest.skip(f"CuPy cannot allocate here ({type(e).__name__}): the stand-in test covers it")
    with tt.cpu_kernels("numba"):
        assert dispatch.kernels_for("softmax", a) is None


@pytest.mark.parametrize("n_threads", [1, 2])
def test_same_result_run_to_run_at_a_fixed_thread_count(n_threads):
    """Reductions over rows (weight gradients, embedding scatter-add) add in a fixed order."""
    tt.set_num_threads(n_threads)
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((600, 64)).astype(np.float32)
    ids0 = rng.integers(0, 7, (300, 2))
    w0 = rng.standard_normal((7, 64)).astype(np.float32)
    results = []
    for _ in range(3):
        x = tt.tensor(x0, requires_grad=True)
        w = tt.tensor(np.ones(64, np.float32), requires_grad=True)
        emb = tt.tensor(w0, requires_grad=True)
        with tt.cpu_kernels("numba"):
            h = F.layer_norm(x, (64,), w) + F.embedding(tt.tensor(ids0), emb).reshape(600, 64)
            loss = F.cross_entropy(F.gelu(h, approximate="tanh"), tt.tensor(ids0.ravel()))
            loss.backward()
        results.append([loss.numpy(), x.grad.numpy(), w.grad.numpy(), emb.grad.numpy()])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_set_num_threads_checks_its_argument():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="set_num_threads: n must be a positive int"):
            tt.set_num_threads(bad)


def test_set_num_threads_sets_the_kernels_and_openblas():
    threadpoolctl = pytest.importorskip("threadpoolctl", reason="threadpoolctl is not installed")
    import numba

    tt.set_num_threads(1)
    with tt.cpu_kernels("numba"):
        F.softmax(tt.randn(3, 4), -1)  # starts the pool if it has not started
    assert tt.get_num_threads() == 1 and numba.get_num_threads() == 1
    blas = threadpoolctl.threadpool_info()
    assert all(lib["num_threads"] == 1 for lib in blas if lib["user_api"] == "blas")


def _start_the_pool():
    with tt.cpu_kernels("numba"):
        F.softmax(tt.randn(3, 4), -1)  # starts the pool if it has not started


def pool_threads():
    import numba

    count = tt.get_num_threads()
    # the pool itself, not only the record (numba's pool has at most the cores it started on)
    assert numba.get_num_threads() == min(count, numba.config.NUMBA_NUM_THREADS)
    return count


@pytest.mark.parametrize("user_api", [None, "blas"])
def test_threadpoolctl_limits_the_pool_and_gives_it_back(user_api):
    """A harness's `threadpool_limits(1)` (all pools, or BLAS only) caps the pool in its block;
    after it the pool has the count it had."""
    from threadpoolctl import threadpool_info, threadpool_limits

    _start_the_pool()
    tt.set_num_threads(2)
    ours = [lib for lib in threadpool_info() if lib["internal_api"] == "tinytensor"]
    assert len(ours) == 1 and ours[0]["user_api"] == "blas" and ours[0]["num_threads"] == 2
    with threadpool_limits(1, user_api=user_api):
        assert pool_threads() == 1
        x = tt.randn(1024, 128)
        F.linear(x, tt.randn(256, 128))  # a product that splits runs its blocks in turn
        assert pool_threads() == 1
    assert pool_threads() == 2
    tt.set_num_threads(1)
    with threadpool_limits(4):  # a cap above the count changes nothing
        assert pool_threads() == 1
    assert pool_threads() == 1


def test_a_lifted_threadpoolctl_limit_leaves_the_pool_following_the_load(monkeypatch):
    from threadpoolctl import threadpool_limits

    _start_the_pool()
    monkeypatch.setitem(threads._state, "fixed", None)  # as without set_num_threads or env
    monkeypatch.setattr(threads, "cores_allowed", lambda: 2)
    monkeypatch.setattr(threads, "free_cores", lambda: 2.0)
    with threadpool_limits(1):
        assert threads._state["limit"] == 1
        dispatch.parallel_for(1 << 20)  # asks the load: 2 cores free, but capped at 1
        assert pool_threads() == 1
    assert threads._state["limit"] is None and threads._state["fixed"] is None
    dispatch.parallel_for(1 << 20)
    assert pool_threads() == 2


@pytest.mark.parametrize("variable", ["OMP_NUM_THREADS", "NUMBA_NUM_THREADS"])
def test_the_environment_fixes_the_count(variable):
    """OMP_NUM_THREADS=1 python train.py: the pool and OpenBLAS run one thread."""
    import subprocess
    import sys

    program = (
        "import numba, tinytensor as tt\n"
        "from threadpoolctl import threadpool_info\n"
        "tt.nn.functional.softmax(tt.randn(300, 300), -1)\n"
        "blas = {lib['num_threads'] for lib in threadpool_info() if lib['user_api'] == 'blas'}\n"
        "print(tt.get_num_threads(), numba.get_num_threads(), sorted(blas))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env.update({variable: "1", "TINYTENSOR_CPU_KERNELS": "auto"})  # the pool, whatever CI's pass
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout  # fmt: skip
    assert out.split() == ["1", "1", "[1]"], out


def test_free_cores_measures_idle_plus_own_time():
    threads.free_cores()  # the first call only records a sample
    sum(i * i for i in range(200_000))  # some CPU time of our own
    free = threads.free_cores()
    if free is None:
        pytest.skip("no /proc/stat on this system: the count stays at the cores allowed")
    assert 0.0 <= free <= (threads.os.cpu_count() or 1) + 1e-9


def test_kernels_from_several_python_threads_at_once():
    """numba's workqueue pool aborts the process if two threads enter it: off the main thread
    the serial twin runs, so concurrent calls are safe and give the main thread's results."""
    from concurrent.futures import ThreadPoolExecutor

    tt.set_num_threads(2)
    x = np.random.default_rng(0).standard_normal((400, 128)).astype(np.float32)
    with tt.cpu_kernels("numba"):
        expected = F.layer_norm(tt.tensor(x), (128,)).numpy()

        def work(_):
            with tt.cpu_kernels("numba"):
                return F.layer_norm(tt.tensor(x), (128,)).numpy()

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(work, range(8)))
    for r in results:
        np.testing.assert_allclose(r, expected, rtol=1e-6, atol=1e-6)


_SHOW_FEATURES = (
    "import tinytensor as tt, numba; tt.nn.functional.gelu(tt.randn(8, 8)); "
    "print(numba.config.CPU_FEATURES or '')"
)


def _features_after_a_kernel(env_extra, prelude=""):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CPU_")}
    env.update({"TINYTENSOR_CPU_KERNELS": "auto", **env_extra})  # a kernel compiles
    out = subprocess.run(
        [sys.executable, "-c", prelude + _SHOW_FEATURES], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_wide_vectors_where_the_cpu_has_avx512():
    """LLVM's 256-bit preference is lifted on AVX-512 CPUs that keep their clock (the kernels'
    loops then fill 512-bit registers), and only there."""
    import llvmlite.binding as llvm

    host = llvm.get_host_cpu_features()
    wide = bool(host.get("avx512f")) and llvm.get_host_cpu_name() not in (
        "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "knl", "knm",
    )  # fmt: skip
    features = _features_after_a_kernel({})
    if wide:
        assert features == host.flatten() + ",-prefer-256-bit"
    else:
        assert features == ""


def test_wide_vectors_leave_the_users_numba_cpu_settings_alone():
    assert _features_after_a_kernel({"NUMBA_CPU_FEATURES": "+sse2"}) == "+sse2"


def test_wide_vectors_keep_numbas_defaults_where_llvm_cannot_read_the_cpu():
    unreadable = (
        "import llvmlite.binding as llvm\n"
        "def unreadable(): raise RuntimeError('cannot read the host CPU features')\n"
        "llvm.get_host_cpu_features = unreadable\n"
    )
    assert _features_after_a_kernel({}, prelude=unreadable) == ""
