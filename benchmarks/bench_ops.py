"""Per-op overhead of tinytensor vs PyTorch eager on the CPU: forward + backward on small tensors.

    python benchmarks/bench_ops.py              # the full table (a few minutes)
    python benchmarks/bench_ops.py --quick      # fewer repeats, for a smoke run
    python benchmarks/bench_ops.py --only add,matmul
    python benchmarks/bench_ops.py --repeats 15       # more interleaved repeats (default 15)
    python benchmarks/bench_ops.py --baseline ../old  # also another checkout's tinytensor

At these sizes the arithmetic costs next to nothing, so the time per op is the framework's own
overhead: building the graph node, wrapping outputs, walking the graph backwards and accumulating
leaf gradients. Each case runs forward, then backward with an explicit output gradient (so no
extra `sum` node is timed), then clears the leaves' `.grad`, identically in both libraries.

Fairness:
- Each library runs in its own process (NumPy's and PyTorch's thread pools and allocators slow
  each other in one process: single calls of 300 µs and more showed up there). The processes
  stay alive and take turns at a fine grain: one measurement (a few milliseconds) of one case in
  one library, then the same in the other, alternating which goes first. On a shared machine
  whose speed drifts by tens of percent over seconds to minutes, both libraries then see the
  same drift; each number is the best over the repeats (the usual `timeit` practice: the
  minimum is the least disturbed). Whole-suite rounds per process, as before, let one library's
  round fall into a slow minute and moved the geometric means by 0.3 between runs.
- Each library runs in `--processes` processes (3 by default), which take the library's turns
  in rotation; its number is the best over all of them. One process can be steadily faster or
  slower than another running the same code (where its arrays and objects landed in memory):
  two processes of one checkout, timed this way, differed by up to 15% on single 16x16 ops.
- `--baseline PATH` runs a third worker on the tinytensor of another checkout (with its own nn
  and models: benchmarks/baseline_checkout.py),
  interleaved the same way, and adds a column: this tinytensor's time over that one's.
- One thread each: PyTorch runs with `torch.set_num_threads(1)` and OpenBLAS (NumPy's matmul)
  with OPENBLAS_NUM_THREADS=1 unless set otherwise. NumPy's elementwise kernels are
  single-threaded anyway; at these sizes threads only add synchronization, and on a busy 2-core
  machine OpenBLAS's threads made small matmuls several times slower.
- Both libraries compute in float32 on the same shapes.
- OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, where the machine sets them, slow NumPy's BLAS; they are
  reported in the header rather than changed, since tinytensor users run with them too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads OpenBLAS: see above

import numpy as np  # noqa: E402
from baseline_checkout import pythonpath_for  # noqa: E402

import tinytensor as tt  # noqa: E402

torch = None  # imported only in the PyTorch worker process (see Fairness)
ttF = tt.nn.functional

N = 16  # side of the small square tensors
BATCH, IN, HIDDEN, CLASSES = 32, 16, 64, 4  # the MLP training step


def _best_time_us(fn, number, repeat):
    """Best-of-`repeat` mean time of `fn()` in microseconds, over `number` calls each."""
    for _ in range(max(3, number // 10)):  # warm-up: caches, lazy imports, allocator pools
        fn()
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6


# ---- the op cases: (name, builder) where builder(lib) -> a zero-argument step function -------


def _leaves(lib, *shapes):
    """float32 leaves with requires_grad, from the same seeded NumPy data for both libraries."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if lib is torch:
        return [torch.tensor(a, requires_grad=True) for a in arrays]
    return [tt.tensor(a, requires_grad=True) for a in arrays]


def _step(lib, forward, leaves):
    """(forward only, forward + backward with an explicit output gradient + clearing grads);
    the worker times the forward twice, recording the graph and under no_grad."""
    out = forward(*leaves)
    seed = lib.ones_like(out)

    def forward_only():
        forward(*leaves)

    def step():
        y = forward(*leaves)
        y.backward(seed)
        for t in leaves:
            t.grad = None

    return forward_only, step


def _unary(name, fn_of, shape=(N, N)):
    """A one-input case; `fn_of(lib)` gives the function (the same code for both libraries)."""

    def build(lib):
        return _step(lib, fn_of(lib), _leaves(lib, shape))

    return name, build


def _binary(name, fn, shapes=((N, N), (N, N))):
    def build(lib):
        return _step(lib, fn, _leaves(lib, *shapes))

    return name, build


def _linear_case():
    def build(lib):
        F = torch.nn.functional if lib is torch else ttF
        return _step(lib, F.linear, _leaves(lib, (N, N), (N, N), (N,)))

    return "linear", build


