"""DataLoader throughput: tinytensor.utils.data against torch.utils.data, each in its own process.

    python benchmarks/bench_dataloader.py [--samples 20000] [--batch-size 64] [--workers 0 2]

Two pipelines, timed over one epoch each (after one warm-up epoch) and printed side by side with
the ratio (ours / torch; below 1 is faster):
    tensor:  TensorDataset of (samples, 32) float32 features and int64 labels, shuffled
    python:  a map-style dataset whose __getitem__ builds a dict of a NumPy array and an int
             (the per-sample Python work that makes worker processes worth having)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")


def run(lib_name, samples, batch_size, workers):
    """One library's timings (seconds per epoch) for every pipeline and worker count."""
    import numpy as np

    if lib_name == "torch":
        import torch as lib

        lib.set_num_threads(1)
    else:
        import tinytensor as lib
    data = lib.utils.data

    class Records(data.Dataset):
        def __len__(self):
            return samples

        def __getitem__(self, i):
            features = np.sin(np.arange(32, dtype=np.float32) * (i % 97))
            return {"x": features, "y": i % 10}

    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((samples, 32)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 10, samples))
    pipelines = {"tensor": data.TensorDataset(x, y), "python": Records()}
    times = {}
    for name, dataset in pipelines.items():
        for n in workers:
            lib.manual_seed(0)
            loader = data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=n)
            for _ in loader:  # warm-up (and worker start-up costs of the first epoch)
                pass
            start = time.perf_counter()
            for _ in loader:
                pass
            times[f"{name}, num_workers={n}"] = time.perf_counter() - start
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--lib", help=argparse.SUPPRESS)  # the child process's library
    args = parser.parse_args()
    if args.lib:
        print(json.dumps(run(args.lib, args.samples, args.batch_size, args.workers)))
        return
    results = {}
    for lib in ("tinytensor", "torch"):
        sizes = ["--samples", str(args.samples), "--batch-size", str(args.batch_size)]
        cmd = [sys.executable, __file__, "--lib", lib, *sizes, "--workers", *map(str, args.workers)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        results[lib] = json.loads(out.strip().splitlines()[-1])
    print(f"{args.samples} samples, batch {args.batch_size}, seconds per epoch")
    print(f"{'pipeline':<28} {'tinytensor':>11} {'torch':>9} {'ratio':>7}")
    for key, ours in results["tinytensor"].items():
        theirs = results["torch"][key]
        print(f"{key:<28} {ours:>11.3f} {theirs:>9.3f} {ours / theirs:>7.2f}")


if __name__ == "__main__":
    main()
