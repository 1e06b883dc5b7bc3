"""Peak memory and time of attention forward+backward: naive (T×T scores) vs tiled NumPy.

    python benchmarks/attention_memory.py [--lengths 1024 2048 4096] [--heads 4] [--plot out.png]

Peak memory is NumPy's own allocations during one forward+backward, measured with tracemalloc
(NumPy reports its data buffers to it), above what the inputs already hold. The naive path grows
as T², the tiled path as T. Then both paths are timed at T = 1024 against PyTorch's
scaled_dot_product_attention (CPU) in the same run.

NOTE: BLAS and PyTorch run on one thread unless --threads is given (read before NumPy loads), so
that the times compare the algorithms rather than thread scheduling on a shared 2-core machine:
the tiled path makes many small matmuls, which suffer most when BLAS threads compete.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc

_THREADS = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = _THREADS

import numpy as np  # noqa: E402

import tinytensor as tt  # noqa: E402


def make_inputs(length, heads, d, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v, g = (rng.standard_normal((1, heads, length, d)).astype(np.float32) for _ in range(4))
    return q, k, v, g


def forward_backward(impl, q, k, v, g, causal):
    qt, kt, vt = (tt.tensor(a, requires_grad=True) for a in (q, k, v))
    with tt.attention_backend(impl):
        out = tt.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    out.backward(tt.tensor(g))
    return out, qt.grad, kt.grad, vt.grad


def peak_bytes(impl, length, heads, d, causal):
    q, k, v, g = make_inputs(length, heads, d)
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    results = forward_backward(impl, q, k, v, g, causal)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del results
    return peak


def best_times(fns, repeats=5):
    """Best wall time of each function; runs alternate so that machine load hits all alike."""
    for fn in fns.values():
        fn()  # warm-up
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--time-length", type=int, default=1024)
    parser.add_argument("--plot", help="write a PNG of peak memory against T")
    parser.add_argument("--threads", default="1", help="BLAS and PyTorch threads (default 1)")
    args = parser.parse_args()
    h, d = args.heads, args.head_dim
    mib = 1 << 20

    print(
        f"peak memory of forward+backward (batch 1, {h} heads, d={d}, float32, "
        f"causal={args.causal}), MiB above the inputs"
    )
    print(f"{'T':>6} {'naive':>10} {'tiled':>10} {'naive/tiled':>12} {'T×T scores':>11}")
    rows = []
    for length in args.lengths:
        naive = peak_bytes("naive", length, h, d, args.causal)
        tiled = peak_bytes("tiled", length, h, d, args.causal)
        scores = h * length * length * 4
        rows.append((length, naive, tiled))
        print(
            f"{length:>6} {naive / mib:>10.1f} {tiled / mib:>10.1f} {naive / tiled:>12.1f} "
            f"{scores / mib:>11.1f}"
        )
    if len(rows) > 1:
        (t0, n0, s0), (t1, n1, s1) = rows[0], rows[-1]
        print(
            f"growth from T={t0} to T={t1} ({t1 / t0:.0f}x): naive {n1 / n0:.1f}x, "
            f"tiled {s1 / s0:.1f}x (linear would be {t1 / t0:.0f}x)"
        )

    length = args.time_length
    q, k, v, g = make_inputs(length, h, d)
    print(
        f"\ntime of forward+backward at T={length} (best of 5, runs interleaved, "
        f"{args.threads} BLAS/torch thread(s))"
    )
    steps = {
        impl: lambda impl=impl: forward_backward(impl, q, k, v, g, args.causal)
        for impl in ("naive", "tiled")
    }
    try:
        import torch

        torch.set_num_threads(int(args.threads))
        qt, kt, vt = (torch.tensor(a, requires_grad=True) for a in (q, k, v))

        def torch_step():
            for t in (qt, kt, vt):
                t.grad = None
            out = torch.nn.functional.scaled_dot_product_attention(
                qt, kt, vt, is_causal=args.causal
            )
            out.backward(torch.tensor(g))

        steps["torch"] = torch_step
    except ImportError:
        print("(torch is not installed: no PyTorch column)")
    timings = best_times(steps)
    for name, seconds in timings.items():
        print(f"{name:>6}: {seconds * 1e3:8.1f} ms  ({seconds / timings['naive']:.2f}x naive)")
    print(
        f"tiled/naive time ratio at T={length}: {timings['tiled'] / timings['naive']:.2f} "
        "(goal: at most 1.5)"
    )

    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        lengths = [r[0] for r in rows]
        plt.figure(figsize=(5, 3.5))
        plt.plot(lengths, [r[1] / mib for r in rows], "o-", label="naive (T×T scores)")
        plt.plot(lengths, [r[2] / mib for r in rows], "o-", label="tiled (FlashAttention-2)")
        plt.xlabel("sequence length T")
        plt.ylabel("peak MiB, forward+backward")
        plt.title(f"attention memory, {h} heads, d={d}")
        plt.legend()
        plt.grid(alpha=0.3)
        plt.tight_layout()
        plt.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
