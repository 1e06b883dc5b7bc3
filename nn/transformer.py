"""PyTorch's Transformer family, with its signatures, parameter names and state_dict layout:
`Transformer`, `TransformerEncoder`, `TransformerDecoder`, `TransformerEncoderLayer`,
`TransformerDecoderLayer` (Vaswani et al. 2017, "Attention Is All You Need").

    Post-LN (norm_first=False, the default):       Pre-LN (norm_first=True):
        x = norm1(x + dropout1(self_attn(x)))          x = x + dropout1(self_attn(norm1(x)))
        x = norm2(x + dropout2(ff(x)))                 x = x + dropout2(ff(norm2(x)))
    ff(x) = linear2(dropout(activation(linear1(x))))

The decoder layer puts cross-attention to `memory` (multihead_attn, norm2, dropout2) between the
two, and its feed-forward uses norm3 and dropout3. Inputs are (T, N, E) unless batch_first. Masks
are PyTorch's: bool True = may NOT attend / is padding, float = added to the scores.

tinytensor's own blocks (batch first, True = may attend, RMSNorm, RoPE, KV cache) are
`nn.EncoderBlock` and `nn.DecoderBlock` in blocks.py.
"""

from __future__ import annotations

import copy

from tinytensor.creation import arange, zeros
from tinytensor.function import is_grad_enabled
from tinytensor.ops import gelu, relu
from tinytensor.ops._checks import check_int

from . import init
from .activation import GELU, ReLU
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .multihead_attention import MultiheadAttention
from .normalization import LayerNorm

_ACTIVATIONS = {"relu": relu, "gelu": gelu}


def _activation_fn(activation, where):
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"{where}: activation should be relu/gelu, not {activation!r}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(
            f"{where}: activation must be 'relu', 'gelu' or a callable, got "
            f"{type(activation).__name__}"
        )
    return activation


def _attention(attn, query, key_value, attn_mask, key_padding_mask, is_causal):
    """The output of MultiheadAttention `attn` for `query` over `key_value`, without the weights
    (the attention sub-layer of both Transformer layers)."""
    return attn(
        query,
        key_value,
        key_value,
        attn_mask=attn_mask,
        key_padding_mask=key_padding_mask,
        need_weights=False,
        is_causal=is_causal,
    )[0]


def _clones(layer, n, where, argument):
    """n independent deep copies of `layer` (the layer passed in is a template, as PyTorch)."""
    if not isinstance(layer, Module):
        raise TypeError(f"{where}: {argument} must be a Module, got {type(layer).__name__}")
    check_int(n, where, "num_layers", minimum=0)
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


def _is_causal_mask(mask, is_causal, size):
    """PyTorch's reading of the `is_causal` hint: None means "find out whether `mask` is the
    square subsequent mask"; an explicit True or False is taken as given."""
    if is_causal is not None or mask is None:
        return bool(is_causal)
    if tuple(mask.shape) != (size, size):
        return False
    causal = Transformer.generate_square_subsequent_mask(size, device=mask.device)
    if mask.dtype.kind == "b":
        causal = causal == float("-inf")
    return bool((mask == causal).all())


def _nested_tensor_layer(layer):
    """PyTorch's conditions on the layer for TransformerEncoder's nested-tensor path."""
    return (
        isinstance(layer, TransformerEncoderLayer)
        and not layer.norm_first
        and layer.self_attn.batch_first
        and layer.self_attn._qkv_same_embed_dim
        and layer.self_attn.in_proj_bias is not None
        and (layer.activation in (relu, gelu) or isinstance(layer.activation, (ReLU, GELU)))
        and layer.norm1.eps == layer.norm2.eps
        and layer.self_attn.num_heads % 2 == 0
    )


def _padding_at_the_end(key_padding_mask):
    """True when every row is real tokens followed by padding (PyTorch's mask_check)."""
    padding = (key_padding_mask != 0).numpy()
    return bool((padding[:, 1:] >= padding[:, :-1]).all())


