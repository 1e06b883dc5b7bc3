"""Damped Newton-CG ("Hessian-free" optimisation; Martens, "Deep learning via Hessian-free
optimization", 2010) against gradient descent on a small tanh MLP that fits a curve, with
Hessian-vector products from double backward.

    python examples/newton_cg.py                   # ~3 s on 2 CPU cores
    python examples/newton_cg.py --library torch   # the same program on PyTorch

Newton's method minimises the local quadratic model L(θ + d) ≈ L + gᵀd + ½ dᵀHd. The Hessian H
of a network is never formed: conjugate gradients solve (H + λI) d = -g with only products Hv,

    g = ∇L(θ)                  autograd.grad(L, θ, create_graph=True)   (g is a graph itself)
    Hv = ∇θ (gᵀv)              autograd.grad(g·v, θ, retain_graph=True)  (one backward of g)

for up to 20 products per step (Martens multiplies by the Gauss-Newton matrix, which is never
indefinite; the true Hessian is what double backward gives). H is indefinite away from a
minimum, so the damping λ is adapted as in Levenberg-Marquardt from ρ, the ratio of the actual
decrease of the loss to the decrease the quadratic model predicted: trusted model (ρ > 3/4),
less damping; poor model (ρ < 1/4), more. A step that does not decrease the loss is rejected.

Every function takes the library as `torch`, so the same code runs on tinytensor and on PyTorch
(tests/examples/test_higher_order_examples.py compares the two step by step). Writes into --out
(default runs/newton_cg/) loss.png: both loss curves per iteration and per gradient-sized pass
(a gradient or a Hessian-vector product), and both fits.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import time
from pathlib import Path

# NOTE: the matrices are tiny (128 x 20): BLAS threads only add synchronization (see train_mlp.py)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from training.library import LIBRARIES, load_library  # noqa: E402

SIZES = [1, 20, 20, 1]
SHAPES = [s for a, b in zip(SIZES[:-1], SIZES[1:]) for s in ((b, a), (b,))]  # W, b per layer


def as_tensor(torch, array):
    """A NumPy array as a tensor of the library's default dtype."""
    return torch.tensor(np.asarray(array), dtype=torch.get_default_dtype())


def make_data(rng, n=128):
    """n points of y = sin(3x) + 0.3x² on [-1.5, 1.5], each (n, 1)."""
    x = rng.uniform(-1.5, 1.5, (n, 1))
    return x, np.sin(3 * x) + 0.3 * x**2


def init_theta(rng):
    """All weights as one flat NumPy vector, each layer U(±1/√fan_in) as PyTorch's nn.Linear."""
    parts = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / math.sqrt(fan_in)
        parts += [rng.uniform(-bound, bound, fan_out * fan_in), rng.uniform(-bound, bound, fan_out)]
    return np.concatenate(parts)


def mlp(torch, theta, x):
    """The MLP whose weights are slices of the flat vector θ, on x (N, 1): one tensor, so that
    CG's vectors (g, v, Hv, d) are single tensors too."""
    F = torch.nn.functional
    params, start = [], 0
    for shape in SHAPES:
        size = math.prod(shape)
        params.append(theta[start : start + size].reshape(shape))
        start += size
    h = x
    for i in range(0, len(params) - 2, 2):
        h = torch.tanh(F.linear(h, params[i], params[i + 1]))
    return F.linear(h, params[-2], params[-1])


def loss_fn(torch, theta, x, y):
    """Mean squared error of the MLP with weights θ."""
    return torch.nn.functional.mse_loss(mlp(torch, theta, x), y)


