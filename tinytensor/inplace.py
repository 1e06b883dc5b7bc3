"""In-place ops made safe, as PyTorch does it: version counters and in-place graph nodes.

Every storage carries a version counter; views share their base's. An in-place op bumps it. When
an op is recorded, the engine notes which of its inputs' (or its output's) memory the op's
backward will read, and the version each had; backward compares and raises, naming the op and
the tensor, if one was modified in between. So `y = x * 2; z = (y * y).sum(); y.mul_(0);
z.backward()` is an error, not a silent zero gradient.

An in-place op on a tensor in a graph is itself a graph node: `y.mul_(3)` runs the out-of-place
op on an alias of the old `y` (its graph role: the node that made it), writes the result into y's
memory and makes y the node's output. Earlier consumers of y keep pointing at the old node
(`Function.parents`), so gradients that reach them skip the in-place op, as they must.

The counters are created lazily: a tensor that is never modified in place and never saved by a
recorded op costs nothing here.
"""

from __future__ import annotations

import numpy as np

from .backend import get_array_module

# Tensor and the grad mode's module (tinytensor.function), bound by tensor.py once both exist:
# both import this module, so it cannot import them at its top (and an import inside each call
# cost ~1 µs of a small in-place op)
Tensor = None
_function = None


def bind(tensor_class, function_module) -> None:
    global Tensor, _function
    Tensor, _function = tensor_class, function_module


class VersionCounter:
    """How many times one storage was modified in place (shared by all views of it).

    `clock` counts the in-place modifications of all storages together, and `changed_at` is its
    value at this storage's latest one: a node recorded at clock c saw every storage as it is
    now unless `changed_at > c`. So recording a node costs one read of the clock, and backward
    looks at what the node saved only when the clock moved (see `check_saved_versions`).
    """

    __slots__ = ("value", "last_op", "changed_at")
    clock = 0

    def __init__(self):
        self.value = 0
        self.last_op = None
        self.changed_at = 0

    def bump(self, op: str) -> None:
        VersionCounter.clock += 1
        self.value += 1
        self.last_op = op
        self.changed_at = VersionCounter.clock


def version_counter(t) -> VersionCounter:
    """The tensor's version counter, created on first need. A view keeps none of its own: its
    storage's counter is its base's (so making a view costs no counter)."""
    if t._base is not None:
        t = t._base
    counter = t._version_counter
    if counter is None:
        counter = t._version_counter = VersionCounter()
    return counter


def counter_of(t):
    """The tensor's version counter if it has one yet (None means version 0), without making one."""
    return (t if t._base is None else t._base)._version_counter


def _root(array):
    """The object that owns an array's memory (NumPy and CuPy collapse chains of views)."""
    base = array.base
    return array if base is None else base


# ---- saved tensors ------------------------------------------------------------------------

# the engine's own attributes of a node, never an op's saved arrays
_ENGINE_FIELDS = frozenset(
    (
        "inputs",
        "needs_input_grad",
        "parents",
        "module",
        "saved_versions",
        "saved_at",
        "output_memory",
        "replay",
    )
)


def note_saved(ctx, out, result) -> None:
    """Marks a recorded node whose forward saved arrays: backward will check that none of them
    was modified in place since (`check_saved_versions`).

    Stored as `ctx.saved_at = (clock, output counter, id of the output's memory)`. Which saved
    array belongs to which tensor is worked out only if the clock moved before backward, which
    in most programs it never does: this runs for every recorded op (the scan it replaces cost
    1.2-1.7 µs of a 5 µs small op). The output gets its counter now, so that an in-place change
    to it, or to a view of it, is seen. The id identifies the output's memory: a saved array has
    been alive since forward, as the output was then, so an equal id is the same object.
    """
    owner = result if result._base is None else result._base  # a view: its base's counter
    counter = owner._version_counter
    if counter is None:
        counter = owner._version_counter = VersionCounter()
    base = out.base
    ctx.saved_at = (VersionCounter.clock, counter, id(out if base is None else base))


