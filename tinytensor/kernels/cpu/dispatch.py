"""Which implementation computes a CPU op: the fused numba kernels or the NumPy reference.

    with tt.cpu_kernels("numpy"):      # the readable reference, e.g. to compare or debug
        loss = model(x, y).loss

Modes: "auto" (default) takes the fused kernels when numba is installed and the arrays qualify;
"numba" takes them wherever the arrays qualify and raises if numba is missing; "numpy" never
takes them. The process default is "auto", or the environment's TINYTENSOR_CPU_KERNELS.

Arrays qualify when they are all `numpy.ndarray`s (CuPy arrays never reach a CPU kernel) of one
dtype, float32 or float64, and C-contiguous: the kernels index rows directly.

Each kernel is compiled twice from one Python function: a parallel version (`prange` spread over
the thread pool) for arrays of at least `PARALLEL_MIN_ELEMENTS`, and a serial one for small
arrays, where starting the pool costs more than the work (the forward of one op on a 16x16
tensor). Both are cached on disk (numba's `cache=True`), so a machine compiles each once.
"""

from __future__ import annotations

import functools
import importlib
import os
import threading
import types

import numpy as np

from . import threads

MODES = ("auto", "numba", "numpy")
PARALLEL_MIN_ELEMENTS = 1 << 14  # below 16k elements one thread beats waking the pool
# below this many multiply-adds NumPy's @ costs less than any kernel's call (gemm.py); the ops
# test it before anything else, so a small product pays no dispatch (16x16: 16 µs, not 24).
# F.linear with a bias, one thread, MKL's path against NumPy's (µs): 32x16x64 17 vs 13,
# 64x64x64 23 vs 22, 128x64x128 44 vs 45, 128x128x128 60 vs 68: the crossover is near 2^18
MIN_PRODUCT_MULTIPLY_ADDS = 1 << 18
# NOTE: error_model="numpy": a division by zero gives inf/nan as in NumPy instead of raising,
# which also lets the loops vectorize (the Python model's zero check is a branch per division:
# 6x slower serial loops, measured). The fastmath licences: see twin_jit.
JIT_OPTIONS = dict(cache=True, fastmath={"reassoc", "nsz", "contract"}, error_model="numpy")

_env_mode = os.environ.get("TINYTENSOR_CPU_KERNELS", "auto")
_mode = [_env_mode if _env_mode in MODES else "auto"]
threads.pool_products(_mode[-1] != "numpy")


class cpu_kernels:
    """Picks the CPU implementation inside `with tt.cpu_kernels("numpy"):`.

    Args:
        mode: "auto" (default): the fused numba kernels when numba is installed and the arrays
            are C-contiguous float32/float64 NumPy arrays, else the NumPy reference; "numba":
            the same, but a missing numba raises RuntimeError; "numpy": always the reference.
    """

    def __init__(self, mode):
        if mode not in MODES:
            raise ValueError(f"cpu_kernels: mode must be one of {MODES}, got {mode!r}")
        self.mode = mode

    def __enter__(self):
        if self.mode == "numba" and not fused_available():
            raise RuntimeError("cpu_kernels('numba'): numba is not installed (pip install numba)")
        _mode.append(self.mode)
        threads.pool_products(self.mode != "numpy")
        return self

    def __exit__(self, *exc):
        _mode.pop()
        threads.pool_products(_mode[-1] != "numpy")


def current_mode() -> str:
    """The innermost `cpu_kernels` mode in force ("auto" unless set)."""
    return _mode[-1]


@functools.cache
def fused_available() -> bool:
    """True when numba imports (the fused kernels can be compiled here)."""
    try:
        importlib.import_module("numba")
    except ImportError:
        return False
    return True


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def arrays_qualify(arrays, any_layout=False) -> bool:
    """The predicate every fused call passes first: the sequence `arrays` holds NumPy arrays
    (never CuPy) of one float dtype (float32 or float64), C-contiguous (unless `any_layout`: the
    kernel makes its own copies). None entries (absent optional inputs) are skipped."""
    # NOTE: runs before every fused kernel, on 16x16 ops too: plain attribute reads, no calls,
    # and no star-args (they and a keyword cost 0.2 µs of a 2 µs softmax)
    dtype = None
    for a in arrays:
        if a is None:
            continue
        if a.__class__ is not np.ndarray or not (any_layout or a.flags.c_contiguous):
            return False
        if dtype is None:
            dtype = a.dtype
            if dtype not in _FLOATS:
                return False
        elif a.dtype != dtype:
            return False
    return dtype is not None


