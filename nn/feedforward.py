"""`FeedForward`: the position-wise MLP of a Transformer block, plain or gated (GEGLU, SwiGLU)."""

from __future__ import annotations

from .activation import activation_fn
from .dropout import Dropout
from .linear import Linear
from .module import Module

_GATED_ALIASES = {"geglu": "gelu", "geglu_tanh": "gelu_tanh", "swiglu": "silu", "reglu": "relu"}


class FeedForward(Module):
    """Plain:  y = fc_out(dropout(act(fc_in(x))))
    Gated:  y = fc_out(dropout(act(fc_gate(x)) * fc_in(x)))   (Shazeer 2020, "GLU Variants")

    Args:
        d_model: input and output size.
        d_ff: hidden size.
        activation: relu, gelu, gelu_tanh (GPT-2), silu; or a gated variant: geglu (gelu),
            geglu_tanh (T5 v1.1's "gated-gelu"), swiglu (silu, Llama), reglu (relu).
        bias: biases on all projections (T5 and Llama have none).
        dropout: applied to the hidden activations (as T5's DenseReluDense).

    Parameters (for mapping checkpoints):
        fc_in:   (d_ff, d_model)  GPT-2 c_fc, BERT intermediate.dense, T5 wi / wi_1,
                 Llama up_proj
        fc_gate: (d_ff, d_model)  gated only, the ACTIVATED branch: T5 wi_0, Llama gate_proj
        fc_out:  (d_model, d_ff)  GPT-2 c_proj, BERT output.dense, T5 wo, Llama down_proj

    Shape:
        (*, d_model) -> (*, d_model)
    """

    def __init__(
        self, d_model, d_ff, activation="gelu", bias=True, dropout=0.0, device=None, dtype=None
    ):
        super().__init__()
        self.gated = activation in _GATED_ALIASES
        self.activation = activation
        self.act = activation_fn(_GATED_ALIASES.get(activation, activation))
        self.fc_in = Linear(d_model, d_ff, bias=bias, device=device, dtype=dtype)
        self.fc_gate = (
            Linear(d_model, d_ff, bias=bias, device=device, dtype=dtype) if self.gated else None
        )
        self.fc_out = Linear(d_ff, d_model, bias=bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x):
        if self.gated:
            h = self.act(self.fc_gate(x)) * self.fc_in(x)
        else:
            h = self.act(self.fc_in(x))
        return self.fc_out(self.dropout(h))

    def extra_repr(self):
        return f"activation={self.activation!r}"
