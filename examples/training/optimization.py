"""AdamW with weight decay on matrices only, and a warmup + cosine learning-rate schedule."""

from __future__ import annotations

import math

import tinytensor as tt


def make_adamw(model, lr: float, weight_decay: float, betas=(0.9, 0.99)):
    """AdamW whose weight decay applies to the matrices (ndim >= 2) only.

    NOTE: decaying biases, norm gains and other vectors pulls them towards zero for no benefit
    (they do not grow a model's capacity); GPT-2/nanoGPT exempt them, and so do we.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return tt.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=betas)


def warmup_cosine_factor(step: int, warmup_steps: int, total_steps: int, floor: float) -> float:
    """lr / peak lr at `step`: linear from 1/warmup to 1 over `warmup_steps`, then a half cosine
    down to `floor` at `total_steps` (and `floor` beyond)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def warmup_cosine(optimizer, warmup_steps: int, total_steps: int, floor: float = 0.1):
    """A LambdaLR that follows `warmup_cosine_factor` (decaying to floor × the peak lr)."""
    return tt.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_cosine_factor(step, warmup_steps, total_steps, floor)
    )
