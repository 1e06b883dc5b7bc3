"""The GPT training step, tinytensor against eager PyTorch, each library in its own process.

    python benchmarks/gpt_step.py                    # configs A and B at 1 and 2 threads
    python benchmarks/gpt_step.py --rounds 20 --scaling  # also tokens/s against threads
    python benchmarks/gpt_step.py --quick            # a smoke run
    python benchmarks/gpt_step.py --compare-blas     # also tinytensor with OpenBLAS, not MKL
    python benchmarks/gpt_step.py --baseline ../old  # also another checkout's tinytensor

One step = forward, cross-entropy, backward and AdamW on every parameter, float32, dropout 0.
tinytensor = `models.GPT` + `tt.optim.AdamW`; PyTorch = the same GPT-2 architecture written in
eager PyTorch (benchmarks/train_gpt_torch.py's TorchGPT) + `torch.optim.AdamW`.
  A: vocab 96, width 128, 4 layers, 4 heads, context 64, batch 16
  B: vocab 256, width 256, 6 layers, 8 heads, context 128, batch 8

Fairness:
- Each library runs in its own process (NumPy's and PyTorch's thread pools slow each other down
  when they share one), one per config and thread count, kept alive while the libraries take
  turns: a round is a few steps of each, alternating who goes first. A slow spell of a shared
  machine (here the speed drifted by tens of percent over seconds to minutes) then falls on
  all libraries alike, where a fresh process per 20-step measurement let one library's whole
  measurement land in it. The table reports the median over rounds and the spread of the
  per-round ratio, which is the noise.
- n threads means: `torch.set_num_threads(n)` for PyTorch; `tt.set_num_threads(n)` for
  tinytensor (its one pool for the fused kernels and the split matrix products), and
  OMP/OPENBLAS_NUM_THREADS=n for both. tinytensor's products call MKL when the `mkl` extra is
  installed (the header says which), else OpenBLAS; "tinytensor (OpenBLAS)" forces OpenBLAS.
- "tinytensor (NumPy ops)" runs the same model with `tt.cpu_kernels("numpy")`: the readable
  reference ops, i.e. what the fused kernels replace.
- Each process warms up with `--warmup` steps first (the fused kernels load from numba's
  on-disk cache; a first run on a machine compiles them, which the warm-up absorbs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CONFIGS = {
    "A": dict(vocab=96, d=128, n_layer=4, n_head=4, block=64, batch=16),
    "B": dict(vocab=256, d=256, n_layer=6, n_head=8, block=128, batch=8),
}
LIBS = ("torch", "tinytensor", "tinytensor-numpy")
LABELS = {
    "torch": "PyTorch",
    "tinytensor": "tinytensor",
    "tinytensor-numpy": "tt (NumPy ops)",
    "tinytensor-openblas": "tinytensor (OpenBLAS)",
    "tinytensor-baseline": "tt (baseline)",
}


def torch_gpt(config, threads):
    """The PyTorch twin for `config`, seeded, after setting PyTorch's threads (0: its default)."""
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_gpt_torch import TorchGPT

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    c = CONFIGS[config]
    return TorchGPT(c["vocab"], c["block"], c["n_layer"], c["n_head"], c["d"])


def tinytensor_gpt(config, threads):
    """`models.GPT` for `config`, seeded, after setting tinytensor's threads (0: its default,
    following the free cores)."""
    from tinytensor.models import GPT
    from tinytensor.models.gpt import GPTConfig

    import tinytensor as tt

    # a --baseline from before the kernels' pool has no set_num_threads: OMP/OPENBLAS (_env)
    if threads and hasattr(tt, "set_num_threads"):
        tt.set_num_threads(threads)
    tt.manual_seed(0)
    c = CONFIGS[config]
    return GPT(
        GPTConfig(
            vocab_size=c["vocab"],
            block_size=c["block"],
            n_layer=c["n_layer"],
            n_head=c["n_head"],
            n_embd=c["d"],
            dropout=0.0,
        )  # fmt: skip
    )


