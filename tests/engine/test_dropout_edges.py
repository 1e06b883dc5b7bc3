"""Dropout with p = 1 drops everything, in activations and in attention weights (no 1/0)."""

import numpy as np

import tinytensor as tt


def test_dropout_p1_gives_zeros_and_zero_gradient():
    x = tt.randn(4, 5, requires_grad=True)
    y = tt.nn.functional.dropout(x, p=1.0)
    y.sum().backward()
    assert not np.any(y.numpy()) and not np.any(x.grad.numpy())


def test_attention_dropout_p1_gives_zeros_not_nan():
    q = tt.randn(1, 2, 3, 4, requires_grad=True)
    out = tt.scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    out.sum().backward()
    assert np.all(out.numpy() == 0) and np.all(np.isfinite(q.grad.numpy()))
