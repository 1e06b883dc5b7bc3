"""kl_div, binary_cross_entropy, smooth_l1_loss, huber_loss, cosine_similarity and their Modules
against torch (float64, values and gradients, every reduction, weights), gradchecks, errors."""

import numpy as np
import pytest
import tinytensor.nn.functional as F

import tinytensor as tt
from tinytensor import nn

from .conftest import assert_close
from .test_losses import compare

REDUCTIONS = ["mean", "sum", "none"]


def log_probs(*shape):
    return tt.randn(*shape).log_softmax(-1).detach().requires_grad_(True)


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch(torch, float64, reduction, log_target):
    x = log_probs(4, 5)
    target = tt.randn(4, 5).softmax(-1)
    if log_target:
        target = target.log()
    target = target.detach().requires_grad_(True)
    compare(
        torch,
        lambda a, t: F.kl_div(a, t, reduction=reduction, log_target=log_target),
        lambda a, t: torch.nn.functional.kl_div(a, t, reduction=reduction, log_target=log_target),
        [x, target],
    )
    compare(
        torch,
        lambda a, t: nn.KLDivLoss(reduction=reduction, log_target=log_target)(a, t),
        lambda a, t: torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)(a, t),
        [x.detach().requires_grad_(True), target.detach()],
    )


def test_kl_div_with_zero_targets_as_label_smoothing_does(torch, float64):
    """The Annotated Transformer's label smoothing: a smoothed one-hot with zeros (the padding
    column), KLDivLoss(reduction='sum'); 0·log 0 must count as 0, with finite gradients."""
    x = log_probs(3, 6)
    smoothed = tt.full((3, 6), 0.1 / 4)
    smoothed[:, 0] = 0.0
    smoothed[tt.arange(3), tt.tensor([2, 3, 5])] = 0.9
    smoothed[1] = 0.0  # a padding row
    compare(
        torch,
        lambda a, t: nn.KLDivLoss(reduction="sum")(a, t),
        lambda a, t: torch.nn.KLDivLoss(reduction="sum")(a, t),
        [x, smoothed],
    )
    assert np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("with_weight", [False, True])
def test_binary_cross_entropy_matches_torch(torch, float64, reduction, with_weight):
    p = tt.rand(3, 4).clamp(0.02, 0.98).detach().requires_grad_(True)
    y = tt.tensor(np.random.default_rng(0).random((3, 4)), requires_grad=True)
    weight = tt.tensor([[1.0], [0.5], [2.0]]) if with_weight else None
    tw = torch.tensor(weight.numpy()) if with_weight else None
    compare(
        torch,
        lambda a, t: F.binary_cross_entropy(a, t, weight=weight, reduction=reduction),
        lambda a, t: torch.nn.functional.binary_cross_entropy(a, t, weight=tw, reduction=reduction),
        [p, y],
    )
    compare(
        torch,
        lambda a, t: nn.BCELoss(weight=weight, reduction=reduction)(a, t),
        lambda a, t: torch.nn.BCELoss(weight=tw, reduction=reduction)(a, t),
        [p.detach().requires_grad_(True), y.detach()],
    )