def _seq_len(x, batch_first):
    return x.shape[1] if batch_first and x.ndim == 3 else x.shape[0]


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward network, each in a residual, as
    `torch.nn.TransformerEncoderLayer`.

    Args:
        d_model: E, the size of the input and output features.
        nhead: attention heads.
        dim_feedforward: the feed-forward's hidden size.
        dropout: on the attention probabilities, inside the feed-forward and on both residuals.
        activation: "relu", "gelu" or a callable (a Module is registered as a submodule).
        layer_norm_eps: LayerNorm's epsilon.
        batch_first: (N, T, E) inputs instead of (T, N, E).
        norm_first: Pre-LN (True) or Post-LN (False).
        bias: biases in the projections, the feed-forward and the LayerNorms.

    Parameters: self_attn (MultiheadAttention), linear1, linear2, norm1, norm2.

    forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False) -> like src.

    Example:
        >>> layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32)
        >>> layer(tt.randn(5, 2, 16)).shape
        (5, 2, 16)
    """

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_int(dim_feedforward, "TransformerEncoderLayer", "dim_feedforward", minimum=0)
        factory = dict(device=device, dtype=dtype)
        # Attribute order is PyTorch's registration order, hence its state_dict order.
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **factory
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation_fn(activation, "TransformerEncoderLayer")

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        return self.dropout1(
            _attention(self.self_attn, x, x, attn_mask, key_padding_mask, is_causal)
        )

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention to the encoder output and a feed-forward network, each
    in a residual, as `torch.nn.TransformerDecoderLayer`.

    Args: as `TransformerEncoderLayer`.

    Parameters: self_attn, multihead_attn (both MultiheadAttention), linear1, linear2, norm1,
    norm2, norm3.

    forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
            memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)
        -> like tgt. tgt (T, N, E), memory (S, N, E) (batch dim first with batch_first).
    """

    def __init__(
        self,
        d_model,
        nhead,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_int(dim_feedforward, "TransformerDecoderLayer", "dim_feedforward", minimum=0)
        factory = dict(device=device, dtype=dtype)
        attention = dict(dropout=dropout, bias=bias, batch_first=batch_first, **factory)
        self.self_attn = MultiheadAttention(d_model, nhead, **attention)
        self.multihead_attn = MultiheadAttention(d_model, nhead, **attention)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation_fn(activation, "TransformerDecoderLayer")

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=False,
        memory_is_causal=False,
    ):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(
                self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal
            )
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(
            x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal)
        )
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        return self.dropout1(
            _attention(self.self_attn, x, x, attn_mask, key_padding_mask, is_causal)
        )

    def _mha_block(self, x, memory, attn_mask, key_padding_mask, is_causal):
        return self.dropout2(
            _attention(self.multihead_attn, x, memory, attn_mask, key_padding_mask, is_causal)
        )

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """A stack of `num_layers` copies of `encoder_layer`, then an optional norm, as
    `torch.nn.TransformerEncoder`.

    Args:
        encoder_layer: the template layer (deep-copied num_layers times; not itself used).
        num_layers: how many layers.
        norm: applied to the last layer's output (a Pre-LN stack needs one), or None.
        enable_nested_tensor, mask_check: as PyTorch. In inference (eval mode, no gradient)
            with a src_key_padding_mask and no mask, PyTorch runs the stack on a nested tensor
            and the padded positions come back as zeros (then the final norm); so do they here,
            under PyTorch's conditions (batch_first, Post-LN, even nhead, relu/gelu, ...).
            NOTE: the computation is the same padded one; only the padded rows are zeroed.

    forward(src, mask=None, src_key_padding_mask=None, is_causal=None) -> like src.
        is_causal=None: detect whether `mask` is the square subsequent mask (as PyTorch).
    """

    def __init__(
        self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True
    ):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers, "TransformerEncoder", "encoder_layer")
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor and _nested_tensor_layer(encoder_layer)
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        batch_first = getattr(getattr(self.layers[0], "self_attn", None), "batch_first", False)
        is_causal = _is_causal_mask(mask, is_causal, _seq_len(src, batch_first))
        output = src
        for layer in self.layers:
            output = layer(
                output,
                src_mask=mask,
                src_key_padding_mask=src_key_padding_mask,
                is_causal=is_causal,
            )
        if self._takes_nested_tensor_path(src, mask, src_key_padding_mask):
            padding = src_key_padding_mask != 0  # bool True, or a float mask's nonzero
            output = output.masked_fill(padding.unsqueeze(-1), 0.0)
        return output if self.norm is None else self.norm(output)

    def _takes_nested_tensor_path(self, src, mask, src_key_padding_mask):
        """Whether PyTorch would run this call as a nested tensor, whose padded positions come
        back as zeros (before the final norm). Only in inference: eval mode, no gradient."""
        if not self.use_nested_tensor or self.layers[0].training or src.ndim != 3:
            return False
        if src_key_padding_mask is None or mask is not None:
            return False
        if is_grad_enabled() and (
            src.requires_grad or any(p.requires_grad for p in self.layers[0].parameters())
        ):
            return False
        return not self.mask_check or _padding_at_the_end(src_key_padding_mask)


