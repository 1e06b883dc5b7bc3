"""MAML (Finn, Abbeel & Levine 2017, "Model-Agnostic Meta-Learning for Fast Adaptation of Deep
Networks") on the paper's sine-wave regression.

    python examples/maml_sine.py                   # ~45 s on 2 CPU cores
    python examples/maml_sine.py --library torch   # the same program on PyTorch

A task is a curve y = A·sin(x - φ), A ~ U[0.1, 5], φ ~ U[0, π], seen through K = 10 points
x ~ U[-5, 5]. MAML learns an initialisation θ of a 1-40-40-1 ReLU MLP from which one gradient
step on a task's K support points fits that task's curve:

    θ'ᵢ = θ - α ∇θ L_support,i(θ)                  inner step, per task
    θ  ← Adam step on Σᵢ L_query,i(θ'ᵢ)             outer step, over a meta-batch of tasks

The outer gradient goes through the inner step, ∇θ L(θ') = (I - α ∇²L_support(θ)) ∇L_query(θ'):
a Hessian-vector product, which is why the inner gradient is taken with create_graph=True. The
network is written functionally (a list of tensors and F.linear) so that θ' can stand in for θ.

Every function takes the library as `torch`, so the same code runs on tinytensor and on PyTorch
(tests/examples/test_higher_order_examples.py compares the two step by step). Writes into --out
(default runs/maml_sine/) adaptation.png: a held-out task, its K points, and the model before
adaptation and after 1 and 10 steps; and the meta-training loss.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

# NOTE: the matrices are tiny (10 x 40): BLAS threads only add synchronization (see train_mlp.py)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from training.library import LIBRARIES, load_library  # noqa: E402

SIZES = [1, 40, 40, 1]


def as_tensor(torch, array, requires_grad=False):
    """A NumPy array as a tensor of the library's default dtype (float32, or float64 in tests)."""
    dtype = torch.get_default_dtype()
    return torch.tensor(np.asarray(array), dtype=dtype, requires_grad=requires_grad)


def sample_task(rng):
    """(amplitude, phase) of one sine task."""
    return rng.uniform(0.1, 5.0), rng.uniform(0.0, math.pi)


def sample_points(rng, task, k):
    """k points (x, y) of a task's curve, each (k, 1)."""
    amplitude, phase = task
    x = rng.uniform(-5.0, 5.0, (k, 1))
    return x, amplitude * np.sin(x - phase)


def init_params(torch, rng):
    """[W1, b1, W2, b2, W3, b3], initialised as PyTorch's nn.Linear is (U(±1/√fan_in))."""
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / math.sqrt(fan_in)
        params.append(as_tensor(torch, rng.uniform(-bound, bound, (fan_out, fan_in)), True))
        params.append(as_tensor(torch, rng.uniform(-bound, bound, fan_out), True))
    return params


def forward(torch, params, x):
    """The MLP with weights `params` (θ or any θ' computed from it) on x of shape (N, 1)."""
    F = torch.nn.functional
    h = x
    for i in range(0, len(params) - 2, 2):
        h = F.relu(F.linear(h, params[i], params[i + 1]))
    return F.linear(h, params[-2], params[-1])


def adapt(torch, params, x, y, alpha, steps, create_graph):
    """`steps` SGD steps θ ← θ - α ∇L(θ) on (x, y). With create_graph=True the result is a
    differentiable function of the initial θ (meta-training); without, a plain fine-tune."""
    F = torch.nn.functional
    for _ in range(steps):
        loss = F.mse_loss(forward(torch, params, x), y)
        grads = torch.autograd.grad(loss, params, create_graph=create_graph)
        params = [p - alpha * g for p, g in zip(params, grads)]
        if not create_graph:  # a plain fine-tune: θ' need not remember how it came from θ
            params = [p.detach().requires_grad_(True) for p in params]
    return params


def train(torch, steps, seed, meta_batch=10, k=10, alpha=0.01, lr=1e-3, inner_steps=1, log=None):
    """`steps` outer Adam steps on the mean query loss after `inner_steps` inner steps, over
    `meta_batch` tasks each. Returns θ and the meta-loss of each step."""
    F = torch.nn.functional
    rng = np.random.default_rng(seed)
    params = init_params(torch, rng)
    optimizer = torch.optim.Adam(params, lr=lr)
    history = []
    for step in range(1, steps + 1):
        meta_loss = 0
        for _ in range(meta_batch):
            task = sample_task(rng)
            support = [as_tensor(torch, a) for a in sample_points(rng, task, k)]
            query = [as_tensor(torch, a) for a in sample_points(rng, task, k)]
            fast = adapt(torch, params, *support, alpha, inner_steps, create_graph=True)
            meta_loss = meta_loss + F.mse_loss(forward(torch, fast, query[0]), query[1])
        meta_loss = meta_loss / meta_batch
        optimizer.zero_grad()
        meta_loss.backward()  # through the inner steps: second derivatives of L_support
        optimizer.step()
        history.append(meta_loss.item())
        if log and (step % log == 0 or step == steps):
            recent = np.mean(history[-log:])
            print(f"step {step:5d}: meta-training query loss {recent:.4f} (mean of last {log})")
    return params, history


