"""Loss curves as PNG files (matplotlib's Agg backend: no display needed).

One panel per kind of quantity, each with its own axis and legend: the losses (nats per token)
on top, the other validation metrics (fractions: accuracies, exact match) below. Legends are in
words, not the metric's variable name. When the validation loss ends below the training loss,
a note under the plot says why that is expected.
"""

from __future__ import annotations

import numpy as np

# The metric names the training scripts report, in words. Others are spelled out by _words.
WORDS = {
    "val_loss": "validation loss",
    "val_mlm_loss": "validation loss on masked tokens",
    "masked_acc": "accuracy on masked tokens",
    "nsp_acc": "next-sentence accuracy",
    "exact_match": "exact match (whole outputs)",
    "char_acc": "accuracy per character",
    "val_accuracy": "validation accuracy",
}
_PARTS = {"val": "validation", "acc": "accuracy", "mlm": "masked-LM", "nsp": "next-sentence"}

BELOW_NOTE = (
    "Validation loss below training loss is expected here: the training loss is measured while "
    "training (with dropout on, if any) and\nits curve is a trailing mean over steps whose "
    "weights were still improving; validation runs the latest weights without dropout."
)


def words(name: str) -> str:
    """A metric's name as a legend says it: "val_mlm_loss" -> "validation loss on masked
    tokens"; unknown names have their parts spelled out ("val_top5_acc" -> "validation top5
    accuracy")."""
    if name in WORDS:
        return WORDS[name]
    return " ".join(_PARTS.get(part, part) for part in name.split("_"))


def smooth(values, window: int) -> np.ndarray:
    """The running mean of the last `window` values (fewer at the start): the noisy per-step loss
    becomes a readable curve without shifting it in time."""
    values = np.asarray(values, dtype=np.float64)
    cumulative = np.cumsum(np.concatenate([[0.0], values]))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(0, ends - window)
    return (cumulative[ends] - cumulative[starts]) / (ends - starts)


def validation_below_training(steps, train_smoothed, eval_steps, val_losses) -> bool:
    """True when the last validation loss is below the smoothed training loss at that step."""
    if not len(eval_steps) or not len(val_losses) or not len(steps):
        return False
    at = int(np.searchsorted(np.asarray(steps), eval_steps[-1], side="right")) - 1
    return at >= 0 and float(val_losses[-1]) < float(train_smoothed[at])


def plot_history(history: dict, path: str, title: str = "training") -> str:
    """Writes history_figure(history, title) to `path` (a PNG); returns path."""
    import matplotlib.pyplot as plt

    fig = history_figure(history, title)
    fig.savefig(path)
    plt.close(fig)
    return path


def history_figure(history: dict, title: str = "training"):
    """The training loss per step (raw and smoothed) with every validation metric whose name
    ends in "loss" in one panel, the other validation metrics (accuracies) in a second panel
    below it, each with its own legend; a note under them when validation ends below training.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, train = history["step"], history["train_loss"]
    eval_steps = history.get("eval_step", [])
    evaluated = [
        name
        for name, values in history.items()
        if name not in ("step", "train_loss", "lr", "eval_step") and len(values) == len(eval_steps)
    ]
    losses = [n for n in evaluated if n.endswith("loss")]
    others = [n for n in evaluated if not n.endswith("loss")]
    rows = 2 if others else 1
    fig, axes = plt.subplots(
        rows,
        1,
        figsize=(9, 4.5 if rows == 1 else 6.5),
        dpi=120,
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": [2, 1][:rows]},
    )
    ax = axes[0, 0]
    ax.plot(
        steps, train, color="tab:blue", alpha=0.25, linewidth=0.8, label="training loss, each step"
    )
    window = max(1, len(train) // 50)
    smoothed = smooth(train, window)
    ax.plot(steps, smoothed, color="tab:blue", linewidth=1.8,
            label=f"training loss, mean of the last {window} steps")  # fmt: skip
    for name, color in zip(losses, ("tab:orange", "tab:red", "tab:purple")):
        ax.plot(eval_steps, history[name], "o-", color=color, linewidth=1.8, markersize=4,
                label=words(name))  # fmt: skip
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    if others:
        metrics = axes[1, 0]
        for name, color in zip(others, ("tab:green", "tab:olive", "tab:cyan", "tab:brown")):
            metrics.plot(eval_steps, history[name], "s-", color=color, markersize=4,
                         label=words(name))  # fmt: skip
        fractions = all(0.0 <= v <= 1.0 for n in others for v in history[n])
        metrics.set_ylabel("fraction correct" if fractions else "metric")
        if fractions:
            metrics.set_ylim(0.0, 1.02)  # fractions: show them on their whole scale
        metrics.grid(True, alpha=0.3)
        metrics.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    axes[-1, 0].set_xlabel("optimizer step")
    note = losses and validation_below_training(steps, smoothed, eval_steps, history[losses[0]])
    fig.tight_layout(rect=(0, 0.07 if note else 0, 1, 1))
    if note:
        fig.text(0.01, 0.01, BELOW_NOTE, fontsize=7, style="italic", va="bottom")
    return fig
