"""Checks every attention kernel against the NumPy path on a GPU, and times them against PyTorch.

    python benchmarks/gpu_attention.py              # on a CUDA machine (cupy, torch, numpy)
    python benchmarks/gpu_attention.py --dry-run    # here: same code, CPU executor, tiny shapes

1. Correctness: for each problem (causal, GQA, shared bias with gradient, key padding, cross-
   attention, lengths the 32-row tiles do not divide, head dims 64 and 128), the four kernels
   (forward, D, dK/dV, dQ+dS) against the tiled NumPy path in float64: O, L, dQ, dK, dV, dBias.
   Then the autograd op (`tt.attention_backend("cuda")`) against the naive op on the device.
2. Speed: forward and forward+backward of our fp32 kernels against
   torch.nn.functional.scaled_dot_product_attention in fp32 and bf16, as a table.
Ends with an `N passed, N failed` line; exits 1 if anything failed. Without a GPU it says so,
suggests --dry-run and exits 2.

--dry-run runs the same functions with the kernels on the CPU executor (cpu_executor.py), NumPy
arrays and PyTorch on the CPU, on small shapes: it proves the script works before a GPU is lent
(its times mean nothing).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tinytensor as tt  # noqa: E402
from tinytensor.kernels.flash_attention import FlashAttentionKernels, kernel_source  # noqa: E402
from tinytensor.ops.attention_tiled import (  # noqa: E402
    AttentionSpec,
    FlashAttention,
    flash_attention_backward,
    flash_attention_forward,
)

TOLERANCE = 1e-4  # relative to max(1, |reference|): fp32 kernels vs float64 NumPy
# NOTE: the GPU run is unattended under a 10-minute limit: past this many seconds the remaining
# cases are not started (each counts as failed), so the table and the summary line always print.
TIME_BUDGET_S = 420.0


@dataclass
class Problem:
    name: str
    batch: int
    heads_q: int
    heads_kv: int
    n_q: int
    n_k: int
    d: int
    causal: bool = False
    bias: bool = False  # (1, Hq, Nq, Nk), shared over the batch, with gradient (T5)
    padded: bool = False  # key_lengths: the second half of the batch keeps 60% of the keys


def problems(dry_run):
    if dry_run:
        return [
            Problem("causal", 1, 2, 2, 45, 45, 16, causal=True),
            Problem("gqa+bias+pad", 2, 4, 2, 33, 40, 32, causal=True, bias=True, padded=True),
            Problem("cross d=64", 1, 2, 1, 20, 37, 64),
        ]
    return [
        Problem("causal T=1024 d=64", 2, 8, 8, 1024, 1024, 64, causal=True),
        Problem("T=1000 d=128", 2, 4, 4, 1000, 1000, 128),
        Problem("gqa 8/2 causal", 2, 8, 2, 777, 777, 64, causal=True),
        Problem("mqa decode Nq=7", 4, 8, 1, 7, 2000, 64, causal=True),
        Problem("t5 bias+pad", 2, 8, 8, 512, 512, 64, bias=True, padded=True),
        Problem("cross 300x1500", 2, 8, 8, 300, 1500, 64),
        Problem("d=16 T=2048", 1, 4, 4, 2048, 2048, 16, causal=True),
    ]


class Device:
    """Array module, kernels and synchronization for the GPU or for the dry run."""

    def __init__(self, dry_run):
        self.dry_run = dry_run
        if dry_run:
            from tinytensor.kernels.cpu_executor import CpuModule

            self.xp = np
            self.kernels = FlashAttentionKernels(
                CpuModule(kernel_source(), schedule="random", name="flash_attention")
            )
            self.tt_device, self.torch_device = "cpu", "cpu"
        else:
            import cupy

            from tinytensor.kernels.flash_attention import cupy_kernels

            self.xp, self.kernels = cupy, cupy_kernels()
            self.tt_device, self.torch_device = "cuda", "cuda"

    def sync(self):
        if not self.dry_run:
            self.xp.cuda.Device().synchronize()

    def to_numpy(self, a):
        return a if self.dry_run else a.get()


def make_arrays(p: Problem, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {
        "q": rng.standard_normal((p.batch, p.heads_q, p.n_q, p.d)),
        "k": rng.standard_normal((p.batch, p.heads_kv, p.n_k, p.d)),
        "v": rng.standard_normal((p.batch, p.heads_kv, p.n_k, p.d)),
        "dout": rng.standard_normal((p.batch, p.heads_q, p.n_q, p.d)),
        "bias": rng.standard_normal((1, p.heads_q, p.n_q, p.n_k)) if p.bias else None,
    }
    arrays = {n: None if a is None else a.astype(np.float32) for n, a in arrays.items()}
    lengths = None
    if p.padded:
        lengths = np.full(p.batch, p.n_k)
        lengths[p.batch // 2 :] = max(1, int(0.6 * p.n_k))
    spec = AttentionSpec(
        scale=1.0 / np.sqrt(p.d),
        groups=p.heads_q // p.heads_kv,
        causal=p.causal,
        key_lengths=lengths,
    )
    return arrays, spec


def check_kernels(device, p: Problem):
    """{output name: relative max error} of the kernels against float64 NumPy."""
    arrays, spec = make_arrays(p)
    f64 = {n: None if a is None else a.astype(np.float64) for n, a in arrays.items()}
    ref_out, ref_lse = flash_attention_forward(f64["q"], f64["k"], f64["v"], f64["bias"], spec)
    ref_grads = flash_attention_backward(
        f64["q"], f64["k"], f64["v"], f64["bias"], ref_out, ref_lse, f64["dout"], spec, p.bias
    )
    xp = device.xp
    dev = {n: None if a is None else xp.asarray(a) for n, a in arrays.items()}
    dev_spec = AttentionSpec(spec.scale, spec.groups, spec.causal, spec.key_lengths)
    if spec.key_lengths is not None:
        dev_spec.key_lengths = xp.asarray(spec.key_lengths)
    out, lse = device.kernels.forward(dev["q"], dev["k"], dev["v"], dev["bias"], dev_spec)
    grads = device.kernels.backward(
        dev["q"], dev["k"], dev["v"], dev["bias"], out, lse, dev["dout"], dev_spec, p.bias
    )
    device.sync()
    errors = {}
    names = ("O", "L", "dQ", "dK", "dV", "dBias")
    for name, ours, ref in zip(names, (out, lse, *grads), (ref_out, ref_lse, *ref_grads)):
        if ref is None:
            continue
        ours = device.to_numpy(ours).astype(np.float64)
        finite = np.isfinite(ref)
        if not np.array_equal(np.isfinite(ours), finite) or np.isnan(ours).any():
            errors[name] = float("inf")
            continue
        scale = max(1.0, float(np.abs(ref[finite]).max(initial=0.0)))
        errors[name] = float(np.abs(ours[finite] - ref[finite]).max(initial=0.0)) / scale
    return errors


def check_autograd_op(device):
    """The engine's op through the kernels against the naive op, on the device."""
    rng = np.random.default_rng(1)
    shapes = [(2, 4, 50, 32), (2, 2, 70, 32), (2, 2, 70, 32)]
    data = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    results = []
    for impl in ("kernels", "naive"):
        q, k, v = (tt.tensor(a, device=device.tt_device, requires_grad=True) for a in data)
        if impl == "naive" or not device.dry_run:
            with tt.attention_backend("cuda" if impl == "kernels" else "naive"):
                out = tt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            if impl == "kernels":
                assert out._ctx.name == "FlashAttention", "the cuda backend did not take the call"
        else:  # dry run: the same Function with the executor as its runner
            spec = AttentionSpec(scale=1 / np.sqrt(32), groups=2, causal=True)
            out = FlashAttention.apply(q, k, v, spec=spec, runner=device.kernels)
        (out * out).sum().backward()
        results.append([t.numpy() for t in (out, q.grad, k.grad, v.grad)])
    return {
        name: float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))
        for name, a, b in zip(("O", "dQ", "dK", "dV"), *results)
    }