class TransformerDecoder(Module):
    """A stack of `num_layers` copies of `decoder_layer`, then an optional norm, as
    `torch.nn.TransformerDecoder`.

    forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
            memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers, "TransformerDecoder", "decoder_layer")
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        batch_first = getattr(getattr(self.layers[0], "self_attn", None), "batch_first", False)
        tgt_is_causal = _is_causal_mask(tgt_mask, tgt_is_causal, _seq_len(tgt, batch_first))
        output = tgt
        for layer in self.layers:
            output = layer(
                output,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=tgt_is_causal,
                memory_is_causal=memory_is_causal,
            )
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """The encoder-decoder Transformer, as `torch.nn.Transformer`.

    Args:
        d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
            norm_first, bias: as `TransformerEncoderLayer`.
        num_encoder_layers, num_decoder_layers: stack depths.
        custom_encoder, custom_decoder: Modules used instead of the default stacks.

    The default stacks end with a LayerNorm each (encoder.norm, decoder.norm). All weight
    matrices are initialized Xavier-uniform, as PyTorch.

    forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
            src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
            src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)
        src (S, N, E), tgt (T, N, E) (N first with batch_first) -> (T, N, E).

    Example:
        >>> model = nn.Transformer(d_model=16, nhead=4, num_encoder_layers=2,
        ...                        num_decoder_layers=2, dim_feedforward=32)
        >>> mask = nn.Transformer.generate_square_subsequent_mask(7)
        >>> model(tt.randn(5, 2, 16), tt.randn(7, 2, 16), tgt_mask=mask).shape
        (7, 2, 16)
    """

    def __init__(
        self,
        d_model=512,
        nhead=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dim_feedforward=2048,
        dropout=0.1,
        activation="relu",
        custom_encoder=None,
        custom_decoder=None,
        layer_norm_eps=1e-5,
        batch_first=False,
        norm_first=False,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        factory = dict(device=device, dtype=dtype)
        layer = dict(
            d_model=d_model,
            nhead=nhead,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=batch_first,
            norm_first=norm_first,
            bias=bias,
            **factory,
        )
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(**layer), num_encoder_layers, norm
            )
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(**layer), num_decoder_layers, norm
            )
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        self._reset_parameters()

    def _reset_parameters(self):
        """Xavier-uniform on every weight matrix (PyTorch's name; subclasses call it)."""
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(
        self,
        src,
        tgt,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        src_key_padding_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        src_is_causal=None,
        tgt_is_causal=None,
        memory_is_causal=False,
    ):
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise ValueError(
                f"Transformer.forward: the batch size of src ({src.shape[batch_dim]}) and tgt "
                f"({tgt.shape[batch_dim]}) must be equal (batch_first={self.batch_first})"
            )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(
                f"Transformer.forward: the feature size of src ({src.shape[-1]}) and tgt "
                f"({tgt.shape[-1]}) must equal d_model={self.d_model}"
            )
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The causal mask for a sequence of `sz`: a float (sz, sz) Tensor with -inf above the
        diagonal (position i may not see j > i) and 0 elsewhere, as PyTorch."""
        # NOTE: not full(-inf).triu(1): triu multiplies by a 0/1 mask, and -inf·0 is NaN.
        position = arange(sz, device=device)
        future = position.reshape(1, sz) > position.reshape(sz, 1)  # (sz, sz), j > i
        return zeros(sz, sz, dtype=dtype, device=device).masked_fill(future, float("-inf"))