_modules: dict = {}  # family -> kernel module, once imported (and numba set up)


def kernels_for(family, *arrays, any_layout=False):
    """The kernel module `family` (e.g. "norms") if this call should take the fused path, else
    None. `arrays` are the float arrays the kernel would read or write (C-contiguous unless
    `any_layout`)."""
    if _mode[-1] == "numpy" or not arrays_qualify(arrays, any_layout):
        return None
    module = _modules.get(family)
    return module if module is not None else _load(family)


def kernels_for_array(family, x, weight=None, bias=None):
    """`kernels_for(family, x, weight, bias)` for one C-contiguous array x and optional
    parameter arrays (a norm's weight and bias): the softmax family's and the norms' forward, on
    every attention, loss and norm. NOTE: without the star-args and the loop: 0.6 -> 0.3 µs."""
    if (
        x.__class__ is not np.ndarray
        or x.dtype not in _FLOATS
        or not x.flags.c_contiguous
        or _mode[-1] == "numpy"
        or (weight is not None and not _like(weight, x))
        or (bias is not None and not _like(bias, x))
    ):
        return None
    module = _modules.get(family)
    return module if module is not None else _load(family)


def _like(a, x) -> bool:
    """Whether array `a` may go to a kernel with x: NumPy, x's dtype, C-contiguous."""
    return a.__class__ is np.ndarray and a.dtype == x.dtype and a.flags.c_contiguous


def _load(family):
    """Imports kernel module `family` on its first use (after numba's CPU and thread set-up), or
    None where numba is missing in mode "auto"."""
    if not fused_available():
        if _mode[-1] == "numba":
            raise RuntimeError("cpu_kernels('numba'): numba is not installed (pip install numba)")
        return None
    _prefer_wide_vectors()
    threads.configure_once()
    module = _modules[family] = importlib.import_module(f"{__package__}.{family}")
    return module