def _saved_owners(ctx, arrays, out_memory) -> list:
    """Which inputs (their indices; -1 for the output) the arrays `ctx` saved belong to: those
    whose memory is one of `arrays` (the inputs' arrays), or the output's (its id)."""
    kind = arrays[0].__class__
    found = []
    for key, value in ctx.__dict__.items():
        if key in _ENGINE_FIELDS:
            continue
        cls = value.__class__
        if cls is kind:
            saved = (value,)
        elif cls is tuple or cls is list:
            saved = value
        else:
            continue
        for array in saved:
            if array.__class__ is not kind:
                continue
            root = _root(array)
            for which, a in enumerate(arrays):
                if (root is a or root is a.base) and which not in found:
                    found.append(which)
            if id(root) == out_memory and -1 not in found:
                found.append(-1)
    return found


def record_saved_versions(ctx) -> None:
    """Turns `note_saved`'s mark into explicit (which, version, counter) entries, for a node
    the in-place machinery is about to rewrite (`apply_inplace`): which = input index or -1 for
    the output; an input's counter is looked up at check time (None: version 0 until then)."""
    if ctx.saved_at is None:
        return
    _, out_counter, out_memory = ctx.saved_at
    entries = []
    for which in _saved_owners(ctx, [x._array for x in ctx.inputs], out_memory):
        if which == -1:
            entries.append((-1, out_counter.value, out_counter))
        else:
            counter = counter_of(ctx.inputs[which])
            entries.append((which, 0 if counter is None else counter.value, None))
    ctx.saved_versions = tuple(entries)
    ctx.output_memory = out_memory  # which saved array is the output (higher_order)
    ctx.saved_at = None


def check_saved_versions(ctx) -> None:
    """Raises if a tensor the node saved in forward was modified in place since."""
    if ctx.saved_at is not None:
        clock, out_counter, out_memory = ctx.saved_at
        if clock == VersionCounter.clock:
            return  # nothing anywhere was modified in place since the node was recorded
        for which in _saved_owners(ctx, [x._array for x in ctx.inputs], out_memory):
            counter = out_counter if which == -1 else counter_of(ctx.inputs[which])
            if counter is not None and counter.changed_at > clock:
                raise _modified_error(ctx, which, counter)
    for which, version, counter in ctx.saved_versions:
        if counter is None:
            counter = counter_of(ctx.inputs[which])
        if counter is not None and counter.value != version:
            raise _modified_error(ctx, which, counter)


def _modified_error(ctx, which, counter) -> RuntimeError:
    if which == -1:
        what = "its own output"
    else:
        x = ctx.inputs[which]
        what = f"its input {which} (shape {tuple(x.shape)}, {x.dtype})"
    return RuntimeError(
        f"backward: {ctx.name} needs {what} as it was in forward, but it was modified in place "
        f"since by {counter.last_op} (now version {counter.value}); use the out-of-place op, "
        "or .clone() the tensor before modifying it"
    )


# ---- in-place ops ---------------------------------------------------------------------------


def check_not_leaf_or_view_of_leaf(t, op: str) -> None:
    """PyTorch's rule: a leaf that requires grad (or a view of one) is not modified in place
    while gradients are recorded (the update would not be part of any graph)."""
    leaf = t if t._ctx is None and t.requires_grad else None
    base = t._base
    if leaf is None and base is not None and base._ctx is None and base.requires_grad:
        leaf = base
    if leaf is not None:
        what = "a leaf tensor" if leaf is t else "a view of a leaf tensor"
        raise RuntimeError(
            f"{op}: {what} that requires grad cannot be modified in place while gradients are "
            "recorded; wrap the update in `with tt.no_grad():` (or modify a .clone())"
        )


def write_into(t, value, op: str) -> None:
    """t's memory <- value (same shape; a result dtype that casts to t's within its kind)."""
    dst = t._array
    if value.shape != dst.shape:
        raise RuntimeError(
            f"{op}: the result has shape {tuple(value.shape)}, which does not match the "
            f"shape {tuple(dst.shape)} of the tensor modified in place"
        )
    if value.dtype != dst.dtype and not np.can_cast(value.dtype, dst.dtype, "same_kind"):
        raise RuntimeError(
            f"{op}: the result is {value.dtype}, which cannot be stored in place into a "
            f"{dst.dtype} tensor; convert the tensor first (e.g. .float())"
        )
    if value is dst:
        return
    try:
        get_array_module(dst).copyto(dst, value, casting="same_kind")
    except ValueError as e:
        if not dst.flags.writeable:
            raise RuntimeError(
                f"{op}: this tensor is a read-only view (made by expand or broadcasting, "
                "where elements share memory); .clone() it before modifying it in place"
            ) from None
        raise RuntimeError(f"{op}: {e}") from None


