"""Launch code of the fused attention kernels (flash_attention.cu), for CuPy and the CPU executor.

`FlashAttentionKernels(module)` takes anything with `get_function(name)` returning a kernel
called as `kernel(grid, block, args, shared_mem=n)`: a `cupy.RawModule` on a GPU (arrays are CuPy
arrays) or a `cpu_executor.CpuModule` in tests (arrays are NumPy arrays). It has the interface of
`attention_tiled.NumpyTiles`, so `FlashAttention` runs either.

    forward   flash_attention_forward        grid (⌈Nq/32⌉, B·Hq)   -> O, L
    backward  flash_attention_backward_delta grid (⌈B·Hq·Nq/4⌉)     -> D = rowsum(dO ∘ O)
              flash_attention_backward_dkdv  grid (⌈Nk/32⌉, B·Hkv)  -> dK, dV
              flash_attention_backward_dq    grid (⌈Nq/32⌉, B·Hq)   -> dQ (and dS for dBias)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..backend import get_array_module

SOURCE_PATH = Path(__file__).with_name("flash_attention.cu")
KERNEL_NAMES = (
    "flash_attention_forward",
    "flash_attention_backward_delta",
    "flash_attention_backward_dkdv",
    "flash_attention_backward_dq",
)
TILE_Q = TILE_K = 32
THREADS = 128
MAX_HEAD_DIM = 128
STATIC_SHARED_LIMIT = 48 * 1024
NVRTC_OPTIONS = ("-std=c++17",)


def kernel_source() -> str:
    return SOURCE_PATH.read_text()


def shared_bytes(kernel: str, d: int) -> int:
    """Dynamic shared memory of one block, as laid out at the top of each kernel."""
    floats = {
        "flash_attention_forward": TILE_Q * d
        + TILE_K * (d + 1)
        + TILE_K * d
        + TILE_Q * (TILE_K + 1),
        "flash_attention_backward_delta": 0,
        "flash_attention_backward_dkdv": 2 * TILE_K * (d + 1)
        + 2 * TILE_Q * (d + 1)
        + 2 * TILE_Q
        + 2 * TILE_K * (TILE_Q + 1),
        "flash_attention_backward_dq": 2 * TILE_Q * d
        + 2 * TILE_K * (d + 1)
        + TILE_Q * (TILE_K + 1),
    }[kernel]
    return 4 * floats


def _broadcast_strides(shape):
    """Element strides of a C-contiguous array, 0 on axes of size 1 (they broadcast)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(0 if size == 1 else step)
        step *= size
    return strides[::-1]