# AVX-512 CPUs on which 512-bit instructions lower the clock of the whole core (the reason LLVM
# prefers 256-bit vectors on them): the kernels keep 256-bit vectors there
_DOWNCLOCKING_AVX512 = ("skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "knl", "knm")


@functools.cache
def _prefer_wide_vectors() -> None:
    """Lets LLVM vectorize the kernels' loops with 512-bit registers where the CPU has AVX-512,
    before numba compiles anything (it reads this when it creates its code generator).

    NOTE: LLVM's x86 tuning prefers 256-bit vectors even on AVX-512 CPUs (Skylake-X lowered its
    clock for wide instructions), so the exp, GELU and softmax loops used half the register.
    On this project's 2-core Emerald Rapids VM, one thread: GELU forward (1024x1024) 2.0 ->
    1.1-1.4 ms, softmax 0.53 -> 0.27-0.36 ms, causal attention forward + backward (8x8x128x32)
    9.8 -> 6.7 ms, cross-entropy 1.4 -> 0.9 ms. Respects NUMBA_CPU_NAME / NUMBA_CPU_FEATURES when
    they are set, and does nothing once numba compiled code in this process (too late).
    """
    if os.environ.get("NUMBA_CPU_NAME") or os.environ.get("NUMBA_CPU_FEATURES"):
        return
    import llvmlite.binding as llvm
    import numba
    from numba.core.registry import cpu_target

    if "_toplevel_target_context" in cpu_target.__dict__:  # numba's codegen exists already
        return
    try:
        features = llvm.get_host_cpu_features()
    except RuntimeError:  # llvmlite cannot tell on some hosts: keep numba's defaults
        return
    if not features.get("avx512f") or llvm.get_host_cpu_name() in _DOWNCLOCKING_AVX512:
        return
    numba.config.CPU_FEATURES = features.flatten() + ",-prefer-256-bit"


def parallel_for(size: int) -> bool:
    """Whether an array of `size` elements goes to the parallel twin, which the pool runs on as
    many threads as it has now, one included (and the pool's size follows the machine's load:
    `threads.follow_load`, asked here, where the pool is about to be used).

    NOTE: the size decides, not the thread count, so that the thread count cannot change a
    result. The twins are compiled apart, and fastmath lets LLVM order and fuse each one's
    arithmetic its own way: the tanh GELU's backward and RMSNorm's weight gradient rounded
    differently in the serial twin than in the parallel one, which rounds alike at any thread
    count (its loop body is one function, however the loop is split). One thread costs the
    parallel twin little: OpenMP runs a team of one on the calling thread (GELU's backward on
    16k floats 3.3 µs against the serial twin's 2.7, level on 1M). The serial twin runs, and a
    result may differ in its last bits, only where the pool cannot: off the main thread (numba's
    workqueue pool, the fallback where OpenMP does not load, aborts the process if two threads
    enter it), in a forked child (OpenMP's pool does not survive a fork), and at one thread on
    the workqueue layer (it would hand the work to a worker thread and wait for it: on a busy
    machine, a scheduler time slice).
    """
    if size < PARALLEL_MIN_ELEMENTS:
        return False
    threads.follow_load()
    return (
        threading.current_thread() is threading.main_thread()
        and not threads.in_forked_child()
        and (threads.get_num_threads() > 1 or threads.team_of_one_runs_inline())
    )


def pooled_add(a, b):
    """a + b over the kernels' pool (kernels/cpu/add.py) when both are large enough for threads
    and qualify (one shape, one float dtype, C-contiguous NumPy), else None: the caller adds."""
    # (an exactly rounded add: at one thread NumPy's add gives the same bits, and is faster)
    if a.size < PARALLEL_MIN_ELEMENTS or a.shape != b.shape or not parallel_for(a.size):
        return None
    if threads.get_num_threads() == 1:
        return None
    fused = kernels_for("add", a, b)
    return fused.add(a, b) if fused else None


def twin_jit(py_func):
    """Compiles `py_func` twice: `.parallel` (prange over the pool) and `.serial` (one thread, no
    pool start-up), both cached on disk, float32 and float64 specialized on first call.

    NOTE: of fastmath's licences three are on. Reassociation (with ignoring the sign of zero)
    lets LLVM vectorize the row sums (8-16 partial sums instead of one chain, 5-10x faster), the
    way NumPy's pairwise sum also splits them. Contraction fuses a·b + c into one multiply-add,
    rounded once instead of twice: the polynomials of exp and Φ are chains of them (one core,
    best of 21 runs alternating with the code before: exact GELU forward + backward on 1M
    floats 3.6 -> 2.1 ms, tanh GELU 2.1 -> 1.8, cross-entropy on 1024x256 0.77 -> 0.63, softmax
    0.51 -> 0.43; Φ's error against float64 unchanged). The order and the fusions are fixed at
    compile time, so a result is the same run to run; NaN and inf propagate as in NumPy (no
    'nnan'/'ninf'), and exp/tanh stay accurate (no 'afn'). The serial twin is a renamed copy of
    the function, because numba's on-disk cache is keyed by the function's name (and not by
    these options: a cache compiled under others is found stale only when its source changes).
    """
    import numba

    parallel = numba.njit(**JIT_OPTIONS, parallel=True)(py_func)
    serial_func = types.FunctionType(
        py_func.__code__, py_func.__globals__, py_func.__name__ + "_serial", py_func.__defaults__
    )
    serial_func.__qualname__ = py_func.__qualname__ + "_serial"
    serial_func.__module__ = py_func.__module__
    serial = numba.njit(**JIT_OPTIONS, parallel=False)(serial_func)
    return types.SimpleNamespace(parallel=parallel, serial=serial, name=py_func.__name__)


def pick(kernel, size: int):
    """The parallel or the serial twin of `kernel` for arrays of `size` elements."""
    if size < PARALLEL_MIN_ELEMENTS:  # parallel_for's first test, without its call
        return kernel.serial
    return kernel.parallel if parallel_for(size) else kernel.serial
