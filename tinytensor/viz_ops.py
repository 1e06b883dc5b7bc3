"""The arguments of a graph node, as the short text under its op name in a drawn graph.

An op's forward keeps what its backward needs, and that includes most of its arguments: the
reduced dims, `approximate`, the attention scale, the dropout mask (whose scale gives p), ...
`op_arguments(node)` reads them back from the node's saved attributes, so a drawn graph says
"Softmax dim=3" or "ScaledDotProductAttention causal, scale=0.25" rather than the op name alone.
An argument that no op keeps cannot be shown (e.g. masked_fill's value).
"""

from __future__ import annotations

import numpy as np


def op_arguments(node) -> str:
    """The arguments of `node` (a Function) worth a reader's attention, e.g. "dim=1, keepdim"."""
    describe = _DESCRIBERS.get(type(node).__name__, _generic)
    try:
        parts = describe(vars(node))
    except Exception:  # a node freed by backward, or an op that changed what it keeps
        return ""
    return ", ".join(p for p in parts if p)


# ---- one describer per op whose saved attributes hold arguments -------------------------------


def _dims(saved, key="axes"):
    axes = saved.get(key)
    if axes is None:
        return []
    if isinstance(axes, (tuple, list)):
        return [f"dim={_short(tuple(axes))}"] if axes else ["dim=all"]
    return [f"dim={axes}"]


def _reduction(saved):
    """Reduced dims, left out when they are all of them (the plain `x.sum()`)."""
    ndim = len(saved["shape"]) if "shape" in saved else getattr(saved.get("share"), "ndim", None)
    axes = saved.get("axes")
    over_all = axes is not None and ndim is not None and len(tuple(axes)) == ndim
    return ([] if over_all else _dims(saved)) + (["keepdim"] if saved.get("keepdim") else [])


def _dropout_p(keep):
    """Inverted dropout keeps elements with the value 1/(1-p): p = 1 - 1/max(keep)."""
    if keep is None or not hasattr(keep, "max"):
        return None
    top = float(keep.max()) if keep.size else 0.0
    return None if top <= 0 else round(1.0 - 1.0 / top, 4)


def _dropout(saved):
    p = _dropout_p(saved.get("keep"))
    return [f"p={p:g}"] if p is not None else []


def _attention(saved):
    parts = ["causal"] if saved.get("causal") else []
    if "scale" in saved:
        parts.append(f"scale={saved['scale']:.3g}")
    if saved.get("groups", 1) > 1:
        parts.append(f"gqa groups={saved['groups']}")
    p = _dropout_p(saved.get("keep"))
    if p:
        parts.append(f"dropout p={p:g}")
    return parts


def _flash_attention(saved):
    spec = saved.get("spec")
    if spec is None:
        return []
    parts = ["causal"] if spec.causal else []
    parts.append(f"scale={spec.scale:.3g}")
    if spec.groups > 1:
        parts.append(f"gqa groups={spec.groups}")
    if spec.key_lengths is not None:
        parts.append("key_lengths")
    if spec.mask is not None:
        parts.append("mask")
    return parts


def _permute(saved):
    inverse = saved.get("inverse", ())
    dims = tuple(sorted(range(len(inverse)), key=inverse.__getitem__))
    return [f"dims={_short(dims)}"]


def _norm(saved):
    return [f"over dims {_short(tuple(saved['axes']))}"] if "axes" in saved else []


def _cross_entropy(saved):
    parts = []
    if saved.get("reduction", "mean") != "mean":
        parts.append(f"reduction={saved['reduction']}")
    if saved.get("eps"):
        parts.append(f"label_smoothing={saved['eps']:g}")
    keep, z = saved.get("keep"), saved.get("z")
    ignored = 0
    if keep is not None and hasattr(keep, "sum"):  # the NumPy reference keeps a mask
        ignored = int(keep.size - keep.sum())
    elif z is not None and "count" in saved:  # the fused kernel only counts the kept rows
        ignored = z.shape[0] - int(saved["count"])
    if ignored:
        parts.append(f"{ignored} ignored")
    return parts


def _getitem(saved):
    index = saved.get("index", ())
    index = list(index) if isinstance(index, tuple) else [index]
    while index and index[-1] is Ellipsis:  # added when normalizing; x[0] means x[0, ...]
        index.pop()
    return ["[" + ", ".join(_index_part(i) for i in index) + "]"]


def _index_part(i):
    if isinstance(i, slice):
        ends = ["" if v is None else str(v) for v in (i.start, i.stop, i.step)]
        return ":".join(ends if i.step is not None else ends[:2])
    if i is Ellipsis:
        return "..."
    if i is None:
        return "None"
    if hasattr(i, "dtype"):
        kind = "mask" if i.dtype == bool else "ids"
        return f"{kind}{tuple(i.shape)}"
    return str(i)


def _gelu(saved):
    approximate = saved.get("approximate", "none")
    return [f"approximate={approximate}"] if approximate != "none" else []


def _var(saved):
    return _reduction(saved)


def _einsum(saved):
    return [",".join(saved.get("subscripts", ())) + "->" + saved.get("output", "")]


def _pow_scalar(saved):
    return [f"exponent={saved['p']:g}"] if np.isscalar(saved.get("p")) else []


def _embedding(saved):
    padding = saved.get("padding_idx")
    return [f"padding_idx={padding}"] if padding is not None else []


def _generic(saved):
    """Ops not listed: the saved plain arguments that read well on their own."""
    parts = []
    for key in ("axis", "dim", "approximate", "reduction", "upper", "diagonal", "heads"):
        value = saved.get(key)
        if isinstance(value, (bool, int, float, str)) and not isinstance(value, np.ndarray):
            parts.append(f"{'dim' if key == 'axis' else key}={value}")
    return parts


def _short(values):
    """(2,) -> "2", (1, 2) -> "(1, 2)": a one-element tuple reads better without its comma."""
    return str(values[0]) if len(values) == 1 else str(values)


_DESCRIBERS = {
    "Sum": _reduction,
    "Mean": _reduction,
    "Max": _reduction,
    "Min": _reduction,
    "LogSumExp": _reduction,
    "Var": _var,
    "Std": _var,
    "Softmax": lambda s: _dims(s, "axis"),
    "LogSoftmax": lambda s: _dims(s, "axis"),
    "CumSum": lambda s: _dims(s, "axis"),
    "Cat": lambda s: _dims(s, "axis"),
    "Stack": lambda s: _dims(s, "axis"),
    "Gather": lambda s: _dims(s, "axis"),
    "Permute": _permute,
    "LayerNorm": _norm,
    "RMSNorm": _norm,
    "Gelu": _gelu,
    "Dropout": _dropout,
    "ScaledDotProductAttention": _attention,
    "FlashAttention": _flash_attention,
    "CrossEntropy": _cross_entropy,
    "GetItem": _getitem,
    "Einsum": _einsum,
    "PowScalar": _pow_scalar,
    "Embedding": _embedding,
}
