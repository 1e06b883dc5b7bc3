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

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(Module):
    """`F.l1_loss(input, target, reduction)`."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

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
