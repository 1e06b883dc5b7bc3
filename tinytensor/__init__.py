"""tinytensor: a small autograd engine on NumPy (CPU) and CuPy (GPU), with PyTorch's names.

    import tinytensor as tt
    x = tt.randn(3, 4, requires_grad=True)
    loss = (x @ x.T).relu().mean()
    loss.backward()
    tt.draw_graph(loss)            # the computation graph, as a graphviz Digraph

`tt.nn`, `tt.optim` and `tt.models` are imported on first use.
"""

import importlib

# (tensor_xp: NumPy's names on Tensors, what a backward runs on under create_graph)
from . import (  # noqa: F401
    accelerator,
    backends,
    cuda,
    dtypes,
    tensor_xp,
)
from .allocator import keep_freed_memory
from .amp import autocast
from .backend import Device as device
from .compiler import compile
from .creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from .dtypes import (
    bfloat16,
    bool,
    double,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    set_default_dtype,
    short,
    uint8,
)
from .function import (
    Function,
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .kernels.cpu import cpu_kernels, get_num_threads, set_num_threads  # fused CPU kernels
from .ops import (
    abs,
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    argsort,
    argwhere,
    bitwise_not,
    cat,
    chunk,
    clamp,
    clone,
    concat,
    concatenate,
    cos,
    cross_entropy,
    diagonal,
    div,
    dropout,
    embedding,
    eq,
    exp,
    expand,
    flatten,
    gather,
    gelu,
    index_add,
    index_fill,
    isfinite,
    isnan,
    layer_norm,
    linear,
    log,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    logsumexp,
    masked_fill,
    matmul,
    maximum,
    mean,
    minimum,
    mul,
    multinomial,
    neg,
    nonzero,
    one_hot,
    permute,
    pow,
    relu,
    repeat_interleave,
    reshape,
    rms_norm,
    rsqrt,
    scaled_dot_product_attention,
    scatter,
    scatter_add,
    sigmoid,
    silu,
    sin,
    softmax,
    sort,
    split,
    sqrt,
    squeeze,
    stack,
    std,
    sum,
    tanh,
    topk,
    trace,
    transpose,
    tril,
    triu,
    unsqueeze,
    var,
    where,
)
from .ops.attention import attention_backend
from .ops.torch_extras import (  # PyTorch's extra arguments (alpha=, dtype=, max(x, other))
    add,
    addcdiv,
    addcmul,
    allclose,
    bmm,
    ceil,
    clip,
    cumsum,
    dot,
    einsum,
    equal,
    erf,
    expm1,
    flip,
    floor,
    ge,
    gt,
    hstack,
    index_select,
    is_floating_point,
    is_tensor,
    isclose,
    le,
    lerp,
    log1p,
    lt,
    masked_select,
    max,
    min,
    mm,
    movedim,
    narrow,
    ne,
    norm,
    numel,
    outer,
    prod,
    reciprocal,
    roll,
    round,
    select,
    sign,
    square,
    std_mean,
    sub,
    t,
    tile,
    trunc,
    unbind,
    unflatten,
    var_mean,
    vstack,
)
from .ops.torch_extras import mv_ as mv
from .ops.torch_extras import repeat as _repeat  # noqa: F401 - Tensor.repeat's engine
from .random import Generator, initial_seed, manual_seed
from .tensor import Tensor
from .tensor_types import LEGACY_TYPES as _LEGACY_TYPES

globals().update(_LEGACY_TYPES)  # tt.FloatTensor, tt.LongTensor, tt.BoolTensor, ...

from . import autograd  # noqa: E402,F401 - loads the engine, which is Tensor.backward

__version__ = "0.1.0"

keep_freed_memory()  # freed op results are reused, not page-faulted in again: allocator.py

_LAZY = {
    "nn",
    "optim",
    "models",
    "viz",
    "serialization",
    "linalg",
    "autograd",
    "utils",
    "amp",
    "func",
    "testing",
    "jit",
}
_LAZY.add("distributed")  # tt.distributed: its MPI/NCCL libraries load only at init


def __getattr__(name):
    # nn and models sit above the engine (they import it, never the reverse), so they load on
    # first use: `tt.nn.Linear` works after a plain `import tinytensor as tt`.
    if name in _LAZY:
        return importlib.import_module(f"tinytensor.{name}")
    if name in ("draw_graph",):
        return importlib.import_module("tinytensor.viz").draw_graph
    if name == "explore":  # the package tinytensor.explore is itself callable: tt.explore(loss)
        return importlib.import_module("tinytensor.explore")
    if name in ("save", "load"):
        return getattr(importlib.import_module("tinytensor.serialization"), name)
    raise AttributeError(f"module 'tinytensor' has no attribute {name!r}")