def conjugate_gradient(matvec, b, iters, tol=1e-10):
    """d ≈ A⁻¹b for a symmetric A given as v ↦ Av, from d = 0. Stops where the residual is small
    or at a direction of negative curvature (pᵀAp ≤ 0: A is not positive definite there, and
    the quadratic model has no minimum along p). Returns d and the number of products."""
    d, r = b * 0, b
    p, rr = r, (r * r).sum().item()
    for i in range(1, iters + 1):
        ap = matvec(p)
        curvature = (p * ap).sum().item()
        if curvature <= 0:
            return d, i
        step = rr / curvature
        d, r = d + step * p, r - step * ap
        rr, rr_old = (r * r).sum().item(), rr
        if math.sqrt(rr) < tol:
            return d, i
        p = r + (rr / rr_old) * p
    return d, iters


def hessian_times(torch, grad, theta, v, damping=0.0):
    """(H + λI)v with Hv = ∇θ(g·v): one backward through the graph of g = ∇L(θ), which
    create_graph=True recorded (and retain_graph keeps for the next product)."""
    (hv,) = torch.autograd.grad((grad * v).sum(), theta, retain_graph=True)
    return hv + damping * v


def newton_cg(torch, theta, x, y, steps, damping=1.0, cg_iters=20):
    """`steps` damped Newton-CG steps from the flat weights θ. Returns θ and per step the
    loss after it, the damping λ and the number of gradient-sized passes so far."""
    theta = theta.detach().requires_grad_(True)
    history = {"loss": [], "damping": [], "passes": []}
    passes = 0
    for _ in range(steps):
        loss = loss_fn(torch, theta, x, y)
        (grad,) = torch.autograd.grad(loss, theta, create_graph=True)  # g, differentiable
        g = grad.detach()
        matvec = functools.partial(hessian_times, torch, grad, theta, damping=damping)
        d, products = conjugate_gradient(matvec, -g, cg_iters)
        # the decrease the undamped quadratic model predicts for d, and the actual one
        curvature = (d * hessian_times(torch, grad, theta, d)).sum().item()  # dᵀHd
        predicted = (g * d).sum().item() + 0.5 * curvature
        with torch.no_grad():
            new_loss = loss_fn(torch, theta + d, x, y).item()
        rho = (new_loss - loss.item()) / predicted if predicted < 0 else 0.0
        if rho > 0.75:
            damping *= 2 / 3
        elif rho < 0.25:
            damping *= 3 / 2
        if new_loss < loss.item():  # accept; otherwise retry from θ with more damping
            theta = (theta + d).detach().requires_grad_(True)
        passes += 1 + products + 1  # g, the CG products, the model's Hd
        history["loss"].append(min(new_loss, loss.item()))
        history["damping"].append(damping)
        history["passes"].append(passes)
    return theta.detach(), history


def gradient_descent(torch, theta, x, y, steps, lr):
    """`steps` steps θ ← θ - lr·∇L(θ). Returns θ and the loss after each step."""
    theta = theta.detach().requires_grad_(True)
    losses = []
    for _ in range(steps):
        (grad,) = torch.autograd.grad(loss_fn(torch, theta, x, y), theta)
        theta = (theta - lr * grad).detach().requires_grad_(True)
        with torch.no_grad():
            losses.append(loss_fn(torch, theta, x, y).item())
    return theta.detach(), losses


def train(torch, steps, seed, gd_lr=0.04, damping=1.0, cg_iters=20, gd_steps=None):
    """Newton-CG for `steps` steps and gradient descent from the same weights for as many
    gradient-sized passes (or gd_steps). Returns both results and the data."""
    rng = np.random.default_rng(seed)
    x, y = (as_tensor(torch, a) for a in make_data(rng))
    theta0 = as_tensor(torch, init_theta(rng))
    theta_newton, newton = newton_cg(torch, theta0, x, y, steps, damping, cg_iters)
    gd_steps = gd_steps or newton["passes"][-1]
    theta_gd, gd = gradient_descent(torch, theta0, x, y, gd_steps, gd_lr)
    with torch.no_grad():
        initial = loss_fn(torch, theta0, x, y).item()
    return dict(
        initial=initial,
        newton=newton,
        gd=gd,
        theta_newton=theta_newton,
        theta_gd=theta_gd,
        data=(x, y),
    )