def time_call(fn, device, sync_torch, repeats):
    fn()
    device.sync(), sync_torch()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    device.sync(), sync_torch()
    return (time.perf_counter() - start) / repeats * 1e3


def benchmark(device, p: Problem, repeats):
    """Milliseconds: ours fp32, torch fp32, torch bf16; forward and forward+backward."""
    import torch

    sync_torch = torch.cuda.synchronize if device.torch_device == "cuda" else (lambda: None)
    arrays, spec = make_arrays(p)
    xp = device.xp
    q, k, v, dout = (xp.asarray(arrays[n]) for n in ("q", "k", "v", "dout"))
    if spec.key_lengths is not None:
        spec.key_lengths = xp.asarray(spec.key_lengths)
    bias = None if arrays["bias"] is None else xp.asarray(arrays["bias"])
    kernels = device.kernels
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def ours_forward():
        return kernels.forward(q, k, v, bias, spec)

    def ours_both():
        out, lse = kernels.forward(q, k, v, bias, spec)
        kernels.backward(q, k, v, bias, out, lse, dout, spec, p.bias)

    row = {
        "ours fp32 fwd": time_call(ours_forward, device, sync_torch, repeats),
        "ours fp32 fwd+bwd": time_call(ours_both, device, sync_torch, repeats),
    }
    for dtype_name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        tq, tk, tv, tdo = (
            torch.tensor(arrays[n], device=device.torch_device, dtype=dtype)
            for n in ("q", "k", "v", "dout")
        )
        mask = (
            None
            if arrays["bias"] is None
            else torch.tensor(arrays["bias"], device=device.torch_device, dtype=dtype)
        )
        for t in (tq, tk, tv):
            t.requires_grad_(True)
        # NOTE: PyTorch aligns causal top-left; for Nq ≠ Nk the work differs slightly from ours.
        kwargs = {
            "attn_mask": mask,
            "is_causal": p.causal and mask is None,
            "enable_gqa": p.heads_q != p.heads_kv,
        }

        def torch_forward(tq=tq, tk=tk, tv=tv, kwargs=kwargs):
            with torch.no_grad():
                return sdpa(tq, tk, tv, **kwargs)

        def torch_both(tq=tq, tk=tk, tv=tv, tdo=tdo, kwargs=kwargs):
            sdpa(tq, tk, tv, **kwargs).backward(tdo)

        row[f"torch {dtype_name} fwd"] = time_call(torch_forward, device, sync_torch, repeats)
        row[f"torch {dtype_name} fwd+bwd"] = time_call(torch_both, device, sync_torch, repeats)
    return row


