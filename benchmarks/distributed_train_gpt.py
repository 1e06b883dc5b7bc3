"""The main job's throughput data-parallel: `mpiexec -n 2` (1 BLAS thread each) vs 1 process.

    python benchmarks/distributed_train_gpt.py                # ~5 minutes
    python benchmarks/distributed_train_gpt.py --steps 60 --repeats 3

Runs examples/train_gpt.py as a user would (default model; no evaluation, plot or checkpoint
until the end) and reads the training loop's steady tokens/s from its metrics.json (after the
first step, which loads the compiled kernels: about 2 s in every process, which would weigh more
on the shorter 2-rank runs):
  strong scaling   the same --batch-size 32: 1 process, or 2 ranks of 16 (the same training)
  weak scaling     32 sequences per process: 1 process, or 2 ranks of 32 (--batch-size 64)
Runs alternate (1, 2, 1, 2, ...) so that load from other users of the machine hits both; the
table gives the median and the spread of `--repeats` runs of each, and the speedup of the
medians and of the best runs (the best is the least disturbed, as in `timeit`: on a shared
machine it is the closest to what an idle one gives).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "examples", "train_gpt.py")


def tokens_per_second(ranks: int, batch_size: int, steps: int) -> float:
    from tinytensor.distributed.run import find_mpiexec

    with tempfile.TemporaryDirectory() as out:
        flags = ["--steps", str(steps), "--batch-size", str(batch_size), "--eval-every",
                 "100000", "--checkpoint-every", "100000", "--no-progress", "--no-plot",
                 "--sample-chars", "1", "--out-dir", out]  # fmt: skip
        launcher = [] if ranks == 1 else [find_mpiexec(), "-n", str(ranks)]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        subprocess.run([*launcher, sys.executable, SCRIPT, *flags], check=True, env=env,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        with open(os.path.join(out, "metrics.json")) as f:
            return json.load(f)["steady_tokens_per_second"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cases = {"strong (32 = 2 x 16)": (32, 32), "weak (32 per process)": (32, 64)}
    print(f"examples/train_gpt.py, {args.steps} steps, steady tokens/s of the training loop "
          f"(median of {args.repeats}; min-max)")  # fmt: skip
    print(f"{'scaling':<24} {'1 process':>20} {'2 ranks x 1 thread':>22} {'speedup':>8} "
          f"{'of the best':>11}")  # fmt: skip
    for name, (batch_one, batch_two) in cases.items():
        one, two = [], []
        for _ in range(args.repeats):
            one.append(tokens_per_second(1, batch_one, args.steps))
            two.append(tokens_per_second(2, batch_two, args.steps))
        m1, m2 = statistics.median(one), statistics.median(two)
        spread1, spread2 = (
            f"({min(one):,.0f}-{max(one):,.0f})",
            f"({min(two):,.0f}-{max(two):,.0f})",
        )
        print(f"{name:<24} {m1:>8,.0f} {spread1} {m2:>10,.0f} {spread2} {m2 / m1:>7.2f}x "
              f"{max(two) / max(one):>10.2f}x", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
