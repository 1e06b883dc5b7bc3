"""One BLAS thread by default, set before NumPy loads OpenBLAS.

NOTE: on a 2-core machine that is doing anything else, OpenBLAS's worker threads spin while
they wait for each other, and a training step with two BLAS threads measured 3x slower (20x for
a lone small matmul) than with one; on an idle machine two threads gain little at these matrix
sizes, since most of a step is elementwise NumPy work, which is single-threaded anyway. A user
who sets OPENBLAS_NUM_THREADS (or OMP_NUM_THREADS) keeps their choice.
"""

from __future__ import annotations

import os
import sys


def default_to_one_blas_thread() -> None:
    """Sets OPENBLAS_NUM_THREADS=1 unless the user chose a thread count (no effect once NumPy
    is imported: call it first)."""
    if "numpy" in sys.modules:
        return
    if not any(v in os.environ for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
