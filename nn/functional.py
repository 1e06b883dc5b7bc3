"""`tinytensor.nn.functional` (import as F): the functional forms, as `torch.nn.functional`.

The fused ops live in the engine (`tinytensor/ops`); this module gathers them under PyTorch's
names, next to the losses and helpers that nn adds on top.
"""

from tinytensor.ops import (  # noqa: F401 - re-exported
    cross_entropy,
    dropout,
    embedding,
    gelu,
    layer_norm,
    linear,
    log_softmax,
    one_hot,
    relu,
    rms_norm,
    scaled_dot_product_attention,
    sigmoid,
    silu,
    softmax,
    tanh,
)
