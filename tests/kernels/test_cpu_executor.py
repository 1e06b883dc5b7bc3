"""The CPU executor itself: it must see the bugs it exists to catch.

A missing __syncthreads() in the attention kernels must change the results under some schedule;
a barrier reached by only some threads, threads at different barriers, unwritten outputs, wrong
scalar types and unrequested large shared memory must all be reported.
"""

import numpy as np
import pytest

from tinytensor.kernels.cpu_executor import CpuModule, KernelExecutionError
from tinytensor.kernels.flash_attention import FlashAttentionKernels, kernel_source
from tinytensor.ops.attention_tiled import AttentionSpec, flash_attention_forward

from .conftest import SCHEDULES, require_gxx

TOY_KERNELS = r"""
extern "C" __global__ void warp_ops(const float* x, float* sums, float* broadcast, int* lanes) {
  const int t = threadIdx.x;
  float v = x[t];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  sums[t] = v;
  broadcast[t] = __shfl_sync(0xffffffffu, x[t], 5);
  lanes[t] = __shfl_xor_sync(0xffffffffu, t, 1);
}

extern "C" __global__ void reverse_in_shared(const float* x, float* y, int n) {
  TT_DYNAMIC_SHARED(float, buffer);
  const int t = threadIdx.x;
  buffer[t] = x[blockIdx.x * n + t];
  __syncthreads();
  y[blockIdx.x * n + t] = buffer[n - 1 - t];
}

extern "C" __global__ void early_exit_before_barrier(float* y) {
  if (threadIdx.x < 16) return;
  __syncthreads();
  y[threadIdx.x] = 1.0f;
}

extern "C" __global__ void barriers_at_two_places(float* y) {
  if (threadIdx.x % 2) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  y[threadIdx.x] = 1.0f;
}

extern "C" __global__ void writes_even_only(float* y, int n) {
  const int t = threadIdx.x;
  if (t < n && t % 2 == 0) y[t] = 2.0f;
}

extern "C" __global__ void scaled_copy(const float* x, float* y, float a, long long n) {
  const long long t = threadIdx.x;
  if (t < n) y[t] = a * x[t];
}
"""


@pytest.fixture(scope="module")
def toys():
    require_gxx()
    return {s: CpuModule(TOY_KERNELS, schedule=s, seed=1, name="toy_kernels") for s in SCHEDULES}


def test_warp_shuffles_exchange_values(toys):
    x = np.arange(64, dtype=np.float32) ** 1.5
    sums, broadcast = np.empty(64, np.float32), np.empty(64, np.float32)
    lanes = np.empty(64, np.int32)
    toys["random"].get_function("warp_ops")((1,), (64,), (x, sums, broadcast, lanes))
    expected_sums = np.repeat(x.reshape(2, 32).sum(1), 32)
    np.testing.assert_allclose(sums, expected_sums, rtol=1e-6)
    np.testing.assert_array_equal(broadcast, np.repeat(x[[5, 37]], 32))
    np.testing.assert_array_equal(lanes, np.arange(64) ^ 1)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_shared_memory_and_barrier(toys, schedule):
    x = np.random.default_rng(0).standard_normal((3, 96)).astype(np.float32)
    y = np.empty_like(x)
    toys[schedule].get_function("reverse_in_shared")((3,), (96,), (x, y, np.int32(96)), 96 * 4)
    np.testing.assert_array_equal(y, x[:, ::-1])


def test_barrier_reached_by_some_threads_is_an_error(toys):
    kernel = toys["ascending"].get_function("early_exit_before_barrier")
    with pytest.raises(KernelExecutionError, match=r"reached by 48 of 64 threads"):
        kernel((1,), (64,), (np.empty(64, np.float32),))


def test_threads_at_different_barriers_is_an_error(toys):
    kernel = toys["descending"].get_function("barriers_at_two_places")
    with pytest.raises(KernelExecutionError, match="different __syncthreads"):
        kernel((1,), (64,), (np.empty(64, np.float32),))


def test_unwritten_outputs_are_nan(toys):
    y = np.zeros(8, np.float32)
    toys["ascending"].get_function("writes_even_only")((1,), (8,), (y, np.int32(8)))
    assert np.all(y[::2] == 2.0) and np.isnan(y[1::2]).all()


def test_scalars_must_have_the_declared_type(toys):
    kernel = toys["ascending"].get_function("scaled_copy")
    x, y = np.ones(4, np.float32), np.empty(4, np.float32)
    with pytest.raises(TypeError, match="float32 scalar, got float"):
        kernel((1,), (4,), (x, y, 2.0, np.int64(4)))
    with pytest.raises(TypeError, match="int64 scalar, got int32"):
        kernel((1,), (4,), (x, y, np.float32(2), np.int32(4)))
    with pytest.raises(TypeError, match="C-contiguous float32"):
        kernel((1,), (4,), (x.astype(np.float64), y, np.float32(2), np.int64(4)))
    kernel((1,), (4,), (x, y, np.float32(2), np.int64(4)))
    np.testing.assert_array_equal(y, 2 * x)


def test_large_shared_memory_needs_opt_in(toys):
    kernel = toys["ascending"].get_function("reverse_in_shared")
    x = np.ones((1, 32), np.float32)
    with pytest.raises(KernelExecutionError, match="max_dynamic_shared_size_bytes"):
        kernel((1,), (32,), (x, np.empty_like(x), np.int32(32)), 64 * 1024)
    kernel.max_dynamic_shared_size_bytes = 64 * 1024
    kernel((1,), (32,), (x, np.empty_like(x), np.int32(32)), 64 * 1024)


def _drop_barrier(code, marker):
    """The kernel source with the __syncthreads() right before `marker` removed."""
    barrier = "__syncthreads();"
    at = code.index(marker)
    cut = code.rindex(barrier, 0, at)
    assert code[cut + len(barrier) : at].strip() == "", "the marker must follow the barrier"
    return code[:cut] + code[cut + len(barrier) :]


@pytest.mark.parametrize(
    "marker",
    [
        "const int j = k0 + lane;\n#pragma unroll\n    for (int r = 0; r < ROWS_PER_WARP; ++r) {\n"
        "      const int row = warp * ROWS_PER_WARP + r, i = q0 + row;\n      float s = ",
        "// the next tile overwrites s_k, s_v and s_p",
    ],
    ids=["after_kv_load", "before_next_tile"],
)
def test_a_missing_barrier_is_seen(marker):
    """Deleting one __syncthreads() from the forward kernel changes its results (or faults)."""
    require_gxx()
    code = kernel_source()
    broken = _drop_barrier(code, marker)
    assert broken.count("__syncthreads();") == code.count("__syncthreads();") - 1
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 2, 40, 16)).astype(np.float32)
    k, v = (rng.standard_normal((1, 2, 70, 16)).astype(np.float32) for _ in range(2))
    spec = AttentionSpec(scale=0.25)
    expected, _ = flash_attention_forward(q.astype(np.float64), k, v, None, spec)
    wrong = []
    for schedule in SCHEDULES:
        kernels = FlashAttentionKernels(
            CpuModule(broken, schedule=schedule, seed=3, name="flash_attention_broken")
        )
        try:
            out, _ = kernels.forward(q, k, v, None, spec)
        except KernelExecutionError:
            wrong.append(schedule)
            continue
        if not np.allclose(out, expected, rtol=1e-4, atol=1e-4):
            wrong.append(schedule)
    print(f"schedules that saw the missing barrier: {wrong}")
    assert wrong, "no schedule noticed the missing __syncthreads()"
