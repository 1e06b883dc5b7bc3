"""Predicted data-parallel step time and scaling efficiency of the GPT configs, from a ring
all-reduce cost model and compute times measured here (docs/distributed_cost_model.md).

    python benchmarks/distributed_cost_model.py              # ~2 minutes (GPT-2 small steps)
    python benchmarks/distributed_cost_model.py --skip-gpt2  # the main job only

Model (per step, N ranks, G bytes of float32 gradients in k buckets, link bandwidth B, per-
message latency a): ring all-reduce = reduce-scatter + all-gather, 2(N-1) steps each moving
G/N bytes per rank:  T_comm = 2(N-1)/N * G/B + 2(N-1) * a * k.
Step time without overlap: T = T_compute + T_comm; with DDP's overlap at best
T = T_compute + max(0, T_comm - T_backward) (communication hidden behind backward, taken as
2/3 of compute). Efficiency = T_compute / T.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from tinytensor.models.gpt import GPT, GPTConfig

import tinytensor as tt

NETWORKS = {  # name: (bandwidth in bytes/s, latency per message in s)
    "10 Gbit/s": (10e9 / 8, 25e-6),  # Ethernet with TCP: ~25 us per message
    "100 Gbit/s": (100e9 / 8, 3e-6),  # InfiniBand/RoCE with RDMA: ~3 us
}
RANKS = (8, 64, 512)
BUCKET_CAP = 25 * 2**20  # DDP's default; the first bucket holds 1 MiB
BACKWARD_SHARE = 2 / 3  # backward ~ 2x forward FLOPs: the part communication can hide behind


def buckets(grad_bytes: int) -> int:
    return 1 + (max(0, grad_bytes - 2**20) + BUCKET_CAP - 1) // BUCKET_CAP


def ring_allreduce_seconds(n: int, grad_bytes: int, bandwidth: float, latency: float) -> float:
    return 2 * (n - 1) / n * grad_bytes / bandwidth + 2 * (n - 1) * latency * buckets(grad_bytes)


def duration(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def measure_step(config: GPTConfig, batch: int, steps: int) -> tuple[float, int]:
    """Median seconds of forward + backward + AdamW at (batch, block_size) tokens, parameters."""
    tt.manual_seed(0)
    model = GPT(config)
    opt = tt.optim.AdamW(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    times = []
    for step in range(steps + 1):
        x = rng.integers(0, config.vocab_size, size=(batch, config.block_size))
        start = time.perf_counter()
        opt.zero_grad()
        model(tt.tensor(x), tt.tensor(np.roll(x, -1, axis=1))).loss.backward()
        opt.step()
        if step:  # the first step allocates
            times.append(time.perf_counter() - start)
    return float(np.median(times)), sum(p.numel() for p in model.parameters())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-gpt2", action="store_true", help="only the main job's model")
    args = parser.parse_args()
    rows = []  # (name, params, tokens per rank per step, compute seconds, how)
    main_config = GPTConfig(vocab_size=103, block_size=64, n_layer=4, n_head=4, n_embd=128,
                            dropout=0.0, bos_token_id=None, eos_token_id=None)  # fmt: skip
    seconds, params = measure_step(main_config, batch=32, steps=10)
    rows.append(("main job (train_gpt.py)", params, 32 * 64, seconds, "measured, 32x64"))
    if not args.skip_gpt2:
        small = GPTConfig(vocab_size=50257, block_size=256, n_layer=12, n_head=12, n_embd=768,
                          dropout=0.0)  # fmt: skip
        seconds, params = measure_step(small, batch=1, steps=2)
        per_token = seconds / 256  # NOTE: at T=256; at T=1024 attention adds ~10% more
        rows.append(("GPT-2 small (124M)", params, 8 * 1024, per_token * 8 * 1024,
                     "measured 1x256, scaled to 8x1024"))  # fmt: skip
        # GPT-2 medium: the same time per parameter and token (~6 FLOPs each)
        medium_params = 354_823_168
        rows.append(("GPT-2 medium (355M)", medium_params, 8 * 1024,
                     per_token * 8 * 1024 * medium_params / params,
                     "GPT-2 small's s/(param*token)"))  # fmt: skip
    print("compute per step on one rank (this machine, 1 BLAS thread):")
    for name, params, tokens, seconds, how in rows:
        grad_bytes = 4 * params
        print(f"  {name:<24} {params / 1e6:8.2f}M params, {grad_bytes / 2**20:8.1f} MiB of "
              f"gradients in {buckets(grad_bytes)} bucket(s), {tokens} tokens/rank: "
              f"{duration(seconds)} ({how})")  # fmt: skip
    # NOTE: the same models with compute 100x faster per rank (a GPU-class rank; hypothetical,
    # not measured) show where the network starts to matter.
    rows += [(f"{name}, compute / 100", params, tokens, seconds / 100, "")
             for name, params, tokens, seconds, _ in rows]  # fmt: skip
    print("\npredicted step time and scaling efficiency: no overlap / best overlap (markdown)")
    print("| model | network | " + " | ".join(f"{n} ranks" for n in RANKS) + " |")
    print("|---|---|" + "---|" * len(RANKS))
    for name, params, _, seconds, _ in rows:
        for network, (bandwidth, latency) in NETWORKS.items():
            cells = []
            for n in RANKS:
                comm = ring_allreduce_seconds(n, 4 * params, bandwidth, latency)
                plain = seconds + comm
                overlapped = seconds + max(0.0, comm - BACKWARD_SHARE * seconds)
                cells.append(f"{duration(plain)} {seconds / plain:.0%} / "
                             f"{duration(overlapped)} {seconds / overlapped:.0%}")  # fmt: skip
            print(f"| {name} | {network} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
