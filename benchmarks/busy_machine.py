"""The GPT step (config A) on a machine with one core kept busy by another process, against the
same step on the quiet machine: what a shared or busy machine costs each thread setting.

    python benchmarks/busy_machine.py            # ~2 minutes
    python benchmarks/busy_machine.py --rounds 3

Settings: "1 thread" and "all cores" fixed with tt.set_num_threads; "default" is tinytensor's
own choice (every free core, fewer while the machine is busy: kernels/cpu/threads.py);
"before" is the NumPy reference ops with one BLAS thread, the training scripts' old default.
The busy process is a Python busy loop pinned to the last core; it is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_step import measure  # noqa: E402

CORES = os.cpu_count() or 1
SETTINGS = {  # name: (library, threads; 0 = the library's default)
    "before (NumPy ops, 1 BLAS thread)": ("tinytensor-numpy", 1),
    "tinytensor, 1 thread": ("tinytensor", 1),
    f"tinytensor, {CORES} threads": ("tinytensor", CORES),
    "tinytensor, default (follows the load)": ("tinytensor", 0),
    f"PyTorch, {CORES} threads": ("torch", CORES),
}


def start_busy_loop():
    code = f"import os; os.sched_setaffinity(0, {{{CORES - 1}}}); exec('while True: pass')"
    return subprocess.Popen([sys.executable, "-c", code])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=15)
    args = parser.parse_args()
    results = {}
    for r in range(args.rounds):
        for busy in (False, True):
            loop = start_busy_loop() if busy else None
            try:
                for name, (lib, threads) in SETTINGS.items():
                    ms = measure(lib, "A", threads, args.steps, 3)
                    results.setdefault((name, busy), []).append(ms)
            finally:
                if loop is not None:
                    loop.kill()
                    loop.wait()
        print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"\nGPT step, config A, ms/step (median of {args.rounds} rounds); {CORES} cores, "
          f"load average now {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| setting | quiet machine | one core busy | busy / quiet |")
    print("|---|---|---|---|")
    for name in SETTINGS:
        quiet = statistics.median(results[(name, False)])
        busy = statistics.median(results[(name, True)])
        print(f"| {name} | {quiet:.1f} | {busy:.1f} | {busy / quiet:.2f} |")


if __name__ == "__main__":
    main()