def _blocks(n, per_block):
    return max(1, -(-n // per_block))


class FlashAttentionKernels:
    """Runs attention through the fused kernels of `module` (see the module docstring)."""

    name = "cuda"

    def __init__(self, module):
        self.module = module
        self._functions = {}

    def _launch(self, name, grid, args, d):
        shared = shared_bytes(name, d)
        kernel = self._functions.get(name)
        if kernel is None:
            kernel = self._functions[name] = self.module.get_function(name)
        if shared > STATIC_SHARED_LIMIT and kernel.max_dynamic_shared_size_bytes < shared:
            kernel.max_dynamic_shared_size_bytes = shared  # opt in above 48 KB (d > 64)
        kernel(grid, (THREADS,), args, shared_mem=shared)

    def _common(self, xp, q, k, bias, spec):
        """The masking arguments every kernel takes, as the exact types the kernels declare."""
        batch = q.shape[0]
        strides = np.zeros(8, np.int64)
        if bias is not None:
            bias = xp.ascontiguousarray(bias, dtype=xp.float32)
            strides[0:4] = _broadcast_strides(bias.shape)
        mask = spec.mask
        if mask is not None:
            mask = xp.ascontiguousarray(mask).astype(xp.uint8)
            strides[4:8] = _broadcast_strides(mask.shape)
        lengths = spec.key_lengths
        if lengths is not None:
            lengths = xp.ascontiguousarray(xp.asarray(lengths).astype(xp.int32))
            if lengths.shape != (batch,):
                raise ValueError(f"key_lengths must be ({batch},), got {lengths.shape}")
        return (
            bias if bias is not None else xp.zeros(1, xp.float32),
            np.int32(bias is not None),
            mask if mask is not None else xp.zeros(1, xp.uint8),
            np.int32(mask is not None),
            xp.asarray(strides),
            lengths if lengths is not None else xp.zeros(1, xp.int32),
            np.int32(lengths is not None),
        )

    @staticmethod
    def _check(q, k, v):
        d = q.shape[-1]
        if d > MAX_HEAD_DIM or v.shape[-1] != d or k.shape[-1] != d:
            raise ValueError(
                f"flash attention kernels: head dims up to {MAX_HEAD_DIM} with dv = d, got q "
                f"{q.shape}, k {k.shape}, v {v.shape}"
            )

    def forward(self, q, k, v, bias, spec):
        xp = get_array_module(q)
        self._check(q, k, v)
        batch, heads_q, n_q, d = q.shape
        n_k = k.shape[2]
        q, k, v = (xp.ascontiguousarray(x, dtype=xp.float32) for x in (q, k, v))
        out = xp.empty((batch, heads_q, n_q, d), xp.float32)
        lse = xp.empty((batch, heads_q, n_q), xp.float32)
        if out.size == 0:
            return out, lse
        args = (q, k, v, *self._common(xp, q, k, bias, spec), out, lse)
        args += self._sizes(n_q, n_k, d, heads_q, spec)
        self._launch("flash_attention_forward", (_blocks(n_q, TILE_Q), batch * heads_q), args, d)
        return out, lse

    @staticmethod
    def _sizes(n_q, n_k, d, heads_q, spec):
        return (
            np.int32(n_q),
            np.int32(n_k),
            np.int32(d),
            np.int32(heads_q),
            np.int32(spec.groups),
            np.int32(bool(spec.causal)),
            np.float32(spec.scale),
        )

    def backward(self, q, k, v, bias, out, lse, grad_out, spec, need_bias_grad):
        xp = get_array_module(q)
        batch, heads_q, n_q, d = q.shape
        heads_kv, n_k = k.shape[1], k.shape[2]
        q, k, v, out, lse, grad_out = (
            xp.ascontiguousarray(x, dtype=xp.float32) for x in (q, k, v, out, lse, grad_out)
        )
        grad_q, grad_k, grad_v = xp.empty_like(q), xp.empty_like(k), xp.empty_like(v)
        rows = batch * heads_q * n_q
        delta = xp.empty((batch, heads_q, n_q), xp.float32)
        ds = xp.empty((batch, heads_q, n_q, n_k) if need_bias_grad else (1,), xp.float32)
        if rows == 0 or k.size == 0:
            grad_q.fill(0), grad_k.fill(0), grad_v.fill(0), ds.fill(0)
        else:
            common = self._common(xp, q, k, bias, spec)
            sizes = self._sizes(n_q, n_k, d, heads_q, spec)
            self._launch(
                "flash_attention_backward_delta",
                (_blocks(rows, THREADS // 32),),
                (out, grad_out, delta, np.int64(rows), np.int32(d)),
                d,
            )
            self._launch(
                "flash_attention_backward_dkdv",
                (_blocks(n_k, TILE_K), batch * heads_kv),
                (q, k, v, *common, grad_out, lse, delta, grad_k, grad_v, *sizes),
                d,
            )
            self._launch(
                "flash_attention_backward_dq",
                (_blocks(n_q, TILE_Q), batch * heads_q),
                (q, k, v, *common, grad_out, lse, delta, grad_q, ds, np.int32(need_bias_grad))
                + sizes,
                d,
            )
        grad_bias = None
        if need_bias_grad:
            # NOTE: dS is (B, Hq, Nq, Nk) here; summing it to the bias's shape is the one place
            # the kernel path holds a score-sized array (only when the bias needs a gradient).
            axes = tuple(a for a in range(4) if bias.shape[a] == 1 and ds.shape[a] != 1)
            grad_bias = ds.sum(axis=axes, keepdims=True) if axes else ds
        return grad_q, grad_k, grad_v, grad_bias


_cupy_kernels = None


def cupy_kernels() -> FlashAttentionKernels:
    """The kernels compiled for the GPU by CuPy (lazily, once per process)."""
    global _cupy_kernels
    if _cupy_kernels is None:
        from ..backend import cupy_module

        cp = cupy_module()
        module = cp.RawModule(code=kernel_source(), options=NVRTC_OPTIONS)
        _cupy_kernels = FlashAttentionKernels(module)
    return _cupy_kernels
