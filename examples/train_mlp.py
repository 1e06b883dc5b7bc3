"""Train a small MLP with tinytensor to separate two interleaved spirals (made on the fly).

    python examples/train_mlp.py                    # ~10 s on 2 CPU cores
    python examples/train_mlp.py --steps 3000 --hidden 128 --out runs/mlp_big

The two-spirals task (Lang & Witbrock, 1988) is a classic that a linear model cannot solve: the
classes wind around each other, so the network has to learn a curved decision boundary. The run
writes into --out (default runs/mlp/):
    decision_boundary.png   the learned boundary over the data, and the loss/accuracy curves
    graph.svg (+ graph.dot) the computation graph of one training step, gradients shown
    metrics.json            final train/validation loss and accuracy
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

# NOTE: the matrices here are tiny (128 x 64): BLAS threads only add synchronization, and on a
# busy 2-core machine they made each step 5x slower. Set before NumPy loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the `training` package

import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402
from training.plotting import BELOW_NOTE, smooth, validation_below_training  # noqa: E402

import tinytensor as tt  # noqa: E402
from tinytensor import nn  # noqa: E402
from tinytensor.viz import draw_graph, save_graph  # noqa: E402

F = nn.functional


def two_spirals(n_per_class: int, noise: float, rng: np.random.Generator):
    """Points (2·n, 2) on two interleaved spirals and their labels (2·n,) in {0, 1}."""
    turns = np.sqrt(rng.uniform(0.0, 1.0, n_per_class)) * 3 * math.pi  # denser near the centre
    arm = np.stack([turns * np.cos(turns), turns * np.sin(turns)], axis=1) / (3 * math.pi)
    points = np.concatenate([arm, -arm]) + rng.normal(0.0, noise, (2 * n_per_class, 2))
    labels = np.concatenate([np.zeros(n_per_class), np.ones(n_per_class)]).astype(np.int64)
    order = rng.permutation(2 * n_per_class)
    return points[order].astype(np.float32), labels[order]


class MLP(nn.Module):
    """in -> hidden -> hidden -> classes, with GELU between the layers."""

    def __init__(self, in_features: int, hidden: int, classes: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        h = F.gelu(self.fc1(x))
        h = F.gelu(self.fc2(h))
        return self.head(h)  # logits (N, classes)


def evaluate(model, x, y):
    """(mean cross-entropy, accuracy) on all of x, without building a graph."""
    with tt.no_grad():
        logits = model(tt.tensor(x))
        loss = F.cross_entropy(logits, tt.tensor(y)).item()
        accuracy = float((logits.argmax(dim=1).numpy() == y).mean())
    return loss, accuracy


def train(args):
    rng = np.random.default_rng(args.seed)
    tt.manual_seed(args.seed)
    x, y = two_spirals(args.points, args.noise, rng)
    n_val = len(x) // 5
    x_val, y_val, x_train, y_train = x[:n_val], y[:n_val], x[n_val:], y[n_val:]

    model = MLP(2, args.hidden, 2)
    optimizer = tt.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    history = {"step": [], "train_loss": [], "val_loss": [], "val_accuracy": []}
    start = time.perf_counter()
    bar = tqdm(range(1, args.steps + 1), desc="two spirals", unit="step", mininterval=0.25)
    for step in bar:
        # NOTE: cosine decay to 5% of lr: the boundary settles instead of jittering at the end
        decay = 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for group in optimizer.param_groups:
            group["lr"] = args.lr * (0.05 + 0.95 * decay)
        batch = rng.integers(0, len(x_train), args.batch)
        logits = model(tt.tensor(x_train[batch]))
        loss = F.cross_entropy(logits, tt.tensor(y_train[batch]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % args.eval_every == 0 or step == args.steps:
            val_loss, val_accuracy = evaluate(model, x_val, y_val)
            history["step"].append(step)
            history["train_loss"].append(loss.item())
            history["val_loss"].append(val_loss)
            history["val_accuracy"].append(val_accuracy)
            bar.set_postfix(loss=f"{loss.item():.4f}", val_acc=f"{val_accuracy:.3f}")
    seconds = time.perf_counter() - start
    train_loss, train_accuracy = evaluate(model, x_train, y_train)
    val_loss, val_accuracy = evaluate(model, x_val, y_val)
    metrics = dict(
        train_loss=train_loss,
        train_accuracy=train_accuracy,
        val_loss=val_loss,
        val_accuracy=val_accuracy,
        steps=args.steps,
        seconds=round(seconds, 2),
    )
    return model, (x, y), history, metrics


def plot(model, data, history, path):
    """Writes figure(model, data, history) to `path` (a PNG)."""
    import matplotlib.pyplot as plt

    fig = figure(model, data, history)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def figure(model, data, history):
    """The decision boundary with the points and a colour bar (left); the losses and, in their
    own panel below, the validation accuracy (right); a note when validation ends below
    training."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    x, y = data
    fig = plt.figure(figsize=(12, 5.2))
    grid = fig.add_gridspec(2, 2, width_ratios=[1, 1.1], height_ratios=[2, 1])
    ax = fig.add_subplot(grid[:, 0])
    lo, hi = x.min(0) - 0.1, x.max(0) + 0.1
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 300), np.linspace(lo[1], hi[1], 300))
    points = np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)
    with tt.no_grad():
        p1 = F.softmax(model(tt.tensor(points)), dim=1).numpy()[:, 1].reshape(gx.shape)
    filled = ax.contourf(gx, gy, p1, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.55)
    ax.contour(gx, gy, p1, levels=[0.5], colors="k", linewidths=1.2)
    for label, color in ((0, "#2166ac"), (1, "#b2182b")):
        pts = x[y == label]
        ax.scatter(pts[:, 0], pts[:, 1], s=6, c=color, label=f"points of spiral {label}")
    fig.colorbar(filled, ax=ax, shrink=0.8, label="model's probability of spiral 1")
    ax.set_xlabel("x₁ (first input coordinate)")
    ax.set_ylabel("x₂ (second input coordinate)")
    ax.set_title("decision boundary (black line: probability 0.5)")
    ax.set_aspect("equal")
    ax.legend(loc="upper right", fontsize=8)

    steps = history["step"]
    losses = fig.add_subplot(grid[0, 1])
    train = np.asarray(history["train_loss"])
    losses.plot(steps, train, label="training loss, each batch", color="#7f7f7f", alpha=0.5)
    losses.plot(steps, history["val_loss"], label="validation loss", color="#1f77b4")
    losses.set_yscale("log")
    losses.set_ylabel("cross-entropy (nats per point, log scale)")
    losses.set_title("training")
    losses.grid(True, which="both", alpha=0.3)
    losses.legend(loc="upper right", fontsize=8)
    accuracy = fig.add_subplot(grid[1, 1], sharex=losses)
    accuracy.plot(steps, history["val_accuracy"], label="validation accuracy", color="#2ca02c")
    accuracy.set_ylabel("fraction correct")
    accuracy.set_ylim(0.4, 1.01)
    accuracy.set_xlabel("optimizer step")
    accuracy.grid(True, alpha=0.3)
    accuracy.legend(loc="lower right", fontsize=8)
    window = max(1, len(train) // 20)
    note = validation_below_training(
        steps, smooth(train, window), steps, np.asarray(history["val_loss"])
    )
    fig.tight_layout(rect=(0, 0.08 if note else 0, 1, 1))
    if note:
        fig.text(0.01, 0.01, BELOW_NOTE, fontsize=7, style="italic", va="bottom")
    return fig


def draw_step_graph(model, data, path):
    """The graph of one step on a small batch, with gradients (drawn before it is freed)."""
    x, y = data
    logits = model(tt.tensor(x[:8]))
    logits.retain_grad()  # an intermediate: keep its gradient to show it
    loss = F.cross_entropy(logits, tt.tensor(y[:8]))
    loss.backward(retain_graph=True)  # keep the graph alive for drawing
    graph = draw_graph(loss, params=model, show_grad=True, name="MLP training step (batch 8)")
    model.zero_grad()
    return save_graph(graph, path)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Train a small MLP on two spirals with tinytensor; writes a decision-boundary "
        "plot and the computation graph.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--out", default="runs/mlp", help="output directory")
    parser.add_argument("--steps", type=int, default=2000, help="optimizer steps")
    parser.add_argument("--batch", type=int, default=128, help="points per step")
    parser.add_argument("--hidden", type=int, default=64, help="width of the hidden layers")
    parser.add_argument("--lr", type=float, default=1e-2, help="peak AdamW learning rate")
    parser.add_argument("--points", type=int, default=1000, help="points per class")
    parser.add_argument("--noise", type=float, default=0.02, help="std of the noise on points")
    parser.add_argument("--eval-every", type=int, default=50, help="steps between evaluations")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model, data, history, metrics = train(args)
    print(
        f"trained in {metrics['seconds']} s: train accuracy {metrics['train_accuracy']:.3f}, "
        f"validation accuracy {metrics['val_accuracy']:.3f} (loss {metrics['val_loss']:.4f})"
    )
    plot(model, data, history, out / "decision_boundary.png")
    graph_files = draw_step_graph(model, data, out / "graph.svg")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print("wrote:")
    for path in [out / "decision_boundary.png", *graph_files, out / "metrics.json"]:
        print(f"  {path}")
    return metrics


if __name__ == "__main__":
    main()
