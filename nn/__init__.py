"""tinytensor.nn: modules, layers, attention, losses (PyTorch's names and semantics).

    import tinytensor as tt
    from tinytensor import nn
    import tinytensor.nn.functional as F

Building blocks for the models (models/ builds GPT, BERT, T5 and BART from these):
    Module, Parameter                                               module.py, parameter.py
    ModuleList, ModuleDict, Sequential, ParameterList, ParameterDict container.py
    Linear, Identity, Embedding, LayerNorm, RMSNorm, BatchNorm1d    linear.py, embedding.py, ...
    Dropout, ReLU, GELU, SiLU, Tanh, Sigmoid, FeedForward          activation.py, feedforward.py
    LeakyReLU, Softmax, LogSoftmax, Flatten, Unflatten             activation.py, flatten.py
    RNN, LSTM, GRU, RNNCell, LSTMCell, GRUCell                      recurrent.py
    LearnedPositionalEmbedding, SinusoidalPositionalEncoding,
    RotaryEmbedding, ALiBi, T5RelativePositionBias                  positional.py, rotary.py, ...
    Attention, KVCache (our attention: GQA, RoPE, cache)           attention.py, kv_cache.py
    EncoderBlock, DecoderBlock (our Pre-/Post-LN blocks)            blocks.py
    CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss,
    BCELoss, KLDivLoss, SmoothL1Loss, HuberLoss, CosineSimilarity,
    InfoNCELoss                                                     loss.py
    init (weight initializers), functional (F)
PyTorch's attention and Transformer layers, with its signatures and state_dict layout:
    MultiheadAttention                                              multihead_attention.py
    Transformer, TransformerEncoder, TransformerDecoder,
    TransformerEncoderLayer, TransformerDecoderLayer                transformer.py
"""

# ruff: noqa: F401 - this file re-exports the public API
from . import functional, init, parallel, utils
from .activation import (
    GELU,
    LeakyReLU,
    LogSoftmax,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
    activation_fn,
)
from .alibi import ALiBi, alibi_slopes
from .attention import Attention
from .batchnorm import BatchNorm1d
from .blocks import DecoderBlock, EncoderBlock, make_norm
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .dropout import Dropout
from .embedding import Embedding
from .feedforward import FeedForward
from .flatten import Flatten, Unflatten
from .kv_cache import KVCache
from .linear import Identity, Linear
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineSimilarity,
    CrossEntropyLoss,
    HuberLoss,
    InfoNCELoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module
from .multihead_attention import MultiheadAttention
from .normalization import LayerNorm, RMSNorm
from .parameter import Parameter
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell
from .relative_position import T5RelativePositionBias, relative_position_bucket
from .rotary import RotaryEmbedding, rotate_half
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [name for name in dir() if not name.startswith("_")]
