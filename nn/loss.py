"""Loss modules: thin wrappers that hold a loss's options and call `nn.functional`."""

from __future__ import annotations

from . import functional as F
from .module import Module


class CrossEntropyLoss(Module):
    """`F.cross_entropy(logits, target, weight, ignore_index, reduction, label_smoothing)`."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        self.weight = weight  # NOTE: a plain attribute (torch keeps it as a buffer)
        self.ignore_index, self.reduction = ignore_index, reduction
        self.label_smoothing = label_smoothing

    def forward(self, input, target):  # noqa: A002
        return F.cross_entropy(
            input,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )


class NLLLoss(Module):
    """`F.nll_loss(log_probs, target, weight, ignore_index, reduction)`."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__()
        self.weight = weight
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, input, target):  # noqa: A002
        return F.nll_loss(
            input,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
        )


class MSELoss(Module):
    """`F.mse_loss(input, target, reduction)`."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)

    def forward(self, input, target):  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(Module):
    """`F.l1_loss(input, target, reduction)`."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)

    def forward(self, input, target):  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(Module):
    """`F.binary_cross_entropy_with_logits`; `weight` and `pos_weight` are buffers (saved in the
    state_dict and moved by `.to()`, as PyTorch)."""

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__()
        self.reduction = reduction
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):  # noqa: A002
        return F.binary_cross_entropy_with_logits(
            input, target, weight=self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )


class InfoNCELoss(Module):
    """`F.info_nce(a, b, temperature, symmetric)`: contrastive loss with in-batch negatives."""

    def __init__(self, temperature=0.07, symmetric=True, reduction="mean"):
        super().__init__()
        self.temperature, self.symmetric, self.reduction = temperature, symmetric, reduction

    def forward(self, a, b):
        return F.info_nce(
            a, b, temperature=self.temperature, symmetric=self.symmetric, reduction=self.reduction
        )


class KLDivLoss(Module):
    """`F.kl_div(log_probs, target, reduction, log_target)`; use reduction='batchmean' for the
    KL divergence itself (PyTorch's default 'mean' also divides by the number of classes)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(Module):
    """`F.binary_cross_entropy(probs, target, weight, reduction)`; `weight` is a buffer."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):  # noqa: A002
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class SmoothL1Loss(Module):
    """`F.smooth_l1_loss(input, target, reduction, beta)`."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(Module):
    """`F.huber_loss(input, target, reduction, delta)`."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__()
        self.reduction, self.delta = reduction, delta

    def forward(self, input, target):  # noqa: A002
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class CosineSimilarity(Module):
    """`F.cosine_similarity(x1, x2, dim, eps)`."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, dim=self.dim, eps=self.eps)
