"""Loss curves as PNG files (matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

import numpy as np


def smooth(values, window: int) -> np.ndarray:
    """The running mean of the last `window` values (fewer at the start): the noisy per-step loss
    becomes a readable curve without shifting it in time."""
    values = np.asarray(values, dtype=np.float64)
    cumulative = np.cumsum(np.concatenate([[0.0], values]))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(0, ends - window)
    return (cumulative[ends] - cumulative[starts]) / (ends - starts)


def plot_history(history: dict, path: str, title: str = "training") -> str:
    """Draws the train loss per step (raw and smoothed) and every validation metric whose name
    ends in "loss" on one axis, other validation metrics (accuracies) on a second; returns path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, train = history["step"], history["train_loss"]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    ax.plot(steps, train, color="tab:blue", alpha=0.25, linewidth=0.8, label="train (per step)")
    window = max(1, len(train) // 50)
    ax.plot(
        steps,
        smooth(train, window),
        color="tab:blue",
        linewidth=1.8,
        label=f"train (mean of {window})",
    )
    eval_steps = history.get("eval_step", [])
    others, n_loss_curves = [], 0
    for name, values in history.items():
        if name in ("step", "train_loss", "lr", "eval_step") or len(values) != len(eval_steps):
            continue
        if name.endswith("loss"):
            color = ("tab:orange", "tab:red", "tab:purple")[n_loss_curves % 3]
            ax.plot(eval_steps, values, "o-", color=color, linewidth=1.8, markersize=4, label=name)
            n_loss_curves += 1
        else:
            others.append(name)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per token)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    lines, labels = ax.get_legend_handles_labels()
    if others:
        ax2 = ax.twinx()
        for name, color in zip(others, ("tab:green", "tab:olive", "tab:cyan", "tab:brown")):
            ax2.plot(eval_steps, history[name], "s--", color=color, markersize=4, label=name)
        ax2.set_ylabel("accuracy" if all("acc" in n or "match" in n for n in others) else "metric")
        if all(0.0 <= v <= 1.0 for n in others for v in history[n]):
            ax2.set_ylim(0.0, 1.02)  # fractions: show them on their whole scale
        more_lines, more_labels = ax2.get_legend_handles_labels()
        lines, labels = lines + more_lines, labels + more_labels
    # below the axes: a legend inside would cover the curves, which fill the whole box
    ax.legend(lines, labels, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=len(labels),
              frameon=False, fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
