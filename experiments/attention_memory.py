"""Peak memory of naive vs tiled attention as T grows (forward + backward), via tracemalloc.

The naive path materializes the (B, H, T, T) scores and probabilities; the tiled path
(FlashAttention-2 in NumPy, `tt.attention_backend("tiled")`) keeps O(T) per row: its peak grows
linearly. NumPy reports its allocations to tracemalloc, so the traced peak is the arrays'.

    python -m experiments.attention_memory [--out runs/experiments]
"""

from __future__ import annotations

import os
import tracemalloc

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import tinytensor as tt  # noqa: E402

from .common import parse_args, save_text, table  # noqa: E402

B, H, D = 1, 2, 32


def peak_bytes(impl, t, backward=True):
    tt.manual_seed(0)
    q, k, v = (tt.randn(B, H, t, D, requires_grad=True) for _ in range(3))
    tracemalloc.start()
    tracemalloc.reset_peak()
    with tt.attention_backend(impl):
        out = tt.scaled_dot_product_attention(q, k, v, is_causal=True)
        if backward:
            out.sum().backward()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main():
    args = parse_args(__doc__.splitlines()[0])
    lengths = [256, 512, 1024, 2048, 4096]
    inputs = lambda t: 3 * B * H * t * D * 4  # noqa: E731 - q, k, v in float32
    rows, naive, tiled = [], [], []
    for t in lengths:
        n, f = peak_bytes("naive", t), peak_bytes("tiled", t)
        naive.append(n / 2**20)
        tiled.append(f / 2**20)
        scores = B * H * t * t * 4
        rows.append([t, f"{scores / 2**20:.1f}", f"{n / 2**20:.1f}", f"{f / 2**20:.1f}",
                     f"{inputs(t) / 2**20:.2f}", f"{n / f:.1f}x"])  # fmt: skip
    text = (
        f"Causal attention forward+backward, B={B}, H={H}, d={D}, float32: traced peak MiB\n"
        + table(["T", "one TxT matrix", "naive peak", "tiled peak", "q,k,v", "naive/tiled"], rows)
    )
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(lengths, naive, "o-", label="naive (materializes T×T scores)")
    ax.plot(lengths, tiled, "s-", label='tiled (attention_backend("tiled"))')
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T (tokens)")
    ax.set_ylabel("peak traced memory (MiB, log)")
    ax.set_title(f"Attention memory, forward + backward (B={B}, H={H}, d={D}, float32)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    png = os.path.join(args.out, "attention_memory.png")
    fig.savefig(png, dpi=110)
    print(text)
    print("wrote", save_text(args.out, "attention_memory.txt", text), "and", png)


if __name__ == "__main__":
    main()
