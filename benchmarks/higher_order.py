"""Second-order steps, tinytensor against eager PyTorch, each library in its own process.

    python benchmarks/higher_order.py              # every workload at 1 and 2 threads
    python benchmarks/higher_order.py --quick      # a smoke run

Workloads (float32):
  mlp-hvp  a Hessian-vector product of an MLP's loss (2 → 256 → 256 → 1, tanh, batch 512):
           g = ∂L/∂θ with create_graph, then ∂(g·v)/∂θ
  mlp-gp   one WGAN-GP critic step on that MLP: D(fake) − D(real) + 10·(‖∂D/∂x̂‖ − 1)² on
           random interpolates, backward through the penalty's gradient, Adam
  gpt-hvp  a Hessian-vector product of the tiny GPT's loss (gpt_step.py's config A)
  gpt-gp   one step of the tiny GPT with a gradient-norm penalty, L + 0.01·‖∂L/∂θ‖², AdamW

PyTorch's fused CPU attention has no double backward, so its GPT runs under
`sdpa_kernel(SDPBackend.MATH)` (what a PyTorch program has to do); the turns, processes and
ratios are gpt_step.py's (see its Fairness).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpt_step  # noqa: E402
from gpt_step import print_step_table, run_rounds, tinytensor_gpt, torch_gpt  # noqa: E402

WORKLOADS = ("mlp-hvp", "mlp-gp", "gpt-hvp", "gpt-gp")
LIBS = ("torch", "tinytensor")
WIDTH, BATCH = 256, 512


def _mlp(nn):
    return nn.Sequential(
        nn.Linear(2, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, 1)
    )


def _library(lib, threads):
    if lib == "torch":
        import torch

        if threads:
            torch.set_num_threads(threads)
        return torch
    import tinytensor as torch

    if threads:
        torch.set_num_threads(threads)
    return torch


def _like(torch, rng, p):
    """A random direction of p's shape (float32)."""
    return torch.tensor(rng.standard_normal(tuple(p.shape)).astype("float32"))


def _hvp_step(torch, loss_fn, params, v):
    def step():
        loss = loss_fn()
        g = torch.autograd.grad(loss, params, create_graph=True)
        dot = sum((gi * vi).sum() for gi, vi in zip(g, v))
        torch.autograd.grad(dot, params)

    return step


def build_step(lib, workload, threads):
    """Runs in the child: builds the workload and returns one step as a function."""
    import numpy as np

    torch = _library(lib, threads)
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    if workload.startswith("mlp"):
        model = _mlp(torch.nn)
        params = list(model.parameters())
        x = torch.tensor(rng.standard_normal((BATCH, 2)).astype(np.float32))
        y = torch.tensor(rng.standard_normal((BATCH, 1)).astype(np.float32))
        if workload == "mlp-hvp":
            v = [
                torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)) for p in params
            ]
            return _hvp_step(torch, lambda: ((model(x) - y) ** 2).mean(), params, v)
        fake = torch.tensor(rng.standard_normal((BATCH, 2)).astype(np.float32))
        eps = torch.tensor(rng.random((BATCH, 1)).astype(np.float32))
        opt = torch.optim.Adam(params, lr=1e-4, betas=(0.5, 0.9))

        def gp_step():
            opt.zero_grad()
            mixed = (eps * x + (1 - eps) * fake).requires_grad_(True)
            (grad,) = torch.autograd.grad(model(mixed).sum(), mixed, create_graph=True)
            penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean()
            (model(fake).mean() - model(x).mean() + 10 * penalty).backward()
            opt.step()

        return gp_step
    model = (torch_gpt if lib == "torch" else tinytensor_gpt)("A", threads)
    c = gpt_step.CONFIGS["A"]
    idx = torch.tensor(rng.integers(0, c["vocab"], (c["batch"], c["block"])))
    tgt = torch.tensor(rng.integers(0, c["vocab"], (c["batch"], c["block"])))
    params = list(model.parameters())
    if lib == "torch":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def loss_fn():
            with sdpa_kernel(SDPBackend.MATH):
                return model(idx, tgt)
    else:

        def loss_fn():
            return model(idx, tgt).loss

    if workload == "gpt-hvp":
        v = [_like(torch, rng, p) for p in params]
        return _hvp_step(torch, loss_fn, params, v)
    opt = torch.optim.AdamW(params, lr=1e-3)

    def penalty_step():
        opt.zero_grad()
        loss = loss_fn()
        g = torch.autograd.grad(loss, params, create_graph=True)
        (loss + 0.01 * sum((gi * gi).sum() for gi in g)).backward()
        opt.step()

    return penalty_step


class Server(gpt_step.Server):
    SCRIPT = os.path.abspath(__file__)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=8, help="turns of each library")
    parser.add_argument("--steps", type=int, default=3, help="steps per turn")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--quick", action="store_true", help="2 rounds of 2 steps")
    args = parser.parse_args()
    if args.serve:
        lib, workload, threads = args.serve
        gpt_step.serve(lib, workload, int(threads), args.warmup, build=build_step)
        return
    if args.quick:
        args.rounds, args.steps, args.warmup = 2, 2, 1
    workloads = args.workloads.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    from tinytensor.kernels.cpu import machine

    print(machine.describe())
    print(f"{args.rounds} rounds x {args.steps} steps per library (median step)")
    results = run_rounds(workloads, threads, LIBS, args.rounds, args.steps, args.warmup, Server)
    print_step_table(results, workloads, threads, LIBS, what="second-order step, ms/step")


if __name__ == "__main__":
    main()
