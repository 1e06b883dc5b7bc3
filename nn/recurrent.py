"""Recurrent layers as `torch.nn`: `RNN`, `LSTM`, `GRU` (stacked, optionally bidirectional) and
their single-step cells `RNNCell`, `LSTMCell`, `GRUCell`.

Built from existing differentiable ops (linear, sigmoid, tanh, stack), so gradients need no
recurrent-specific code. Per layer and direction, the input projection x·W_ihᵀ + b_ih is one
matmul over all time steps; only h·W_hhᵀ + b_hh runs step by step.

Parameter names, shapes, gate order and initialization are PyTorch's, so a PyTorch state_dict
loads unchanged:
    weight_ih_l{k}[_reverse] (G·H, in), weight_hh_l{k}[_reverse] (G·H, H), bias_ih_.., bias_hh_..
with G = 1 (RNN), 4 (LSTM: i, f, g, o), 3 (GRU: r, z, n), all initialized U(±1/√H).
"""

from __future__ import annotations

import math

from tinytensor.creation import empty, zeros
from tinytensor.ops import cat, dropout, linear, relu, sigmoid, stack, tanh
from tinytensor.ops._checks import check_int, check_probability
from tinytensor.tensor import Tensor

from . import init
from .module import Module
from .parameter import Parameter

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_step(x_proj, h, c, w_hh, b_hh, mode):
    """One time step. x_proj = x·W_ihᵀ + b_ih (B, G·H); returns the new (h, c) (c only for LSTM).

    RNN:  h' = act(x_proj + h·W_hhᵀ + b_hh)
    LSTM: i, f, g, o = σ, σ, tanh, σ of (x_proj + h·W_hhᵀ + b_hh);  c' = f⊙c + i⊙g;  h' = o⊙tanh(c')
    GRU:  r, z = σ(x_r + h_r), σ(x_z + h_z);  n = tanh(x_n + r⊙h_n);  h' = (1 - z)⊙n + z⊙h
    """
    h_proj = linear(h, w_hh, b_hh)
    if mode == "LSTM":
        i, f, g, o = (x_proj + h_proj).chunk(4, 1)
        c = sigmoid(f) * c + sigmoid(i) * tanh(g)
        return sigmoid(o) * tanh(c), c
    if mode == "GRU":
        x_r, x_z, x_n = x_proj.chunk(3, 1)
        h_r, h_z, h_n = h_proj.chunk(3, 1)
        r, z = sigmoid(x_r + h_r), sigmoid(x_z + h_z)
        n = tanh(x_n + r * h_n)
        return (1 - z) * n + z * h, None
    pre = x_proj + h_proj
    return (tanh(pre) if mode == "RNN_TANH" else relu(pre)), None


def _check_input(x, name, input_size, allowed_dims):
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{name}: input must be a Tensor, got {type(x).__name__} "
            "(packed sequences are not supported: pad the batch and pass a Tensor)"
        )
    if x.dim() not in allowed_dims or x.shape[-1] != input_size:
        raise ValueError(
            f"{name}: input of shape {tuple(x.shape)} does not fit: expected "
            f"{' or '.join(f'{d}-D' for d in allowed_dims)} with last dim input_size={input_size}"
        )


def _check_state(state, name, what, shape):
    if tuple(state.shape) != tuple(shape):
        raise ValueError(f"{name}: {what} has shape {tuple(state.shape)}, expected {tuple(shape)}")


