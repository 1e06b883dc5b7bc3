"""Fused, multi-threaded CPU kernels (numba) for the non-GEMM hot paths of training.

Each kernel computes what a readable NumPy op in `tinytensor/ops` computes, in one or two passes
over memory and on every core: norms, softmax / log-softmax / cross-entropy, GELU, the attention
block's scale-mask-softmax, embedding backward, and the Adam/SGD updates over all parameters at
once. The matrix products run on the same thread pool (`gemm.py`: one pool, so OpenBLAS's
threads and the kernels' never fight over the cores), calling MKL where the optional `mkl`
extra is installed (`mkl_blas.py`). The NumPy code stays the reference: `tt.cpu_kernels("numpy")`
forces it, and the tests compare the two. See `dispatch.py` for when a call takes the fused path.
"""

from .dispatch import cpu_kernels, fused_available, kernels_for
from .threads import get_num_threads, set_num_threads

__all__ = ["cpu_kernels", "fused_available", "kernels_for", "get_num_threads", "set_num_threads"]
