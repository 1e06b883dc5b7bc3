"""Losses (functional and modules) against torch, float64, values and gradients; gradchecks."""

import numpy as np
import pytest
import tinytensor.nn.functional as F

import tinytensor as tt
from tinytensor import nn

from .conftest import assert_close, to_torch


def compare(torch, ours_fn, theirs_fn, inputs, grad_of=None):
    """Evaluates both losses on the same inputs; compares the value and the gradients of the
    float inputs that require grad."""
    grad_of = (
        grad_of if grad_of is not None else [i for i, x in enumerate(inputs) if x.requires_grad]
    )
    theirs_inputs = [to_torch(torch, x, requires_grad=i in grad_of) for i, x in enumerate(inputs)]
    ours, theirs = ours_fn(*inputs), theirs_fn(*theirs_inputs)
    assert_close(ours, theirs, what="loss")
    r = np.random.default_rng(0).standard_normal(ours.shape)
    (ours * tt.tensor(r)).sum().backward()
    (theirs * torch.tensor(r)).sum().backward()
    for i in grad_of:
        assert_close(inputs[i].grad, theirs_inputs[i].grad, what=f"grad of input {i}")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1_match_torch(torch, float64, reduction):
    for ours, theirs in ((F.mse_loss, torch.nn.functional.mse_loss),
                         (F.l1_loss, torch.nn.functional.l1_loss)):  # fmt: skip
        x, y = tt.randn(3, 4, requires_grad=True), tt.randn(3, 4, requires_grad=True)
        compare(
            torch,
            lambda a, b, f=ours: f(a, b, reduction=reduction),
            lambda a, b, f=theirs: f(a, b, reduction=reduction),
            [x, y],
        )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_matches_torch_with_ignore_index(torch, float64, reduction):
    log_p = tt.randn(5, 4).log_softmax(1).detach().requires_grad_(True)
    target = tt.tensor([0, 3, -100, 1, 3])
    compare(
        torch,
        lambda a, t: F.nll_loss(a, t, reduction=reduction),
        lambda a, t: torch.nn.functional.nll_loss(a, t, reduction=reduction),
        [log_p, target],
    )
    compare(
        torch,
        lambda a, t: nn.NLLLoss(ignore_index=3, reduction=reduction)(a, t),
        lambda a, t: torch.nn.NLLLoss(ignore_index=3, reduction=reduction)(a, t),
        [log_p.detach().requires_grad_(True), target.clamp(min=0)],
    )


def test_nll_loss_unbatched_and_errors(torch, float64):
    log_p = tt.randn(4).log_softmax(0)
    assert_close(F.nll_loss(log_p, tt.tensor(2)), -log_p[2])
    with pytest.raises(IndexError, match="out of range for 4 classes"):
        F.nll_loss(tt.randn(2, 4), tt.tensor([0, 4]))
    with pytest.raises(TypeError, match="integer tensor"):
        F.nll_loss(tt.randn(2, 4), tt.tensor([0.0, 1.0]))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("with_weights", [False, True])
def test_bce_with_logits_matches_torch(torch, float64, reduction, with_weights):
    x = tt.tensor([[-50.0, -2.0, 0.0, 0.5], [3.0, 40.0, -0.1, 0.0]], requires_grad=True)
    y = tt.tensor([[0.0, 1.0, 1.0, 0.3], [1.0, 0.0, 0.0, 1.0]], requires_grad=True)
    pos_weight = tt.tensor([1.0, 2.0, 0.5, 3.0]) if with_weights else None
    weight = tt.tensor([[1.0], [0.5]]) if with_weights else None

    def theirs(a, b):
        return torch.nn.functional.binary_cross_entropy_with_logits(
            a,
            b,
            weight=None if weight is None else to_torch(torch, weight),
            reduction=reduction,
            pos_weight=None if pos_weight is None else to_torch(torch, pos_weight),
        )

    ours = nn.BCEWithLogitsLoss(weight=weight, reduction=reduction, pos_weight=pos_weight)
    compare(torch, ours, theirs, [x, y])
    # the gradient at x = 0 is σ(0) - y, exactly (a |x| or max(x, 0) form would lose it)
    assert np.all(np.isfinite(x.grad.numpy()))


def test_cross_entropy_loss_module_matches_torch(torch, float64):
    logits = tt.randn(6, 5, requires_grad=True)
    target = tt.tensor([0, 4, -100, 2, 2, 1])
    compare(
        torch,
        nn.CrossEntropyLoss(label_smoothing=0.1),
        torch.nn.CrossEntropyLoss(label_smoothing=0.1),
        [logits, target],
    )


def test_normalize_matches_torch(torch, float64):
    x = tt.randn(3, 4, requires_grad=True)
    compare(torch, lambda a: F.normalize(a, dim=1), lambda a: torch.nn.functional.normalize(a), [x])
    x = tt.randn(3, 4, requires_grad=True)
    compare(
        torch,
        lambda a: F.normalize(a, p=3.0, dim=0),
        lambda a: torch.nn.functional.normalize(a, p=3.0, dim=0),
        [x],
    )
    zero = tt.zeros(2, 3, requires_grad=True)
    F.normalize(zero).sum().backward()
    assert np.all(np.isfinite(zero.grad.numpy()))  # no 0·∞ for an all-zero vector


@pytest.mark.parametrize("symmetric", [True, False])
def test_info_nce_matches_a_torch_reference(torch, float64, symmetric):
    a, b = tt.randn(5, 3, requires_grad=True), tt.randn(5, 3, requires_grad=True)

    def theirs(a, b):  # CLIP's loss, written with torch's own ops
        tf = torch.nn.functional
        logits = tf.normalize(a, dim=1) @ tf.normalize(b, dim=1).T / 0.1
        labels = torch.arange(a.shape[0])
        loss = tf.cross_entropy(logits, labels)
        return (loss + tf.cross_entropy(logits.T, labels)) / 2 if symmetric else loss

    compare(torch, nn.InfoNCELoss(temperature=0.1, symmetric=symmetric), theirs, [a, b])


def test_info_nce_is_low_for_matching_pairs(float64):
    a = tt.randn(8, 16)
    assert F.info_nce(a, a).item() < 0.01 < F.info_nce(a, tt.randn(8, 16)).item()
    with pytest.raises(ValueError, match="both be"):
        F.info_nce(a, tt.randn(8, 4))


def test_loss_gradchecks(float64):
    x, y = tt.randn(2, 3, requires_grad=True), tt.rand(2, 3, requires_grad=True)
    assert tt.gradcheck(lambda x, y: F.binary_cross_entropy_with_logits(x, y), [x, y])
    assert tt.gradcheck(lambda x, y: F.mse_loss(x, y), [x, y])
    assert tt.gradcheck(lambda x: F.normalize(x, dim=1), [x])
    assert tt.gradcheck(lambda a, b: F.info_nce(a, b, temperature=0.5), [x, y])
    t = tt.tensor([1, -100])
    assert tt.gradcheck(lambda x: F.nll_loss(x, t), [x])


def test_loss_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match=r"input shape \(3,\) and target shape \(3, 1\)"):
        F.mse_loss(tt.randn(3), tt.randn(3, 1))
    with pytest.raises(ValueError, match="reduction must be"):
        F.l1_loss(tt.randn(3), tt.randn(3), reduction="avg")
