"""The ops, by family. Each op is a `Function` subclass plus a PyTorch-named function."""

from . import torch_extras  # PyTorch-named extras composed from the families below
from .attention import scaled_dot_product_attention
from .diagonal import diagonal, trace
from .elementwise import (
    abs,
    add,
    bitwise_not,
    cast,
    clamp,
    clone,
    compare,
    cos,
    div,
    eq,
    exp,
    gelu,
    isfinite,
    isnan,
    log,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    masked_fill,
    maximum,
    minimum,
    mul,
    neg,
    pow,
    relu,
    rsqrt,
    sigmoid,
    silu,
    sin,
    sqrt,
    sub,
    tanh,
    to_device,
    where,
)
from .heads import merge_heads, split_heads
from .linalg import linear, matmul
from .movement import (
    cat,
    chunk,
    concat,
    concatenate,
    expand,
    flatten,
    gather,
    getitem,
    normalize_index,
    permute,
    repeat_interleave,
    reshape,
    setitem,
    split,
    squeeze,
    stack,
    transpose,
    tril,
    triu,
    unsqueeze,
    view,
)
from .nn_ops import (
    cross_entropy,
    dropout,
    embedding,
    layer_norm,
    log_softmax,
    one_hot,
    rms_norm,
    softmax,
)
from .reduce import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    logsumexp,
    max,
    mean,
    min,
    std,
    sum,
    var,
)
from .sampling import multinomial
from .scatter import index_add, index_fill, scatter, scatter_add
from .sorting import argsort, argwhere, nonzero, sort, topk

__all__ = [name for name in dir() if not name.startswith("_")]

from ..tensor import bind_ops_as_methods  # noqa: E402 - needs every op above

bind_ops_as_methods()