def _layer_norm_case():
    def build(lib):
        F = torch.nn.functional if lib is torch else ttF
        forward = lambda x, w, b: F.layer_norm(x, (N,), w, b)  # noqa: E731
        return _step(lib, forward, _leaves(lib, (N, N), (N,), (N,)))

    return "layer_norm", build


def _cross_entropy_case():
    def build(lib):
        F = torch.nn.functional if lib is torch else ttF
        ids = np.arange(N) % N
        target = torch.tensor(ids) if lib is torch else tt.tensor(ids)
        forward = lambda z: F.cross_entropy(z, target)  # noqa: E731
        return _step(lib, forward, _leaves(lib, (N, N)))

    return "cross_entropy", build


def _cat_case():
    def build(lib):
        return _step(lib, lambda a, b: lib.cat([a, b], dim=0), _leaves(lib, (N, N), (N, N)))

    return "cat", build


CHAIN = 16  # (mul, tanh) pairs in the chain case: 32 graph nodes under one backward call


def _chain_case():
    """32 ops under one backward: amortizes each library's fixed cost per backward() call, so
    the ratio shows the cost per graph node (the single-op cases above include that fixed cost)."""

    def forward(x, a):
        for _ in range(CHAIN):
            x = (x * a).tanh()
        return x

    def build(lib):
        return _step(lib, forward, _leaves(lib, (N, N), (N, N)))

    return f"chain of {2 * CHAIN} ops", build


CASES = [
    _binary("add", lambda a, b: a + b),
    _binary("add (scalar)", lambda a: a + 1.0, shapes=((N, N),)),
    _binary("add (broadcast)", lambda a, b: a + b, shapes=((N, N), (N,))),
    _binary("mul", lambda a, b: a * b),
    _binary("matmul", lambda a, b: a @ b),
    _unary("relu", lambda lib: lib.relu),
    _unary("gelu", lambda lib: lib.nn.functional.gelu),
    _unary("softmax", lambda lib: lambda x: lib.softmax(x, -1)),
    _unary("log_softmax", lambda lib: lambda x: lib.log_softmax(x, -1)),
    _unary("sum", lambda lib: lambda x: x.sum()),
    _unary("mean (dim)", lambda lib: lambda x: x.mean(1)),
    _layer_norm_case(),
    _linear_case(),
    _cross_entropy_case(),
    _unary("reshape", lambda lib: lambda x: x.reshape(-1)),
    _unary("transpose", lambda lib: lambda x: x.transpose(0, 1)),
    _unary("getitem", lambda lib: lambda x: x[1:5, ::2]),
    _cat_case(),
    _chain_case(),
]


# ---- one training step of a small MLP ---------------------------------------------------------


def _mlp_step(lib):
    """A 2-layer MLP (IN -> HIDDEN -> CLASSES), batch BATCH: forward, cross-entropy, backward,
    and a plain SGD update under no_grad (`p._array -= lr * grad`, in place; grads cleared)."""
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((BATCH, IN)).astype(np.float32)
    y_np = rng.integers(0, CLASSES, BATCH)
    shapes = [(HIDDEN, IN), (HIDDEN,), (CLASSES, HIDDEN), (CLASSES,)]
    params = _leaves(lib, *shapes)
    if lib is torch:
        F, x, y = torch.nn.functional, torch.tensor(x_np), torch.tensor(y_np)
    else:
        F, x, y = ttF, tt.tensor(x_np), tt.tensor(y_np)
    w1, b1, w2, b2 = params
    lr = 0.01

    def forward():
        h = F.relu(F.linear(x, w1, b1))
        return F.cross_entropy(F.linear(h, w2, b2), y)

    def step():
        loss = forward()
        loss.backward()
        with lib.no_grad():
            for p in params:
                p.data -= lr * p.grad.data
                p.grad = None

    return forward, step


# ---- report -----------------------------------------------------------------------------------


def _header(torch_version, torch_threads):
    blas = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")}
    return (
        f"python {platform.python_version()}, numpy {np.__version__}, torch {torch_version} "
        f"(threads={torch_threads}), tinytensor {tt.__version__}; OPENBLAS env: {blas or 'unset'}"
    )


def _cases(only):
    cases = CASES + [("MLP train step", _mlp_step)]
    if only:
        wanted = {w.strip() for w in only.split(",")}
        cases = [c for c in cases if c[0] in wanted]
    return cases


MODES = ("forward (graph)", "forward, no_grad", "forward + backward")