def no_gpu_reason() -> str | None:
    """Why this machine cannot run the GPU benchmark, or None when a CUDA device is there."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - no driver, a driver too old: each means "no GPU"
        return f"CuPy sees no CUDA device ({type(e).__name__}: {e})"
    return None if count > 0 else "CuPy sees no CUDA device"


def _this_script() -> str:
    """This script's path as typed from the current directory (absolute when that is shorter)."""
    script = Path(__file__).resolve()
    try:
        relative = os.path.relpath(script)
    except ValueError:  # another drive on Windows
        return str(script)
    return relative if len(relative) <= len(str(script)) else str(script)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU executor, tiny shapes")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    if not args.dry_run and (reason := no_gpu_reason()):
        print(
            f"no GPU here: {reason}. This benchmark checks and times the CUDA kernels on a GPU.\n"
            "To check the script and the kernels on this machine (CPU executor, small shapes;\n"
            f"its times mean nothing), run the dry run:\n\n    python {_this_script()} --dry-run"
        )
        sys.exit(2)
    start = time.perf_counter()
    repeats = args.repeats or (1 if args.dry_run else 20)
    mode = "DRY RUN on the CPU executor (times mean nothing)" if args.dry_run else "GPU"
    print(f"fused attention kernels: {mode}", flush=True)
    try:
        device = Device(args.dry_run)
    except Exception as e:  # noqa: BLE001 - no device or no CuPy: still print the summary
        print(f"device setup failed: {type(e).__name__}: {e}")
        print("\n0 passed, 1 failed")
        sys.exit(1)
    passed = failed = 0

    def out_of_time(what):
        if time.perf_counter() - start < TIME_BUDGET_S:
            return False
        print(f"{what:<22} not run: past the {TIME_BUDGET_S:.0f} s budget  FAIL", flush=True)
        return True

    print(
        f"\n{'problem':<22} "
        + " ".join(f"{n:>9}" for n in ("O", "L", "dQ", "dK", "dV", "dBias"))
        + "  result"
    )
    for p in problems(args.dry_run):
        if out_of_time(p.name):
            failed += 1
            continue
        try:
            errors = check_kernels(device, p)
            ok = all(e <= TOLERANCE for e in errors.values())
            cells = " ".join(
                f"{errors[n]:>9.1e}" if n in errors else f"{'-':>9}"
                for n in ("O", "L", "dQ", "dK", "dV", "dBias")
            )
        except Exception as e:  # noqa: BLE001 - a crash is one failed check, then go on
            ok, cells = False, f"error: {type(e).__name__}: {e}"
        passed, failed = passed + ok, failed + (not ok)
        print(f"{p.name:<22} {cells}  {'PASS' if ok else 'FAIL'}", flush=True)
    try:
        if time.perf_counter() - start >= TIME_BUDGET_S:
            raise TimeoutError(f"not run: past the {TIME_BUDGET_S:.0f} s budget")
        errors = check_autograd_op(device)
        ok = all(e <= TOLERANCE for e in errors.values())
        detail = " ".join(f"{n} {e:.1e}" for n, e in errors.items())
    except Exception as e:  # noqa: BLE001
        ok, detail = False, f"error: {type(e).__name__}: {e}"
    passed, failed = passed + ok, failed + (not ok)
    print(f"{'autograd op vs naive':<22} {detail}  {'PASS' if ok else 'FAIL'}")

    try:
        import torch  # noqa: F401

        print(f"\ntimes in ms (mean of {repeats} after a warm-up)")
        header = None
        for p in problems(args.dry_run):
            if out_of_time(p.name):
                failed += 1
                continue
            try:
                row = benchmark(device, p, repeats)
            except Exception as e:  # noqa: BLE001
                print(f"{p.name:<22} timing failed: {type(e).__name__}: {e}")
                failed += 1
                continue
            if header is None:
                header = list(row)
                print(
                    f"{'problem':<22} "
                    + " ".join(f"{h:>18}" for h in header)
                    + f" {'fwd+bwd ours/torch32':>21}"
                )
            ratio = row["ours fp32 fwd+bwd"] / row["torch fp32 fwd+bwd"]
            print(
                f"{p.name:<22} "
                + " ".join(f"{row[h]:>18.3f}" for h in header)
                + f" {ratio:>21.2f}",
                flush=True,
            )
    except ImportError:
        print("\ntorch is not installed: no timing against PyTorch")

    print(f"\n{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
