"""The training plots say what they show: axes with units, legends in words, one legend per
axis (no twin axes), a note when validation loss ends below training loss, and the MLP's
decision boundary with labelled axes and a colour bar."""

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the plots need matplotlib")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))  # the scripts import `training` this way

from training import plotting  # noqa: E402


def _history(val_offset):
    """400 noisy training steps and 8 evaluations, validation `val_offset` from the trend."""
    rng = np.random.default_rng(0)
    steps = np.arange(1, 401)
    trend = 3 * np.exp(-steps / 120) + 1.2
    evals = [50, 100, 150, 200, 250, 300, 350, 400]
    return {
        "step": list(steps),
        "train_loss": list(trend + 0.1 * rng.standard_normal(400)),
        "lr": [1e-3] * 400,
        "eval_step": evals,
        "val_mlm_loss": [3 * np.exp(-s / 120) + 1.2 + val_offset for s in evals],
        "masked_acc": [0.1 + 0.05 * i for i in range(8)],
        "nsp_acc": [0.5 + 0.04 * i for i in range(8)],
    }


def _legend_texts(ax):
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def _notes(fig):
    return [t.get_text() for t in fig.texts]


def test_history_plot_has_units_words_and_one_legend_per_axis():
    fig = plotting.history_figure(_history(0.3), "bert")
    losses, metrics = fig.axes  # two panels, no twin axis
    assert "nats per token" in losses.get_ylabel()
    assert metrics.get_ylabel() == "fraction correct" and metrics.get_ylim() == (0.0, 1.02)
    assert metrics.get_xlabel() == "optimizer step"
    labels = _legend_texts(losses) + _legend_texts(metrics)
    assert "validation loss on masked tokens" in labels
    assert {"accuracy on masked tokens", "next-sentence accuracy"} <= set(labels)
    assert not any("_" in label for label in labels), labels
    assert _notes(fig) == []  # validation above training: nothing to explain


def test_a_note_explains_validation_below_training():
    fig = plotting.history_figure(_history(-0.3), "bert")
    (note,) = _notes(fig)
    assert "Validation loss below training loss" in note and "dropout" in note


def test_history_with_losses_only_is_one_panel(tmp_path):
    history = _history(0.3)
    del history["masked_acc"], history["nsp_acc"]
    fig = plotting.history_figure(history)
    assert len(fig.axes) == 1 and fig.axes[0].get_xlabel() == "optimizer step"
    path = plotting.plot_history(history, str(tmp_path / "loss.png"))
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "name, said",
    [
        ("val_loss", "validation loss"),
        ("exact_match", "exact match (whole outputs)"),
        ("char_acc", "accuracy per character"),
        ("val_top5_acc", "validation top5 accuracy"),  # not in the table: spelled out
    ],
)
def test_metric_names_in_words(name, said):
    assert plotting.words(name) == said


def test_validation_below_training_compares_at_the_last_evaluation():
    steps, smoothed = [1, 2, 3, 4], np.array([4.0, 3.0, 2.0, 1.0])
    assert plotting.validation_below_training(steps, smoothed, [2, 4], [2.5, 0.5])
    assert not plotting.validation_below_training(steps, smoothed, [2, 4], [2.5, 1.5])
    assert not plotting.validation_below_training(steps, smoothed, [], [])


def test_mlp_decision_boundary_has_axes_and_a_colour_bar():
    import train_mlp

    rng = np.random.default_rng(0)
    x, y = train_mlp.two_spirals(50, 0.02, rng)
    model = train_mlp.MLP(2, 8, 2)  # untrained: the figure does not depend on training
    history = {
        "step": [10, 20, 30],
        "train_loss": [0.7, 0.6, 0.5],
        "val_loss": [0.69, 0.55, 0.45],  # below training at the end: the note
        "val_accuracy": [0.5, 0.6, 0.7],
    }
    fig = train_mlp.figure(model, (x, y), history)
    boundary, colorbar, losses, accuracy = fig.axes
    assert boundary.get_xlabel().startswith("x₁") and boundary.get_ylabel().startswith("x₂")
    assert "probability" in colorbar.get_ylabel()
    assert "nats" in losses.get_ylabel() and accuracy.get_ylabel() == "fraction correct"
    assert accuracy.get_xlabel() == "optimizer step"
    for ax in (losses, accuracy):  # each panel its own legend, in words
        assert _legend_texts(ax) and not any("_" in t for t in _legend_texts(ax))
    assert any("Validation loss below training loss" in t for t in _notes(fig))
