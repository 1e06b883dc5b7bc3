"""Thread settings for the training scripts, made before NumPy loads OpenBLAS.

NOTE: with a fixed count of two threads, a training step on a 2-core machine that is doing
anything else measured 3-10x slower than with one: every matrix product and every kernel ends at
a barrier, and a thread sharing its core with another process is descheduled for milliseconds
while the others wait. With the fused CPU kernels (numba installed), tinytensor follows the load
instead: it uses every core that is free and drops to fewer when the machine is busy, for
OpenBLAS and its own kernels alike (tinytensor/kernels/cpu/threads.py), so OpenBLAS is left at
all cores here. Without numba, most of a step is single-threaded NumPy work and two BLAS
threads gain little, so the scripts keep the old default of one. A user who sets
OPENBLAS_NUM_THREADS (or OMP_NUM_THREADS) keeps their choice either way.
"""

from __future__ import annotations

import importlib.util
import os
import sys


def default_to_one_blas_thread() -> None:
    """Sets OPENBLAS_NUM_THREADS=1 unless the user chose a thread count or the fused kernels
    (numba) will follow the load (no effect once NumPy is imported: call it first)."""
    if "numpy" in sys.modules:
        return
    if any(v in os.environ for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")):
        return
    if importlib.util.find_spec("numba") is None:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
