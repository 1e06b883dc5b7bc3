"""The MNIST-style MLP program (tests/compat/mnist_mlp_style.py) run on torch and on tinytensor with
the same weights and data: log-probs, nll loss, every gradient and an Adadelta step in float64;
three epochs of Adadelta + StepLR in float32 with the printed progress and test lines."""

import numpy as np
import pytest
import torch

import tinytensor as tt

from . import mnist_mlp_style as mn
from ._compare import (
    assert_curves_close,
    assert_same_named,
    copy_weights,
    default_dtype,
    grads_by_name,
    max_diff,
    params_by_name,
)

SIDE = 8


def _data(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    # class-dependent means so that the net can learn something in a few epochs
    images = rng.normal(size=(n, 1, SIDE, SIDE)) + 0.5 * labels[:, None, None, None] / 10
    return images.astype(np.float32), labels.astype(np.int64)


def _pair(**kwargs):
    torch.manual_seed(0)
    ref = mn.build(torch, SIDE, **kwargs)
    model = mn.build(tt, SIDE, **kwargs)
    copy_weights(ref, model)
    return ref, model


@pytest.mark.parametrize("flatten_module", [False, True])
@default_dtype("float64")
def test_one_step_float64(flatten_module):
    images, labels = _data(16, 0)
    images = images.astype(np.float64)
    ref, model = _pair(flatten_module=flatten_module)
    ref_out = ref(torch.tensor(images))
    out = model(tt.tensor(images))
    assert max_diff(ref_out, out) < 1e-12
    ref_loss = torch.nn.functional.nll_loss(ref_out, torch.tensor(labels))
    loss = tt.nn.functional.nll_loss(out, tt.tensor(labels))
    assert max_diff(ref_loss, loss) < 1e-12
    ref_loss.backward()
    loss.backward()
    assert_same_named(grads_by_name(ref), grads_by_name(model), 1e-12, "gradient")
    torch.optim.Adadelta(ref.parameters(), lr=1.0).step()
    tt.optim.Adadelta(model.parameters(), lr=1.0).step()
    assert_same_named(params_by_name(ref), params_by_name(model), 1e-12, "parameter after step")


def _numbers(lines):
    return [[float(v) for v in line.replace("\t", " ").replace(":", " ").split() if _is_number(v)]
            for line in lines]  # fmt: skip


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_three_epochs_float32():
    train_data, test_data = _data(64, 1), _data(50, 2)
    with default_dtype("float32"):  # the torch fixture leaves torch in float64 for other tests
        ref, model = _pair()
        ref_losses, ref_results, ref_lrs, ref_lines = mn.main(
            torch, ref, mn.random_images(torch, *train_data), mn.random_images(torch, *test_data)
        )
        losses, results, lrs, lines = mn.main(
            tt, model, mn.random_images(tt, *train_data), mn.random_images(tt, *test_data)
        )
    assert len(losses) == 12 and ref_losses[-1] < ref_losses[0]
    assert_curves_close(ref_losses, losses)
    np.testing.assert_allclose(lrs, ref_lrs, rtol=1e-12)
    assert [c for _, c in results] == [c for _, c in ref_results]
    np.testing.assert_allclose([t for t, _ in results], [t for t, _ in ref_results], rtol=1e-4)
    assert lines[0] == "Using Device: cpu" and len(lines) == len(ref_lines)
    assert [line.split("Loss")[0] for line in lines] == [
        line.split("Loss")[0] for line in ref_lines
    ]  # epochs, sample counts, percentages
    np.testing.assert_allclose(
        sum(_numbers(lines), []), sum(_numbers(ref_lines), []), rtol=1e-3, atol=1e-4
    )


def test_shuffled_loader_with_a_worker_and_dropout():
    train_data, test_data = _data(64, 1), _data(50, 2)
    _, model = _pair(dropout=0.25)
    tt.manual_seed(1)
    losses, results, lrs, _ = mn.main(
        tt, model, mn.random_images(tt, *train_data), mn.random_images(tt, *test_data),
        shuffle=True, num_workers=1, epochs=2,
    )  # fmt: skip
    assert len(losses) == 8 and np.all(np.isfinite(losses))
    assert lrs == pytest.approx([0.7, 0.49])
    assert all(0 <= correct <= 50 for _, correct in results)