def build_step(lib, config, threads):
    """Runs in the child: builds the model and returns one training step as a function."""
    import numpy as np

    c = CONFIGS[config]
    rng = np.random.default_rng(0)
    idx = rng.integers(0, c["vocab"], (c["batch"], c["block"]))
    tgt = rng.integers(0, c["vocab"], (c["batch"], c["block"]))
    if lib == "torch":
        import torch

        model = torch_gpt(config, threads)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = torch.from_numpy(idx), torch.from_numpy(tgt)

        def step():
            opt.zero_grad()
            model(x, y).backward()
            opt.step()

    else:
        import tinytensor as tt

        model = tinytensor_gpt(config, threads)
        opt = tt.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = tt.tensor(idx), tt.tensor(tgt)
        if hasattr(tt, "cpu_kernels"):  # (a --baseline from before the fused kernels has none)
            tt.cpu_kernels("numpy" if lib == "tinytensor-numpy" else "auto").__enter__()

        def step():
            opt.zero_grad()
            model(x, y).loss.backward()
            opt.step()

    return step


def _timed(step, steps):
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(1e3 * (time.perf_counter() - start))
    return times


def worker(lib, config, threads, steps, warmup):
    """One measurement in a fresh process (`measure`): prints the median step as one JSON line."""
    step = build_step(lib, config, threads)
    _timed(step, warmup)
    print(json.dumps({"ms": statistics.median(_timed(step, steps))}))


def serve(lib, config, threads, warmup, build=None):
    """A persistent worker (`run_rounds`): builds and warms up, says "ready", then for each line
    on stdin (a step count) runs one untimed step and that many timed ones, and prints their
    times (ms) as a JSON list. `build` makes the step (another script's workloads)."""
    step = (build or build_step)(lib, config, threads)
    _timed(step, warmup)
    print("ready", flush=True)
    for line in sys.stdin:
        step()  # untimed: the other libraries' turns evicted this one's data from the caches
        print(json.dumps(_timed(step, int(line))), flush=True)


def _env(lib, threads):
    env = dict(os.environ)
    if lib == "tinytensor-openblas":
        env["TINYTENSOR_BLAS"] = "openblas"
    if lib == "tinytensor-baseline":  # another checkout's tinytensor (--baseline PATH)
        env["PYTHONPATH"] = os.environ["GPT_STEP_BASELINE"]  # baseline_checkout.pythonpath_for
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return env


def measure(lib, config, threads, steps, warmup):
    """ms/step in a fresh process; threads=0 leaves every thread setting at its default."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, config, str(threads)]
    cmd += ["--steps", str(steps), "--warmup", str(warmup)]
    out = subprocess.run(cmd, env=_env(lib, threads), capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{lib} {config} {threads} threads failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["ms"]


TURN_PAUSE = 0.05  # seconds between turns: PyTorch's OpenMP threads spin up to ~20 ms idle


class Server:
    """One library's persistent worker process for one config and thread count (`serve`)."""

    SCRIPT = os.path.abspath(__file__)  # whose `--serve` runs in the worker (gpt_generate.py's)

    def __init__(self, lib, config, threads, warmup):
        cmd = [sys.executable, self.SCRIPT, "--serve", lib, config, str(threads)]
        cmd += ["--warmup", str(warmup)]
        self.name = f"{lib} {config} {threads} threads"
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(lib, threads)
        )
        self._line()  # "ready"

    def _line(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"gpt_step: the {self.name} worker stopped (see its stderr)")
        return line

    def steps(self, n):
        time.sleep(TURN_PAUSE)  # the previous turn's OpenMP threads spin a while before sleeping
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def run_rounds(configs, thread_counts, libs, rounds, steps, warmup, server=Server):
    """{(config, threads, lib): [median ms of each round]}. For each config and thread count, one
    persistent process per library; in each round every library runs `steps` steps, taking turns
    (alternating who goes first), so a slow spell of the machine falls on all of them."""
    results = {}
    for config in configs:
        for threads in thread_counts:
            servers = {lib: server(lib, config, threads, warmup) for lib in libs}
            try:
                for r in range(rounds):
                    for lib in libs if r % 2 == 0 else tuple(reversed(libs)):
                        ms = statistics.median(servers[lib].steps(steps))
                        results.setdefault((config, threads, lib), []).append(ms)
            finally:
                for worker_process in servers.values():
                    worker_process.close()
            print(f"  config {config}, {threads} threads done", file=sys.stderr, flush=True)
    return results