def serve(lib_name, only, quick):
    """The worker: builds every case, then answers requests from the driver, one per line on
    stdin ("case index, mode index"), with one measurement in µs per line on stdout."""
    global torch
    if lib_name == "torch":
        import torch as torch_module

        torch = torch_module
        torch.set_num_threads(1)
        lib = torch
        print(json.dumps([torch.__version__, torch.get_num_threads()]), flush=True)
    else:
        lib = tt
        print(json.dumps([tt.__version__, None]), flush=True)
    number = 100 if quick else 500
    steps = []
    for _, build in _cases(only):
        forward_only, step = build(lib)
        for fn in (forward_only, step):  # warm-up: caches, lazy imports, allocator pools
            for _ in range(max(3, number // 10)):
                fn()
        steps.append((forward_only, step))
    for line in sys.stdin:
        case, mode = map(int, line.split())
        forward_only, step = steps[case]
        if mode == 1:  # inference: generation and evaluation record no graph
            with lib.no_grad():
                print(_best_time_us(forward_only, number, 1), flush=True)
        else:
            print(_best_time_us(step if mode == 2 else forward_only, number, 1), flush=True)


class _Worker:
    """One library's serving process (see `serve`)."""

    def __init__(self, lib_name, args, pythonpath=None):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib_name]
        cmd += ["--only", args.only] + (["--quick"] if args.quick else [])
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath_for(pythonpath)  # its nn and models too
        self.name = lib_name if not pythonpath else f"baseline ({pythonpath})"
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        self.about = json.loads(self._line())

    def _line(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"bench_ops: the {self.name} worker stopped (see its stderr)")
        return line

    def measure(self, case, mode):
        self.proc.stdin.write(f"{case} {mode}\n")
        self.proc.stdin.flush()
        return float(self._line())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    parser.add_argument("--only", default="", help="comma-separated case names to run")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved measurements each")
    parser.add_argument("--baseline", help="another checkout whose tinytensor to compare")
    parser.add_argument(
        "--processes", type=int, default=3, help="worker processes per library (see Fairness)"
    )
    parser.add_argument("--worker", choices=("torch", "tinytensor"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return serve(args.worker, args.only, args.quick)

    processes = max(1, args.processes)
    libraries = [("torch", None), ("tinytensor", None)]
    if args.baseline:
        libraries.append(("tinytensor", args.baseline))
    # groups[i]: library i's processes, which take its turns in rotation
    groups = [[_Worker(name, args, path) for _ in range(processes)] for name, path in libraries]
    cases = _cases(args.only)
    best = [[[math.inf] * len(MODES) for _ in cases] for _ in groups]
    repeats = 2 if args.quick else max(1, args.repeats)
    for r in range(repeats):
        for c in range(len(cases)):
            for m in range(len(MODES)):
                for k in range(len(groups)):  # who goes first rotates too
                    i = (r + k) % len(groups)
                    worker = groups[i][r % processes]
                    best[i][c][m] = min(best[i][c][m], worker.measure(c, m))
    for group in groups:
        for w in group:
            w.close()

    print(_header(*groups[0][0].about))
    print(f"microseconds per call, {N}x{N} float32 (MLP: batch {BATCH}, hidden {HIDDEN}); best of")
    print(
        f"{repeats} measurements interleaved between the libraries, each library's taken in turn "
        f"by {processes} processes"
    )
    print(f"{'':<16}" + "".join(f" {'-- ' + g + ' --':>23}" for g in MODES))
    print(f"{'case':<16}" + f"{'torch':>8}{'tt':>8}{'tt/pt':>8}" * len(MODES))
    ratios = [[] for _ in MODES]
    for c, (name, _) in enumerate(cases):
        row = f"{name:<16}"
        for m in range(len(MODES)):
            t_torch, t_tt = best[0][c][m], best[1][c][m]
            ratios[m].append(t_tt / t_torch)
            row += f"{t_torch:>8.1f}{t_tt:>8.1f}{ratios[m][-1]:>8.2f}"
        print(row)
    print(f"{'geometric mean':<16}" + "".join(f"{_geomean(r):>24.2f}" for r in ratios))
    if args.baseline:
        print(f"\nthis tinytensor / the baseline's ({args.baseline}), same measurements:")
        print(f"{'case':<16}" + "".join(f"{m:>20}" for m in MODES))
        against = [[] for _ in MODES]
        for c, (name, _) in enumerate(cases):
            row = f"{name:<16}"
            for m in range(len(MODES)):
                against[m].append(best[1][c][m] / best[2][c][m])
                row += f"{best[2][c][m]:>8.1f} ->{best[1][c][m]:>6.1f}{against[m][-1]:>6.2f}"
            print(row)
        print(f"{'geometric mean':<16}" + "".join(f"{_geomean(r):>20.2f}" for r in against))
        baseline_vs_torch = [
            _geomean([best[2][c][m] / best[0][c][m] for c in range(len(cases))])
            for m in range(len(MODES))
        ]
        print(f"{'baseline / torch':<16}" + "".join(f"{g:>20.2f}" for g in baseline_vs_torch))


def _geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


if __name__ == "__main__":
    main()
