"""One line naming the machine configuration that results and timings come from.

    python -m tinytensor.kernels.cpu.machine
    machine: Intel(R) Xeon(R) Processor (AVX-512), 2 of 2 cores; products: MKL 2025.3.0; NumPy's
    BLAS: OpenBLAS 0.3.31 (SkylakeX); numba 0.68.1 for sapphirerapids (512-bit vectors); CPU
    kernels: auto; threads: fixed by OPENBLAS_NUM_THREADS=1

What can change the last bits of a result is here: the CPU and its widest vector instructions,
which BLAS computes the products (and the kernels it picks: MKL_ENABLE_INSTRUCTIONS, OpenBLAS's
core type), the target numba compiled the fused kernels for, the kernels' mode and the thread
count. The test command ends with this line; the benchmarks print it above their tables.
"""

from __future__ import annotations

import importlib.metadata
import os

from . import dispatch, mkl_blas, threads


def _cpu() -> str:
    """The CPU's model name and its widest vector instructions, from /proc/cpuinfo."""
    name, flags = "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not name:
                    name = " ".join(value.split())
                elif key == "flags" and not flags:
                    flags = set(value.split())
                if name and flags:
                    break
    except OSError:
        pass
    import platform

    name = name or platform.processor() or platform.machine()
    widest = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("sse4_2", "SSE4.2"))
    isa = next((label for flag, label in widest if flag in flags), None)
    return f"{name} ({isa})" if isa else name


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _products() -> str:
    if mkl_blas.name() == "mkl":
        text = f"MKL {_version('mkl')}"
        forced = os.environ.get("MKL_ENABLE_INSTRUCTIONS")
        return f"{text} (MKL_ENABLE_INSTRUCTIONS={forced})" if forced else text
    return "OpenBLAS through numba" if dispatch.fused_available() else "NumPy's"


def _numpy_blas() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "?"
    import numpy  # noqa: F401  (loads its BLAS)

    for lib in threadpool_info():
        if lib["user_api"] == "blas" and "numpy" in lib.get("filepath", ""):
            arch = lib.get("architecture")
            text = f"{lib['internal_api']} {lib.get('version') or ''}".strip()
            return f"{text} ({arch})" if arch else text
    return "?"


def _numba_target() -> str:
    if not dispatch.fused_available():
        return "numba: not installed (NumPy reference only)"
    import numba

    dispatch._prefer_wide_vectors()  # what the kernels compile with (a no-op once they did)
    target = os.environ.get("NUMBA_CPU_NAME")
    if not target:
        import llvmlite.binding as llvm

        target = llvm.get_host_cpu_name()
    wide = "-prefer-256-bit" in (numba.config.CPU_FEATURES or "")
    return f"numba {numba.__version__} for {target}" + (" (512-bit vectors)" if wide else "")


def _threads() -> str:
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        if os.environ.get(name, "").isdigit():
            return f"fixed by {name}={os.environ[name]}"
    return "following the load"


def describe() -> str:
    """The machine line (see the module's docstring)."""
    return (
        f"machine: {_cpu()}, {threads.cores_allowed()} of {os.cpu_count()} cores; "
        f"products: {_products()}; NumPy's BLAS: {_numpy_blas()}; {_numba_target()}; "
        f"CPU kernels: {dispatch.current_mode()}; threads: {_threads()}"
    )


if __name__ == "__main__":
    print(describe())
