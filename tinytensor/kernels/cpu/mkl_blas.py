"""Intel MKL's matrix product (cblas_sgemm / cblas_dgemm), when the `mkl` wheel is installed.

The products the kernels' pool splits (gemm.py) call it for each block instead of OpenBLAS:
on the GPT step's shapes its kernels were 14-23% faster than OpenBLAS's (2-core AVX-512 Xeon,
the same blocks on 1 and 2 threads, alternating runs), and it is what PyTorch uses. MKL runs
its sequential layer: the pool does the threading, so MKL starts no threads of its own.

    pip install 'tinytensor[mkl]'      # optional; without it the blocks call OpenBLAS
    TINYTENSOR_BLAS=openblas           # ignores an installed MKL (to compare the two)
    TINYTENSOR_BLAS=mkl                # requires it (an error if it is missing)
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os

import numpy as np

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # CBLAS enum values
_SEQUENTIAL = 1  # MKL_THREADING_SEQUENTIAL


def _library_path():
    """libmkl_rt from the installed `mkl` distribution, or None."""
    try:
        files = importlib.metadata.files("mkl") or ()
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if "mkl_rt" in f.name and (".so" in f.name or f.name.endswith((".dylib", ".dll"))):
            return str(f.locate())
    return None


@functools.cache
def gemm_functions():
    """{dtype: cblas_?gemm as a ctypes function numba can call}, or {} without MKL.

    Pointers are passed as integers (`array.ctypes.data` inside numba), which the C calling
    convention passes exactly as pointers.
    """
    choice = os.environ.get("TINYTENSOR_BLAS", "auto")
    if choice not in ("auto", "mkl", "openblas"):
        raise ValueError(f"TINYTENSOR_BLAS must be 'auto', 'mkl' or 'openblas', got {choice!r}")
    if choice == "openblas":
        return {}
    path = _library_path()
    try:
        if path is None:
            raise OSError("the mkl package is not installed (pip install 'tinytensor[mkl]')")
        lib = ctypes.CDLL(path)
        lib.MKL_Set_Threading_Layer.argtypes = [ctypes.c_int]
        lib.MKL_Set_Threading_Layer(_SEQUENTIAL)  # before any other MKL call
    except (OSError, AttributeError) as e:  # missing or broken: OpenBLAS does the work
        if choice == "mkl":
            raise RuntimeError(f"TINYTENSOR_BLAS=mkl: cannot load MKL: {e}") from e
        return {}
    functions = {}
    for dtype, name, scalar in (
        (np.float32, "cblas_sgemm", ctypes.c_float),
        (np.float64, "cblas_dgemm", ctypes.c_double),
    ):
        f = getattr(lib, name)
        i, p = ctypes.c_int, ctypes.c_ssize_t
        f.argtypes = [i, i, i, i, i, i, scalar, p, i, p, i, scalar, p, i]
        f.restype = None
        functions[np.dtype(dtype)] = f
    return functions


def name() -> str:
    """ "mkl" when the products' blocks call MKL, else "openblas"."""
    return "mkl" if gemm_functions() else "openblas"


def why_not_in_use() -> str:
    """Why the blocks call OpenBLAS rather than MKL (for a test's skip reason)."""
    if os.environ.get("TINYTENSOR_BLAS") == "openblas":
        return "MKL is not in use (TINYTENSOR_BLAS=openblas)"
    return "MKL is not installed (pip install 'tinytensor[mkl]')"