def print_step_table(results, configs, thread_counts, libs, what="GPT step, ms/step"):
    print(
        f"\n{what} (median over rounds); ratios (median of the rounds' ratios, and their "
        "min-max: the noise; fastest: the ratio of each one's fastest round)"
    )
    pairs = [(lib, "torch") for lib in libs if lib != "torch"]
    if "tinytensor-baseline" in libs:  # the change itself: this checkout against the other one
        pairs.append(("tinytensor", "tinytensor-baseline"))
    names = [LABELS[lib] for lib in libs] + [f"{LABELS[a]} / {LABELS[b]}" for a, b in pairs]
    print("| config | threads | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for config in configs:
        for threads in thread_counts:
            ms = {lib: results[(config, threads, lib)] for lib in libs}
            cells = [f"{statistics.median(ms[lib]):.1f}" for lib in libs]
            ratios = [_ratio_cell(ms[a], ms[b]) for a, b in pairs]
            print(f"| {config} | {threads} | " + " | ".join(cells + ratios) + " |")


def _ratio_cell(times, reference_times):
    """The median of the per-round ratios, their spread, and the fastest rounds' ratio."""
    per_round = [a / b for a, b in zip(times, reference_times)]
    return (
        f"{statistics.median(per_round):.2f} ({min(per_round):.2f}-{max(per_round):.2f}; "
        f"fastest {min(times) / min(reference_times):.2f})"
    )


def print_scaling_table(results, config, thread_counts, libs):
    tokens = CONFIGS[config]["batch"] * CONFIGS[config]["block"]
    print(f"\ntokens/s against threads, config {config} (median over rounds)")
    print("| threads | " + " | ".join(LABELS[lib] for lib in libs) + " |")
    print("|---|" + "---|" * len(libs))
    for threads in thread_counts:
        cells = [
            f"{tokens / (statistics.median(results[(config, threads, lib)]) / 1e3):,.0f}"
            for lib in libs
        ]
        print(f"| {threads} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", nargs=3, metavar=("LIB", "CONFIG", "THREADS"))
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=12, help="turns of each library")
    parser.add_argument("--steps", type=int, default=4, help="steps per turn")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--configs", default="A,B")
    parser.add_argument("--scaling", action="store_true", help="tokens/s for 1..cores threads")
    parser.add_argument("--quick", action="store_true", help="1 round of 5 steps")
    parser.add_argument(
        "--compare-blas", action="store_true", help="also tinytensor with OpenBLAS instead of MKL"
    )
    parser.add_argument("--baseline", help="also the tinytensor of another checkout (a path)")
    args = parser.parse_args()
    if args.worker:
        lib, config, threads = args.worker
        worker(lib, config, int(threads), args.steps, args.warmup)
        return
    if args.serve:
        lib, config, threads = args.serve
        serve(lib, config, int(threads), args.warmup)
        return
    if args.quick:
        args.rounds, args.steps, args.warmup = 2, 2, 2
    configs = args.configs.split(",")
    thread_counts = [int(t) for t in args.threads.split(",")]
    import platform

    import numpy
    import torch

    from tinytensor.kernels.cpu import mkl_blas

    libs = LIBS + (("tinytensor-openblas",) if args.compare_blas else ())
    if args.baseline:
        from baseline_checkout import pythonpath_for

        os.environ["GPT_STEP_BASELINE"] = pythonpath_for(args.baseline)
        libs += ("tinytensor-baseline",)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; numpy {numpy.__version__}, torch {torch.__version__}; "
          f"tinytensor's products: {mkl_blas.name()}; "
          f"{args.rounds} rounds x {args.steps} steps per library (median step)")  # fmt: skip
    results = run_rounds(configs, thread_counts, libs, args.rounds, args.steps, args.warmup)
    print_step_table(results, configs, thread_counts, libs)
    if args.scaling:
        cores = os.cpu_count() or 1
        counts = list(range(1, cores + 1))
        extra = [t for t in counts if t not in thread_counts]
        if extra:
            more = run_rounds(configs[:1], extra, LIBS, args.rounds, args.steps, args.warmup)
            results.update(more)
        print_scaling_table(results, configs[0], counts, LIBS)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