def needs_graph(t, op: str, args) -> bool:
    """Whether an in-place op on t must be recorded (checking PyTorch's leaf rule first)."""
    if not _function._grad_enabled:
        return False
    check_not_leaf_or_view_of_leaf(t, op)
    if t.requires_grad:
        return True
    for a in args:  # (a loop, not any() over a generator: this runs on every in-place op)
        if isinstance(a, Tensor) and a.requires_grad:
            return True
    return False


def write_selected(t, index, value, op: str) -> None:
    """t[index] = value outside any graph: a plain write and a version bump."""
    try:
        t._array[index] = value
    except ValueError as e:
        if not t._array.flags.writeable:
            raise RuntimeError(
                f"{op}: this tensor is a read-only view (made by expand or broadcasting, "
                "where elements share memory); .clone() it before modifying it in place"
            ) from None
        raise ValueError(f"{op}: {e} (tensor shape {tuple(t.shape)})") from None
    version_counter(t).bump(op)


def apply_inplace(t, op: str, fn, *args, **kwargs):
    """Runs `fn(t, *args, **kwargs)` out of place and stores the result in t's memory.

    Outside a graph this is a plain write plus a version bump. When gradients are recorded and
    t or an argument requires grad, the op becomes t's graph node (see the module docstring).
    """
    counter = version_counter(t)
    if not needs_graph(t, op, args):
        return _plain(t, op, fn, args, kwargs, counter)
    if t._base is not None:
        raise RuntimeError(
            f"{op}: modifying a view in place while its base is part of a graph is not "
            "supported; apply the op to the whole tensor, or build a new tensor out of place "
            "(e.g. with tt.where)"
        )
    old = Tensor._wrap(t._array, t.requires_grad, t._ctx)  # t as it was: its graph role
    old._version_counter = counter
    result = fn(old, *args, **kwargs)
    ctx = result._ctx
    if ctx is None:  # e.g. an op with no gradient: nothing to record
        return _store(t, op, result._array, counter)
    record_saved_versions(ctx)  # explicit entries: the next lines rewrite them
    _keep_original(ctx, t._array, result._array, t)
    _store(t, op, result._array, counter)
    t._ctx, t.requires_grad = ctx, True
    if ctx.saved_versions:  # the node's saved output now lives in t's memory, at this version
        ctx.saved_versions = tuple(
            (-1, counter.value, counter) if w == -1 else (w, v, c) for w, v, c in ctx.saved_versions
        )
    return t


def _plain(t, op, fn, args, kwargs, counter):
    if _function._grad_enabled:  # nothing here requires grad, but a keyword might: record none
        with _function.no_grad():
            result = fn(t, *args, **kwargs)
    else:
        result = fn(t, *args, **kwargs)
    return _store(t, op, result._array, counter)


def _store(t, op, value, counter):
    write_into(t, value, op)
    counter.bump(op)
    return t


def _keep_original(ctx, memory, out, t):
    """The node was recorded on t's memory, which is about to be overwritten: what it saved of
    t's old value (input 0) is copied (PyTorch's "original self"), and a saved output now
    points at t. Another input that is t itself (`y.mul_(y)`) keeps its version check, so
    backward raises for it, as in PyTorch."""
    owner = _root(memory)
    for key, value in list(ctx.__dict__.items()):
        if key not in _ENGINE_FIELDS:
            ctx.__dict__[key] = _rebind(value, owner, out, memory)
    ctx.saved_versions = tuple(e for e in ctx.saved_versions if e[0] != 0)


def _rebind(value, owner, out, memory):
    if value.__class__ in (tuple, list):
        return value.__class__(_rebind(v, owner, out, memory) for v in value)
    if not hasattr(value, "base") or not hasattr(value, "shape"):
        return value
    if value is out:
        return memory  # the output, stored in t from now on
    if _root(value) is owner:
        return value.copy()
    return value