class RNNBase(Module):
    """A stack of recurrent layers (see RNN, LSTM, GRU for the step each one runs).

    Shapes (L = num_layers · num_directions, H = hidden_size):
        input (T, B, in), or (B, T, in) with batch_first, or unbatched (T, in)
        output (T, B, num_directions·H) in the same layout; h_n (and LSTM's c_n) (L, B, H)
    Dropout p is applied to the outputs of every layer except the last, in training only.
    """

    def __init__(
        self,
        mode,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        name = "RNN" if mode.startswith("RNN") else mode
        self.mode = mode
        self.input_size = check_int(input_size, name, "input_size", minimum=1)
        self.hidden_size = check_int(hidden_size, name, "hidden_size", minimum=1)
        self.num_layers = check_int(num_layers, name, "num_layers", minimum=1)
        check_probability(dropout, name, "dropout")
        if proj_size:
            raise NotImplementedError(f"{name}: proj_size={proj_size} is not supported (use 0)")
        self.bias, self.batch_first = bool(bias), bool(batch_first)
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        self.proj_size = 0
        num_directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * num_directions
            for suffix in ("", "_reverse")[:num_directions]:
                shapes = {
                    f"weight_ih_l{layer}{suffix}": (gate_size, layer_input),
                    f"weight_hh_l{layer}{suffix}": (gate_size, hidden_size),
                }
                if bias:
                    shapes[f"bias_ih_l{layer}{suffix}"] = (gate_size,)
                    shapes[f"bias_hh_l{layer}{suffix}"] = (gate_size,)
                for param_name, shape in shapes.items():
                    setattr(self, param_name, Parameter(empty(*shape, dtype=dtype, device=device)))
                    self._flat_weights_names.append(param_name)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """Nothing to do: the weights are used where they are (PyTorch packs them for cuDNN)."""

    @property
    def all_weights(self):
        return [
            [getattr(self, n) for n in self._flat_weights_names if n.endswith(f"_l{layer}{sfx}")]
            for layer in range(self.num_layers)
            for sfx in ("", "_reverse")[: 2 if self.bidirectional else 1]
        ]

    def _weights(self, layer, direction):
        """(weight_ih, weight_hh, bias_ih, bias_hh) of a layer and direction; biases may be None."""
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        weights = getattr(self, "weight_ih" + suffix), getattr(self, "weight_hh" + suffix)
        if not self.bias:
            return (*weights, None, None)
        return (*weights, getattr(self, "bias_ih" + suffix), getattr(self, "bias_hh" + suffix))

    def forward(self, input, hx=None):  # noqa: A002 - PyTorch's argument name
        name = type(self).__name__
        _check_input(input, name, self.input_size, (2, 3))
        unbatched = input.dim() == 2
        x = input.unsqueeze(1) if unbatched else input
        if self.batch_first and not unbatched:
            x = x.transpose(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        num_directions = 2 if self.bidirectional else 1
        state_shape = (self.num_layers * num_directions, batch, self.hidden_size)
        h0, c0 = self._initial_state(hx, name, x, state_shape, unbatched)

        layer_input, h_n, c_n = x, [], []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(num_directions):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
                x_proj = linear(layer_input, w_ih, b_ih)  # all time steps in one matmul
                index = layer * num_directions + direction
                h, c = h0[index], (c0[index] if c0 is not None else None)
                per_step = [None] * steps
                for t in range(steps) if direction == 0 else reversed(range(steps)):
                    h, c = _rnn_step(x_proj[t], h, c, w_hh, b_hh, self.mode)
                    per_step[t] = h
                outputs.append(stack(per_step, 0))
                h_n.append(h)
                c_n.append(c)
            layer_input = outputs[0] if num_directions == 1 else cat(outputs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = dropout(layer_input, self.dropout, True)

        output = layer_input
        h_n = stack(h_n, 0)
        c_n = stack(c_n, 0) if self.mode == "LSTM" else None
        if unbatched:
            output, h_n = output.squeeze(1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if c_n is not None else None
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def _initial_state(self, hx, name, x, state_shape, unbatched):
        """h0 (and c0) as (L, B, H): zeros when hx is None, else hx checked (and unsqueezed)."""
        if hx is None:
            h0 = zeros(*state_shape, dtype=x.dtype, device=x.device)
            return h0, (h0 if self.mode == "LSTM" else None)
        if self.mode == "LSTM":
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"LSTM: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
            states = list(hx)
        else:
            if not isinstance(hx, Tensor):
                raise TypeError(f"{name}: hx must be a Tensor h_0, got {type(hx).__name__}")
            states = [hx]
        if unbatched:
            states = [s.unsqueeze(1) if s.dim() == 2 else s for s in states]
        for what, s in zip(("h_0", "c_0"), states):
            _check_state(s, name, what, state_shape)
        return states[0], (states[1] if self.mode == "LSTM" else None)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN, as `torch.nn.RNN`: h_t = act(x_t·W_ihᵀ + b_ih + h_{t-1}·W_hhᵀ + b_hh),
    act = tanh (default) or relu (`nonlinearity='relu'`)."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        nonlinearity="tanh",
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        device=None,
        dtype=None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(
            "RNN_" + nonlinearity.upper(),
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            0,
            device,
            dtype,
        )
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory, as `torch.nn.LSTM` (gates i, f, g, o; see `_rnn_step`).
    Returns output, (h_n, c_n); hx is a tuple (h_0, c_0) or None (zeros)."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__(
            "LSTM",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            device,
            dtype,
        )


class GRU(RNNBase):
    """Gated recurrent unit, as `torch.nn.GRU` (gates r, z, n; see `_rnn_step`)."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        device=None,
        dtype=None,
    ):
        super().__init__(
            "GRU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            0,
            device,
            dtype,
        )


class _CellBase(Module):
    """One step of a recurrent layer; weight_ih (G·H, in), weight_hh (G·H, H), bias_ih, bias_hh."""

    def __init__(self, mode, input_size, hidden_size, bias, device, dtype):
        super().__init__()
        name = type(self).__name__
        self.mode = mode
        self.input_size = check_int(input_size, name, "input_size", minimum=1)
        self.hidden_size = check_int(hidden_size, name, "hidden_size", minimum=1)
        self.bias = bool(bias)
        gate_size = _GATES[mode] * hidden_size
        self.weight_ih = Parameter(empty(gate_size, input_size, dtype=dtype, device=device))
        self.weight_hh = Parameter(empty(gate_size, hidden_size, dtype=dtype, device=device))
        self.bias_ih = Parameter(empty(gate_size, dtype=dtype, device=device)) if bias else None
        self.bias_hh = Parameter(empty(gate_size, dtype=dtype, device=device)) if bias else None
        stdv = 1.0 / math.sqrt(hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def forward(self, input, hx=None):  # noqa: A002 - PyTorch's argument name
        name = type(self).__name__
        _check_input(input, name, self.input_size, (1, 2))
        unbatched = input.dim() == 1
        x = input.unsqueeze(0) if unbatched else input
        shape = (x.shape[0], self.hidden_size)
        if hx is None:
            h = zeros(*shape, dtype=x.dtype, device=x.device)
            states = [h, h] if self.mode == "LSTM" else [h]
        else:
            states = list(hx) if self.mode == "LSTM" else [hx]
            states = [s.unsqueeze(0) if unbatched else s for s in states]
            for what, s in zip(("h", "c"), states):
                _check_state(s, name, what, shape)
        x_proj = linear(x, self.weight_ih, self.bias_ih)
        h, c = _rnn_step(x_proj, states[0], states[-1], self.weight_hh, self.bias_hh, self.mode)
        if unbatched:
            h, c = h.squeeze(0), (c.squeeze(0) if c is not None else None)
        return (h, c) if self.mode == "LSTM" else h

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """One Elman step, as `torch.nn.RNNCell`: h' = act(x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh)."""

    def __init__(
        self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}"
            )
        super().__init__(
            "RNN_" + nonlinearity.upper(), input_size, hidden_size, bias, device, dtype
        )
        self.nonlinearity = nonlinearity


class LSTMCell(_CellBase):
    """One LSTM step, as `torch.nn.LSTMCell`: returns (h', c'); hx is (h, c) or None."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)


class GRUCell(_CellBase):
    """One GRU step, as `torch.nn.GRUCell`."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)