def plot(torch, result, path):
    """Left: loss per iteration. Middle: loss per gradient-sized pass (what an iteration costs).
    Right: the data and both fits."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    newton, gd = result["newton"], result["gd"]
    n = len(newton["loss"])
    fig, (per_step, per_pass, fit) = plt.subplots(1, 3, figsize=(15, 4.6))
    steps = np.arange(0, n + 1)
    per_step.plot(
        steps, [result["initial"], *newton["loss"]], "o-", ms=3, color="#d62728", label="Newton-CG"
    )
    per_step.plot(steps, [result["initial"], *gd[:n]], color="#1f77b4", label="gradient descent")
    per_step.set(xlabel="iteration", title="per iteration")
    per_pass.plot(
        [0, *newton["passes"]],
        [result["initial"], *newton["loss"]],
        "o-",
        ms=3,
        color="#d62728",
        label="Newton-CG (gradient + CG's Hv products)",
    )
    per_pass.plot(
        np.arange(len(gd) + 1),
        [result["initial"], *gd],
        color="#1f77b4",
        label="gradient descent (one gradient)",
    )
    per_pass.set(
        xlabel="gradient-sized passes (a gradient or an Hv product)", title="per unit of work"
    )
    for ax in (per_step, per_pass):
        ax.set(yscale="log", ylabel="mean squared error (log scale)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    x, y = (t.numpy().ravel() for t in result["data"])
    grid = np.linspace(x.min(), x.max(), 200)[:, None]
    fit.scatter(x, y, s=8, color="k", label="data")
    with torch.no_grad():
        for key, color, label in (
            ("theta_newton", "#d62728", "Newton-CG"),
            ("theta_gd", "#1f77b4", "gradient descent"),
        ):
            pred = mlp(torch, result[key], as_tensor(torch, grid)).numpy()
            fit.plot(grid, pred, color=color, label=label)
    fit.set(xlabel="x", ylabel="y", title=f"the fits ({n} Newton-CG, {len(gd)} GD steps)")
    fit.grid(True, alpha=0.3)
    fit.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Newton-CG with Hessian-vector products against gradient descent on a small "
        "MLP; writes loss.png.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--steps", type=int, default=100, help="Newton-CG steps")
    parser.add_argument("--cg-iters", type=int, default=20, help="most CG products per step")
    parser.add_argument("--damping", type=float, default=1.0, help="initial damping λ")
    parser.add_argument(
        "--gd-lr",
        type=float,
        default=0.04,
        help="gradient descent step size (the largest tried whose loss never rose)",
    )
    parser.add_argument("--out", default="runs/newton_cg", help="output directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--library", choices=LIBRARIES, default="tinytensor")
    args = parser.parse_args(argv)

    torch = load_library(args.library)
    # NOTE: float64: Newton-CG reaches losses where float32's rounding would be the floor, and
    # CG's recurrences lose their orthogonality quickly in float32
    torch.set_default_dtype(torch.float64)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    result = train(torch, args.steps, args.seed, args.gd_lr, args.damping, args.cg_iters)
    newton, gd = result["newton"], result["gd"]
    print(
        f"{args.library}: done in {time.perf_counter() - start:.1f} s; loss at start "
        f"{result['initial']:.3e}"
    )
    for i in sorted({1, 5, 10, 20, args.steps} & set(range(1, args.steps + 1))):
        print(
            f"after {i:3d} iterations: Newton-CG {newton['loss'][i - 1]:.3e} "
            f"({newton['passes'][i - 1]:4d} passes, λ {newton['damping'][i - 1]:.2g}), "
            f"gradient descent {gd[i - 1]:.3e}"
        )
    print(f"gradient descent after as many passes ({len(gd)}): {gd[-1]:.3e}")
    plot(torch, result, out / "loss.png")
    print(f"wrote {out / 'loss.png'}")
    return result


if __name__ == "__main__":
    main()
