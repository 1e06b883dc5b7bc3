"""Greedy generation, tinytensor against eager PyTorch, each library in its own process.

    python benchmarks/gpt_generate.py               # configs A and B, KV cache, 1 thread
    python benchmarks/gpt_generate.py --no-cache    # re-run the whole sequence per token
    python benchmarks/gpt_generate.py --baseline ../old --rounds 16

A turn generates a sequence from a 1-token prompt, batch 1, until the context is full (63 new
tokens for config A, 127 for B; the configs are gpt_step.py's), and reports ms per token.
- With the KV cache (the default) each token goes through the model alone: every op works on one
  row (a (1, 1, 256) activation, a 256-long bias), so the time is mostly each op's fixed cost,
  what generation and evaluation pay per op (issue 13, item 4).
- `--no-cache` re-runs the whole sequence for every token, as nanoGPT's `generate` does: the
  ops grow from 1 to 128 rows.

tinytensor: `models.GPT.generate` (greedy, `use_cache` as asked), under no_grad and eval.
PyTorch: the same GPT-2 architecture (train_gpt_torch.py's TorchGPT, whose blocks keep a
KV cache the usual way: torch.cat of the new keys and values) in the same greedy loop, under
torch.no_grad and eval. The models' weights differ (each library's own seeded init), so their
tokens differ; the work per token does not. Turns alternate as in gpt_step.py; one thread
(`--threads` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import gpt_step
from gpt_step import CONFIGS, print_step_table, run_rounds, tinytensor_gpt, torch_gpt

LIBS = ("torch", "tinytensor")


def build_generation(lib, config, threads, use_cache):
    """Runs in the child: builds the model; returns (generate a sequence, tokens it makes)."""
    import numpy as np

    c = CONFIGS[config]
    new_tokens = c["block"] - 1
    prompt = np.zeros((1, 1), np.int64)
    if lib == "torch":
        import torch

        model = torch_gpt(config, threads).eval()

        @torch.no_grad()
        def generate():
            ids = torch.from_numpy(prompt)
            caches = [[] for _ in model.blocks] if use_cache else None
            fresh = ids
            for _ in range(new_tokens):
                logits = model.logits(fresh if use_cache else ids, caches)
                fresh = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                ids = torch.cat([ids, fresh], dim=1)
            return ids

    else:
        import tinytensor as tt

        model = tinytensor_gpt(config, threads).eval()
        ids = tt.tensor(prompt)

        def generate():
            return model.generate(ids, new_tokens, use_cache=use_cache)

    return generate, new_tokens


def serve(lib, config, threads, warmup):
    """gpt_step.serve's protocol: for each line on stdin (a count n), one untimed sequence and n
    timed ones; prints each one's ms per token as a JSON list."""
    generate, tokens = build_generation(lib, config, threads, os.environ["GENERATE_CACHE"] == "1")
    for _ in range(warmup):
        generate()
    print("ready", flush=True)
    for line in sys.stdin:
        generate()
        times = []
        for _ in range(int(line)):
            start = time.perf_counter()
            generate()
            times.append(1e3 * (time.perf_counter() - start) / tokens)
        print(json.dumps(times), flush=True)


class Server(gpt_step.Server):
    SCRIPT = os.path.abspath(__file__)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--no-cache", action="store_true", help="re-run the sequence per token")
    parser.add_argument("--rounds", type=int, default=10, help="turns of each library")
    parser.add_argument("--sequences", type=int, default=2, help="sequences per turn")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", default="1", help="comma-separated thread counts")
    parser.add_argument("--configs", default="A,B")
    parser.add_argument("--baseline", help="also the tinytensor of another checkout (a path)")
    args = parser.parse_args()
    if args.serve:
        lib, config, threads = args.serve
        serve(lib, config, int(threads), args.warmup)
        return
    os.environ["GENERATE_CACHE"] = "0" if args.no_cache else "1"  # the workers inherit it
    libs = LIBS
    if args.baseline:
        from baseline_checkout import pythonpath_for

        os.environ["GPT_STEP_BASELINE"] = pythonpath_for(args.baseline)
        libs += ("tinytensor-baseline",)
    configs = args.configs.split(",")
    thread_counts = [int(t) for t in args.threads.split(",")]
    import platform

    mode = "no cache: the whole sequence per token" if args.no_cache else "KV cache"
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; {args.rounds} rounds x {args.sequences} sequences per "
          f"library; {mode}")  # fmt: skip
    results = run_rounds(
        configs, thread_counts, libs, args.rounds, args.sequences, args.warmup, server=Server
    )
    print_step_table(results, configs, thread_counts, libs, what="greedy generation, ms/token")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
