"""One thread pool for the fused kernels and the matrix products, following the cores that are free.

One pool: while the fused kernels are on, OpenBLAS runs one thread and the products worth
threads are split over the kernels' pool (gemm.py says why and what it measured). numba runs its
OpenMP layer where it loads (threads spin briefly after a kernel, so the next kernel or product
starts in ~5 µs instead of the 50-140 µs a sleeping worker takes to wake), else "workqueue".
The spin is bounded (GOMP_SPINCOUNT, SPIN_COUNT unless the environment sets it), so an idle pool
gives its cores back within about a millisecond. With `tt.cpu_kernels("numpy")` OpenBLAS gets
the thread count back, and the reference runs as plain NumPy does.

What makes threads slow on a busy machine is waiting: every kernel and every product ends at a
barrier, and a thread that shares its core with another process is descheduled for a whole time
slice (milliseconds) while the others wait. A 2-core machine with one core busy ran the GPT step
3-10x slower with two threads than with one. So by default the count follows the load:

- every `PROBE_SECONDS` the cores this process could use are estimated from /proc/stat: the idle
  cores plus the cores this process itself used (its own threads' time counts as available);
- the count is that many whole cores (at least 1, at most the cores it may run on).

`set_num_threads(n)` fixes the count instead (PyTorch's `torch.set_num_threads`); so does the
environment's NUMBA_NUM_THREADS / OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (in that order).
`threadpoolctl.threadpool_limits(n)` caps it while its block runs, as it caps the BLAS libraries
(the pool registers itself with threadpoolctl as user_api "blas", internal_api "tinytensor": it
runs the BLAS products while the fused kernels are on). threadpoolctl finds a pool by its shared
library, numba's threading layer, which loads when the pool starts (the first fused kernel or
pooled product); a limit set before that does not reach the pool.
A process forked from one that used the pool (a DataLoader worker) runs every kernel on its own
thread: OpenMP's pool does not survive a fork.
"""

from __future__ import annotations

import os
import time

PROBE_SECONDS = 0.5
SPIN_COUNT = "30000"  # GOMP_SPINCOUNT: idle OpenMP threads spin ~1 ms, then sleep
_state = {
    "configured": False,
    "fixed": None,
    "current": None,
    "limit": None,  # threadpoolctl's cap on the count (`limit_threads`)
    "next_probe": 0.0,
    "last": None,
    "pooled_products": True,  # OpenBLAS at one thread, products split over the pool
    "forked": False,
    "layer": None,  # numba's threading layer, once the pool started
}


def cores_allowed() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity call
        return os.cpu_count() or 1


def _fixed_by_environment():
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


def configure_once() -> None:
    """Before the first fused kernel: numba's threading layer and the first thread count."""
    if _state["configured"]:
        return
    _state["configured"] = True
    import numba
    import scipy.linalg.cython_blas  # noqa: F401  (loads the BLAS numba calls, to set its threads)

    if "NUMBA_THREADING_LAYER" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)  # read when OpenMP loads
        numba.config.THREADING_LAYER = "default"
        numba.config.THREADING_LAYER_PRIORITY = ["omp", "workqueue", "tbb"]
    if _state["fixed"] is None:
        _state["fixed"] = _fixed_by_environment()
    # NOTE: a set_num_threads(n) before this point recorded n but could not reach numba's pool
    # (numba was not set up yet): apply it now even though n is already "current"
    _state["current"] = None
    _apply(_state["fixed"] or cores_allowed())  # (numba.set_num_threads starts the pool)
    _state["layer"] = numba.threading_layer()
    _register_with_threadpoolctl()


def follow_load() -> None:
    """Re-estimates the free cores at most every PROBE_SECONDS (cheap otherwise: one clock
    read); called where a kernel or a product is about to use the pool (dispatch.parallel_for),
    once the pool is set up (configure_once)."""
    now = time.monotonic()
    if _state["fixed"] is not None or now < _state["next_probe"] or not _state["configured"]:
        return
    _state["next_probe"] = now + PROBE_SECONDS
    free = free_cores()
    if free is not None:
        _apply(max(1, min(cores_allowed(), int(free + 0.15))))