def test_binary_cross_entropy_clamps_the_log_at_probabilities_0_and_1(torch, float64):
    p, y = tt.tensor([0.0, 1.0, 0.0, 1.0, 0.5]), tt.tensor([0.0, 1.0, 1.0, 0.0, 1.0])
    ours = F.binary_cross_entropy(p, y, reduction="none")
    theirs = torch.nn.functional.binary_cross_entropy(
        torch.tensor(p.numpy()), torch.tensor(y.numpy()), reduction="none"
    )
    assert_close(ours, theirs)  # 100 where the log would be -inf
    with pytest.raises(ValueError, match=r"binary_cross_entropy: .* between 0 and 1 .*1\.5"):
        F.binary_cross_entropy(tt.tensor([0.5, 1.5]), tt.tensor([0.0, 1.0]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_smooth_l1_loss_matches_torch(torch, float64, reduction, beta):
    # differences on both sides of beta, none exactly at it (the kink)
    x = tt.tensor([[-3.0, -0.7, -0.2, 0.1], [0.3, 0.45, 1.2, 4.0]], requires_grad=True)
    y = tt.tensor([[0.1, 0.0, 0.05, -0.3], [0.0, 0.1, 0.0, 0.2]], requires_grad=True)
    compare(
        torch,
        lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta),
        lambda a, b: torch.nn.functional.smooth_l1_loss(a, b, reduction=reduction, beta=beta),
        [x, y],
    )
    compare(
        torch,
        lambda a, b: nn.SmoothL1Loss(reduction=reduction, beta=beta)(a, b),
        lambda a, b: torch.nn.SmoothL1Loss(reduction=reduction, beta=beta)(a, b),
        [x.detach().requires_grad_(True), y.detach()],
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("delta", [1.0, 2.5])
def test_huber_loss_matches_torch(torch, float64, reduction, delta):
    x = tt.tensor([[-5.0, -1.7, -0.2, 0.1], [0.3, 2.0, 3.2, 9.0]], requires_grad=True)
    y = tt.tensor([[0.1, 0.0, 0.05, -0.3], [0.0, 0.1, 0.0, 0.2]], requires_grad=True)
    compare(
        torch,
        lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=delta),
        lambda a, b: torch.nn.functional.huber_loss(a, b, reduction=reduction, delta=delta),
        [x, y],
    )
    compare(
        torch,
        lambda a, b: nn.HuberLoss(reduction=reduction, delta=delta)(a, b),
        lambda a, b: torch.nn.HuberLoss(reduction=reduction, delta=delta)(a, b),
        [x.detach().requires_grad_(True), y.detach()],
    )
    w = tt.tensor([[1.0, 2.0, 0.5, 0.0], [0.3, 1.0, 1.0, 4.0]])
    compare(
        torch,
        lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=delta, weight=w),
        lambda a, b: torch.nn.functional.huber_loss(
            a, b, reduction=reduction, delta=delta, weight=torch.tensor(w.numpy())
        ),
        [x.detach().requires_grad_(True), y.detach()],
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_mse_and_l1_match_torch(torch, float64, reduction):
    """torch 2.13's weight= of mse_loss/l1_loss: 'mean' divides by the sum of the weights."""
    w = tt.rand(3, 4) + 0.1
    for ours, theirs in ((F.mse_loss, torch.nn.functional.mse_loss),
                         (F.l1_loss, torch.nn.functional.l1_loss)):  # fmt: skip
        x, y = tt.randn(3, 4, requires_grad=True), tt.randn(3, 4, requires_grad=True)
        compare(
            torch,
            lambda a, b, f=ours: f(a, b, reduction=reduction, weight=w),
            lambda a, b, f=theirs: f(a, b, reduction=reduction, weight=torch.tensor(w.numpy())),
            [x, y],
        )
    with pytest.raises(ValueError, match=r"mse_loss: weight must have the input's shape \(3, 4\)"):
        F.mse_loss(x, y, weight=w[0])


@pytest.mark.parametrize(
    "shape1, shape2, dim",
    [
        ((4, 5), (4, 5), 1),
        ((4, 5), (1, 5), 1),
        ((5,), (3, 5), -1),
        ((2, 3, 4), (2, 3, 4), 0),
        ((2, 3, 4), (3, 1), 1),
    ],
)
def test_cosine_similarity_matches_torch(torch, float64, shape1, shape2, dim):
    a, b = tt.randn(*shape1, requires_grad=True), tt.randn(*shape2, requires_grad=True)
    compare(
        torch,
        lambda x, y: F.cosine_similarity(x, y, dim=dim),
        lambda x, y: torch.nn.functional.cosine_similarity(x, y, dim=dim),
        [a, b],
    )
    compare(
        torch,
        lambda x, y: nn.CosineSimilarity(dim=dim, eps=1e-6)(x, y),
        lambda x, y: torch.nn.CosineSimilarity(dim=dim, eps=1e-6)(x, y),
        [a.detach().requires_grad_(True), b.detach().requires_grad_(True)],
    )


def test_cosine_similarity_of_a_zero_vector_is_zero_as_torch(torch, float64):
    a, b = tt.tensor([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0]]), tt.tensor([[1.0, 0.0, 0.0]])
    theirs = torch.nn.functional.cosine_similarity(torch.tensor(a.numpy()), torch.tensor(b.numpy()))
    assert_close(F.cosine_similarity(a, b), theirs)