def evaluate(torch, params, seed, tasks=100, k=10, alpha=0.01, steps=(0, 1, 10)):
    """Mean squared error on held-out tasks (100 points each) after fine-tuning on K points for
    each number of `steps`."""
    F = torch.nn.functional
    rng = np.random.default_rng(seed + 1)  # tasks never seen in training
    errors = {n: [] for n in steps}
    for _ in range(tasks):
        task = sample_task(rng)
        support = [as_tensor(torch, a) for a in sample_points(rng, task, k)]
        x, y = (as_tensor(torch, a) for a in sample_points(rng, task, 100))
        for n in steps:
            fast = adapt(torch, params, *support, alpha, n, create_graph=False)
            errors[n].append(F.mse_loss(forward(torch, fast, x), y).item())
    return {n: float(np.mean(e)) for n, e in errors.items()}


def adapted(n):
    return "before adaptation" if n == 0 else f"after {n} step{'s' if n > 1 else ''}"


def plot(torch, params, history, errors, seed, path, k=10, alpha=0.01):
    """Left: one held-out task, its K support points and the model after 0, 1 and 10 steps.
    Right: the meta-training loss, and `errors` (evaluate's held-out MSE) as levels."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    rng = np.random.default_rng(seed + 2)
    task = sample_task(rng)
    xs, ys = sample_points(rng, task, k)
    grid = np.linspace(-5, 5, 200)[:, None]
    fig, (ax, curve) = plt.subplots(1, 2, figsize=(12, 4.8))
    ax.plot(grid, task[0] * np.sin(grid - task[1]), color="k", lw=2, label="true curve")
    ax.scatter(xs, ys, color="k", marker="^", zorder=3, label=f"the K = {k} points it sees")
    support = [as_tensor(torch, a) for a in (xs, ys)]
    for n, color in ((0, "#7f7f7f"), (1, "#1f77b4"), (10, "#d62728")):
        fast = adapt(torch, params, *support, alpha, n, create_graph=False)
        with torch.no_grad():
            pred = forward(torch, fast, as_tensor(torch, grid)).numpy()
        label = "meta-learned θ, " + adapted(n)
        ax.plot(grid, pred, color=color, ls="--" if n == 0 else "-", label=label)
    ax.set(xlabel="x", ylabel="y", title=f"a held-out task: A = {task[0]:.2f}, φ = {task[1]:.2f}")
    bottom, top = ax.get_ylim()
    ax.set_ylim(bottom, top + 0.35 * (top - bottom))  # room for the legend above the curves
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", ncol=2)
    window = max(1, len(history) // 50)
    smoothed = np.convolve(history, np.ones(window) / window, mode="valid")
    curve.plot(
        np.arange(window, len(history) + 1),
        smoothed,
        color="#1f77b4",
        label=f"query loss after the inner step (mean of {window} steps)",
    )
    for (n, error), color in zip(errors.items(), ("#7f7f7f", "#1f77b4", "#d62728")):
        label = f"held-out tasks, {adapted(n)}"
        curve.axhline(error, color=color, ls=":", label=f"{label}: {error:.2f}")
    curve.set(
        xlabel="meta-training step",
        ylabel="mean squared error",
        yscale="log",
        title="meta-training",
    )
    curve.yaxis.set_major_formatter(ScalarFormatter())  # 0.6, not 6×10⁻¹
    curve.yaxis.set_minor_formatter(ScalarFormatter())
    curve.grid(True, which="both", alpha=0.3)
    curve.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="MAML on sine waves; writes adaptation.png (a held-out task, adapted).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--steps", type=int, default=7000, help="meta-training (outer) steps")
    # NOTE: the paper's meta-batch is 25 (for 70,000 steps); in a minute 7,000 steps of 10
    # tasks adapt better than 3,000 of 25 (1-step MSE 0.66 against 0.79)
    parser.add_argument("--meta-batch", type=int, default=10, help="tasks per outer step")
    parser.add_argument("--alpha", type=float, default=0.01, help="inner SGD learning rate α")
    parser.add_argument("--inner-steps", type=int, default=1, help="inner steps in training")
    parser.add_argument("--lr", type=float, default=1e-3, help="outer Adam learning rate")
    parser.add_argument("--eval-tasks", type=int, default=100, help="held-out tasks to score")
    parser.add_argument("--log-every", type=int, default=500, help="outer steps per print")
    parser.add_argument("--out", default="runs/maml_sine", help="output directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--library", choices=LIBRARIES, default="tinytensor")
    args = parser.parse_args(argv)

    torch = load_library(args.library)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    params, history = train(
        torch, args.steps, args.seed, args.meta_batch, alpha=args.alpha, lr=args.lr,
        inner_steps=args.inner_steps, log=args.log_every,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    print(f"{args.library}: {args.steps} meta-training steps in {seconds:.1f} s")
    errors = evaluate(torch, params, args.seed, args.eval_tasks, alpha=args.alpha)
    scores = ", ".join(f"{adapted(n)} {error:.3f}" for n, error in errors.items())
    print(f"meta-test MSE on {args.eval_tasks} held-out tasks (K = 10): {scores}")
    plot(torch, params, history, errors, args.seed, out / "adaptation.png", alpha=args.alpha)
    print(f"wrote {out / 'adaptation.png'}")
    return history, errors


if __name__ == "__main__":
    main()
