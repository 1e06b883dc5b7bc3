"""`Parameter`: a Tensor that a Module registers as one of its trainable weights."""

from __future__ import annotations

from tinytensor.tensor import Tensor


class Parameter(Tensor):
    """A leaf Tensor with `requires_grad=True` that `Module` finds and lists in `parameters()`.

    `Parameter(tensor)` shares `tensor`'s array (no copy), as in PyTorch. Only Parameters are
    parameters: a plain Tensor attribute is neither trained nor saved (use `register_buffer`).

    Example:
        >>> w = nn.Parameter(tt.randn(3, 4))
        >>> w.requires_grad
        True
    """

    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = Tensor([])
        super().__init__(data)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