def test_legacy_size_average_and_reduce_flags_match_torch(torch, float64):
    x, y = tt.randn(3, 4), tt.randn(3, 4)
    tx, ty = torch.tensor(x.numpy()), torch.tensor(y.numpy())
    for kwargs in [dict(size_average=False), dict(reduce=False), dict(size_average=True)]:
        for ours, theirs in [
            (nn.SmoothL1Loss(**kwargs), torch.nn.SmoothL1Loss(**kwargs)),
            (nn.MSELoss(**kwargs), torch.nn.MSELoss(**kwargs)),
            (nn.L1Loss(**kwargs), torch.nn.L1Loss(**kwargs)),
        ]:
            assert_close(ours(x, y), theirs(tx, ty), what=f"{type(ours).__name__}({kwargs})")
        # KLDivLoss takes the same flags
        p = x.softmax(-1)
        assert_close(
            nn.KLDivLoss(**kwargs)(x.log_softmax(-1), p),
            torch.nn.KLDivLoss(**kwargs)(tx.log_softmax(-1), torch.tensor(p.numpy())),
        )


@pytest.mark.parametrize(
    "name, fn",
    [
        ("kl_div", lambda x, t: F.kl_div(x, t.softmax(-1), reduction="batchmean")),
        ("kl_div-log_target", lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True)),
        ("binary_cross_entropy", lambda x, t: F.binary_cross_entropy(x.sigmoid(), t.sigmoid())),
        ("smooth_l1_loss", lambda x, t: F.smooth_l1_loss(x, t * 3, beta=0.7)),
        ("huber_loss", lambda x, t: F.huber_loss(x, t * 3, delta=1.3, reduction="sum")),
        ("cosine_similarity", lambda x, t: F.cosine_similarity(x, t, dim=0)),
    ],
)
def test_gradcheck(name, fn):
    rng = np.random.default_rng(1)
    x = tt.tensor(rng.uniform(-2, 2, (3, 4)), requires_grad=True)
    t = tt.tensor(rng.uniform(-2, 2, (3, 4)), requires_grad=True)
    assert tt.gradcheck(fn, [x, t]), name


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda x: F.kl_div(x, x, reduction="avg"), ValueError, "kl_div: reduction .* 'avg'"),
        (lambda x: F.kl_div(x, x[0]), ValueError, r"kl_div: input shape \(2, 3\)"),
        (lambda x: F.smooth_l1_loss(x, x, beta=-1), ValueError, "smooth_l1_loss: .*beta=-1"),
        (lambda x: F.huber_loss(x, x, delta=0), ValueError, "huber_loss: .*delta=0"),
        (lambda x: F.huber_loss(x, x, reduction="x"), ValueError, "huber_loss: reduction"),
        (lambda x: F.huber_loss(x, x, weight=x[0]), ValueError, r"huber_loss: weight .* \(3,\)"),
        (lambda x: F.binary_cross_entropy(x, 1.0), TypeError, "target must be a Tensor"),
        (lambda x: F.cosine_similarity(x, x, dim=2), IndexError, "cosine_similarity: dim=2"),
        (lambda x: F.cosine_similarity(x, x[:, :2]), ValueError, r"x1 \(2, 3\) and x2 \(2, 2\)"),
        (lambda x: F.cosine_similarity(x, x.numpy()), TypeError, "cosine_similarity: x2"),
    ],
)
def test_bad_arguments_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(tt.rand(2, 3))
