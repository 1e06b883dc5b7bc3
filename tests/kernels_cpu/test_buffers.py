"""The kernels' output buffers (kernels/cpu/buffers.py): large ones start on a page boundary, so a
kernel's stores never sit a few bytes ahead of its loads modulo the CPU's alias window."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.kernels.cpu import buffers

F = tt.nn.functional


def _page_offset(a):
    return a.ctypes.data % buffers.PAGE


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape", [(1024, 256), (3, 5, 7001), (buffers.ALIGN_FROM_BYTES // 4,)])
def test_large_arrays_are_page_aligned_and_usable(dtype, shape):
    a = buffers.empty(shape, dtype)
    assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
    if a.nbytes >= buffers.ALIGN_FROM_BYTES:
        assert _page_offset(a) == 0
    a[...] = 7  # the whole range is writable memory of its own
    assert (a == 7).all()
    b = buffers.empty_like(a)
    assert b.shape == a.shape and b.dtype == a.dtype and not np.shares_memory(a, b)


def test_small_arrays_are_plain_numpy():
    a = buffers.empty((4, 4), np.float32)
    assert a.base is None and a.shape == (4, 4)  # np.empty's own array, no padding


def test_arrays_allocated_back_to_back_are_whole_pages_apart():
    """np.empty's 1 MiB arrays allocated one after the other on the heap lie 1 MiB + 16 bytes
    apart (the hazard); the buffers' arrays are a whole number of pages apart."""
    ours = [buffers.empty((1024, 256), np.float32) for _ in range(4)]
    gaps = {(b.ctypes.data - a.ctypes.data) % buffers.PAGE for a, b in zip(ours, ours[1:])}
    assert gaps == {0}


@pytest.mark.parametrize(
    "op",
    [
        lambda x: F.gelu(x, approximate="tanh"),
        lambda x: F.gelu(x),
        lambda x: tt.softmax(x, -1),
        lambda x: tt.log_softmax(x, -1),
        lambda x: F.layer_norm(x, (x.shape[-1],)),
        lambda x: x @ tt.tensor(np.ones((256, 256), np.float32)),
    ],
    ids=["gelu_tanh", "gelu", "softmax", "log_softmax", "layer_norm", "matmul"],
)
def test_fused_outputs_and_gradients_start_on_a_page(op):
    leaf = tt.tensor(np.random.default_rng(0).standard_normal((512, 256)).astype(np.float32))
    leaf.requires_grad_(True)
    seen = []  # the op's input gradient as its backward returned it (a leaf's .grad is a copy)
    with tt.cpu_kernels("numba"):
        x = leaf * 1.0
        x.register_hook(seen.append)
        y = op(x)
        y.backward(tt.ones_like(y))
    assert _page_offset(y.numpy()) == 0
    assert _page_offset(seen[0].numpy()) == 0
