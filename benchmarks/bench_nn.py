"""nn layers: forward+backward time of tinytensor vs PyTorch eager (CPU, float32), same shapes.

    python benchmarks/bench_nn.py

Prints one row per layer: median milliseconds for each library and the ratio (ours / torch).
"""

import statistics
import time

import numpy as np
import torch

import tinytensor as tt
from tinytensor import nn


def median_ms(fn, repeats=20, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def step_ours(layer, x, **kw):
    def run():
        layer.zero_grad()
        layer(x, **kw).sum().backward()

    return run


def step_torch(layer, x, **kw):
    def run():
        layer.zero_grad()
        layer(x, **kw).sum().backward()

    return run


def step_mha(layer, x, mask):
    def run():  # MultiheadAttention (torch's and ours) takes (query, key, value), returns a pair
        layer.zero_grad()
        layer(x, x, x, attn_mask=mask, need_weights=False)[0].sum().backward()

    return run


def main():
    torch.set_num_threads(2)
    B, T, D, H = 8, 128, 256, 8
    x_np = np.random.default_rng(0).standard_normal((B, T, D)).astype(np.float32)
    x_ours, x_torch = tt.tensor(x_np), torch.tensor(x_np)
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    causal_ours = tt.tensor(causal.numpy())  # PyTorch's convention: True = may not attend
    rows = [
        (
            "Linear 256->1024",
            step_ours(nn.Linear(D, 4 * D), x_ours),
            step_torch(torch.nn.Linear(D, 4 * D), x_torch),
        ),
        (
            "LayerNorm 256",
            step_ours(nn.LayerNorm(D), x_ours),
            step_torch(torch.nn.LayerNorm(D), x_torch),
        ),
        (
            "Attention causal",
            step_ours(nn.Attention(D, H), x_ours, is_causal=True),
            step_mha(torch.nn.MultiheadAttention(D, H, batch_first=True), x_torch, causal),
        ),
        (
            "MultiheadAttention causal",
            step_mha(nn.MultiheadAttention(D, H, batch_first=True), x_ours, causal_ours),
            step_mha(torch.nn.MultiheadAttention(D, H, batch_first=True), x_torch, causal),
        ),
        (
            "EncoderBlock",
            step_ours(nn.EncoderBlock(D, H, dropout=0.0), x_ours, is_causal=True),
            step_torch(
                torch.nn.TransformerEncoderLayer(D, H, 4 * D, dropout=0.0, batch_first=True),
                x_torch,
                src_mask=causal,
            ),
        ),
        (
            "TransformerEncoderLayer",
            step_ours(
                nn.TransformerEncoderLayer(D, H, 4 * D, dropout=0.0, batch_first=True),
                x_ours,
                src_mask=causal_ours,
            ),
            step_torch(
                torch.nn.TransformerEncoderLayer(D, H, 4 * D, dropout=0.0, batch_first=True),
                x_torch,
                src_mask=causal,
            ),
        ),
    ]
    print(f"forward+backward, B={B} T={T} D={D} H={H}, float32, CPU")
    print(f"{'layer':28s} {'ours ms':>9s} {'torch ms':>9s} {'ratio':>7s}")
    for name, ours, theirs in rows:
        a, b = median_ms(ours), median_ms(theirs)
        print(f"{name:28s} {a:9.2f} {b:9.2f} {a / b:7.2f}")


if __name__ == "__main__":
    main()