def free_cores():
    """Cores available to this process since the previous call: idle + used by this process
    (None on the first call, or without /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    t = os.times()
    hz = os.sysconf("SC_CLK_TCK")
    sample = (sum(ticks), ticks[3] + ticks[4], (t.user + t.system) * hz)
    last, _state["last"] = _state["last"], sample
    if last is None:
        return None
    total, idle, own = (a - b for a, b in zip(sample, last))
    if total <= 0:
        return None
    cores = os.cpu_count() or 1  # /proc/stat counts every core of the machine
    # NOTE: /proc/stat and os.times() tick separately (10 ms each), so over a short interval
    # idle + own can exceed the total by a tick: the estimate is capped at the cores there are
    return min(float(cores), (idle + own) / total * cores)


def _apply(n: int) -> None:
    """Uses n threads from now on, or the limit where that is lower."""
    if _state["limit"] is not None:
        n = min(n, _state["limit"])
    if n == _state["current"]:
        return
    _state["current"] = n
    if _state["configured"]:
        import numba

        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    _set_blas_threads(1 if _state["pooled_products"] and _state["configured"] else n)


def pool_products(on: bool) -> None:
    """Whether the matrix products run on the kernels' pool (OpenBLAS at one thread) or on
    OpenBLAS's own threads: the fused kernels' mode (dispatch.cpu_kernels) switches it."""
    if on == _state["pooled_products"]:
        return
    _state["pooled_products"] = on
    if _state["configured"] and _state["current"] is not None:
        _set_blas_threads(1 if on else _state["current"])


def team_of_one_runs_inline() -> bool:
    """Whether the pool at one thread runs a parallel loop on the calling thread (OpenMP, TBB),
    rather than handing it to a worker and waiting (numba's workqueue layer)."""
    return _state["layer"] not in ("workqueue", None)


def in_forked_child() -> bool:
    """True in a process forked after this module loaded: its kernels stay on one thread."""
    return _state["forked"]


def _after_fork_in_child():
    _state["forked"] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def set_num_threads(n: int) -> None:
    """Uses `n` threads for the fused kernels and OpenBLAS's matrix products from now on,
    instead of following the load (PyTorch's `torch.set_num_threads`)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: n must be a positive int, got {n!r}")
    _state["fixed"] = n
    _apply(n)


def limit_threads(n: int) -> None:
    """Caps the count at n (threadpoolctl's `threadpool_limits`); a cap at or above the count
    the pool would use anyway lifts it, so that threadpoolctl's restore of the value it read
    (`thread_limit`) leaves the pool as it was, following the load if it was."""
    uncapped = _state["fixed"] or cores_allowed()
    _state["limit"] = None if n >= uncapped else max(1, int(n))
    _state["current"] = None  # apply even where the capped count is the same
    _state["next_probe"] = 0.0  # following the load: the next kernel measures it again
    _apply(uncapped)


def thread_limit() -> int:
    """The cap threadpoolctl sees: the limit, else the most threads the pool would use."""
    return _state["limit"] or _state["fixed"] or cores_allowed()


def get_num_threads() -> int:
    """The thread count in use now (fixed, or the latest that followed the load)."""
    if _state["current"] is not None:
        return _state["current"]
    return _state["fixed"] or _fixed_by_environment() or cores_allowed()


def _register_with_threadpoolctl() -> None:
    """Makes the pool one of the thread pools threadpoolctl lists and limits (once numba's
    threading layer, the library it finds the pool by, is loaded: configure_once)."""
    try:
        import threadpoolctl
    except ImportError:
        return
    if any(c.internal_api == "tinytensor" for c in threadpoolctl._ALL_CONTROLLERS):
        return  # registered already (register() has no "is registered")

    class TinytensorPool(threadpoolctl.LibController):
        """tinytensor's thread pool, found by numba's threading-layer library."""

        user_api = "blas"  # while the fused kernels are on, the pool runs the BLAS products
        internal_api = "tinytensor"
        filename_prefixes = ("omppool", "workqueue", "tbbpool")

        def get_num_threads(self):
            return thread_limit()

        def set_num_threads(self, num_threads):
            limit_threads(num_threads)

        def get_version(self):
            from importlib.metadata import PackageNotFoundError, version

            try:
                return version("tinytensor")
            except PackageNotFoundError:
                return None

    threadpoolctl.register(TinytensorPool)


def _set_blas_threads(n: int) -> None:
    # NOTE: a new controller each time (a scan of the loaded libraries, about a millisecond; the
    # count changes rarely): a BLAS loaded after the first call, such as SciPy's OpenBLAS that
    # importing numba brings in, must get the count too
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # without threadpoolctl OpenBLAS keeps OPENBLAS_NUM_THREADS
        return
    for lib in ThreadpoolController().select(user_api="blas").lib_controllers:
        if lib.internal_api != "tinytensor":  # the pool itself (_register_with_threadpoolctl)
            lib.set_num_threads(n)
