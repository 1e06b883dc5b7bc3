"""Collectives on Tensors, with `torch.distributed`'s names, arguments and in-place semantics.

    dist.all_reduce(t, op=dist.ReduceOp.SUM)     # every rank's t becomes the sum over ranks
    dist.broadcast(t, src=0)                     # every rank's t becomes rank 0's
    dist.all_gather(list_of_tensors, t)          # list_of_tensors[r] = rank r's t
    dist.reduce_scatter(out, list_of_tensors)    # out = sum over ranks of their list[rank]

Before each collective the ranks compare what they were called with (the collective, shapes,
dtypes, op, root): one all-reduce of a 16-byte fingerprint. A mismatch, which MPI would turn
into a deadlock or silently mixed data, is raised on every rank as an error that lists each
rank's call. TINYTENSOR_DISTRIBUTED_CHECKS=0 turns the check off (DDP never pays it: it
checks its buckets once, at construction).
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from ..backend import get_array_module
from ..tensor import Tensor
from .process_group import current_backend
from .reduce_op import ReduceOp, as_reduce_op
from .work import Work, completed

CHECK_CALLS = os.environ.get("TINYTENSOR_DISTRIBUTED_CHECKS", "1") != "0"


def check_same_call(backend, where: str, signature: str) -> None:
    """Raises on every rank if some rank called `where` with a different `signature`.

    Every rank learns the same verdict from one all-reduce (the max of h and of -h equal only
    when all fingerprints h are equal), so all of them raise together and none is left waiting.
    """
    if backend.world_size == 1:
        return
    digest = hashlib.blake2b(signature.encode(), digest_size=7).digest()
    h = int.from_bytes(digest, "little")  # < 2**56: fits int64 with its negation
    extremes = np.array([h, -h], dtype=np.int64)
    backend.all_reduce_host(extremes, ReduceOp.MAX)
    if extremes[0] != -extremes[1]:
        calls = backend.all_gather_object(signature)
        listed = "; ".join(f"rank {r}: {call}" for r, call in enumerate(calls))
        raise RuntimeError(
            f"{where}: the ranks called it with different arguments, which would deadlock or "
            f"mix data; every rank must make the same collective calls in the same order "
            f"with the same shapes and dtypes ({listed})"
        )


def _check_call(backend, where, describe):
    """check_same_call with the signature `describe()` (formatted only when checking)."""
    if CHECK_CALLS and backend.world_size > 1:
        check_same_call(backend, where, describe())


def _array_of(tensor, where: str, backend, argument: str = "tensor"):
    """The tensor's backend array, after checking that this backend can communicate it."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{where}: {argument} must be a Tensor, got {type(tensor).__name__}")
    array = tensor._array
    on_cuda = not isinstance(array, np.ndarray)  # a CuPy array (cheaper than tensor.device)
    if on_cuda != (backend.name == "nccl"):
        wanted = "CUDA tensors (backend='nccl')" if backend.name == "nccl" else "CPU tensors"
        raise RuntimeError(
            f"{where}: the {backend.name} backend communicates {wanted}; {argument} is on "
            f"{tensor.device} (move it with .to(...), or init the other backend)"
        )
    return array


def _contiguous(array):
    """(a C-contiguous writeable array with the same values, whether it is a copy)."""
    if array.flags.c_contiguous and getattr(array.flags, "writeable", True):
        return array, False
    xp = get_array_module(array)
    return xp.ascontiguousarray(array).copy(), True


def _check_rank(where: str, name: str, value, world_size: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where}: {name} must be a rank (int), got {value!r}")
    if not 0 <= value < world_size:
        raise ValueError(f"{where}: {name}={value} is not a rank of this job (0..{world_size - 1})")
    return int(value)


def _finish(async_op: bool, work: Work | None = None):
    """What a collective returns: a Work if async_op (PyTorch), else None after waiting."""
    work = work or completed()
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Replaces `tensor` on every rank by the elementwise reduction of all ranks' tensors.

    Args:
        tensor: the input and the output (changed in place); same shape and dtype on all ranks.
        op: ReduceOp.SUM, AVG (floating point only), PRODUCT, MAX or MIN.
        async_op: return a Work at once (its `wait()` completes the reduction) instead of None.

    Example:
        >>> t = tt.tensor([float(dist.get_rank())]); dist.all_reduce(t)   # t = 0 + 1 + ...
    """
    where = "all_reduce"
    backend = current_backend(where, group)
    op = as_reduce_op(op, where)
    array = _array_of(tensor, where, backend)
    if op is ReduceOp.AVG and array.dtype.kind != "f":
        raise TypeError(f"{where}: ReduceOp.AVG needs a floating-point tensor, got {array.dtype}")
    _check_call(backend, where, lambda: f"{where}(shape={array.shape}, dtype={array.dtype}, {op})")
    buffer, copied = _contiguous(array)
    if not async_op:
        backend.all_reduce(buffer, op)
        if copied:
            array[...] = buffer
        return None
    started = backend.iall_reduce(buffer, op)
    if not copied:
        return started

    def copy_back():
        array[...] = buffer

    return Work(started.wait, copy_back)


def broadcast(tensor, src: int, group=None, async_op=False):
    """Replaces `tensor` on every rank by rank `src`'s (same shape and dtype everywhere)."""
    where = "broadcast"
    backend = current_backend(where, group)
    src = _check_rank(where, "src", src, backend.world_size)
    array = _array_of(tensor, where, backend)
    describe = lambda: f"{where}(shape={array.shape}, dtype={array.dtype}, src={src})"
    _check_call(backend, where, describe)
    buffer, copied = _contiguous(array)
    backend.broadcast(buffer, src)
    if copied:
        array[...] = buffer
    return _finish(async_op)


def _check_list(where, name, tensors, world_size, like, backend):
    if not isinstance(tensors, (list, tuple)) or len(tensors) != world_size:
        got = len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__
        raise ValueError(
            f"{where}: {name} must be a list of world_size={world_size} tensors, got {got}"
        )
    arrays = [_array_of(t, where, backend, f"{name}[{i}]") for i, t in enumerate(tensors)]
    for i, a in enumerate(arrays):
        if a.shape != like.shape or a.dtype != like.dtype:
            raise ValueError(
                f"{where}: {name}[{i}] has shape {a.shape} and dtype {a.dtype}; expected "
                f"{like.shape} and {like.dtype} like the other tensor"
            )
    return arrays


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fills `tensor_list[r]` (in place) with rank r's `tensor`, on every rank."""
    where = "all_gather"
    backend = current_backend(where, group)
    array = _array_of(tensor, where, backend)
    outputs = _check_list(where, "tensor_list", tensor_list, backend.world_size, array, backend)
    _check_call(backend, where, lambda: f"{where}(shape={array.shape}, dtype={array.dtype})")
    xp = get_array_module(array)
    gathered = xp.empty((backend.world_size, *array.shape), dtype=array.dtype)
    backend.all_gather(_contiguous(array)[0], gathered)
    for r, out in enumerate(outputs):
        out[...] = gathered[r]
    return _finish(async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """`output_tensor` (world_size times input's elements) = every rank's input, by rank."""
    where = "all_gather_into_tensor"
    backend = current_backend(where, group)
    array = _array_of(input_tensor, where, backend, "input_tensor")
    out = _array_of(output_tensor, where, backend, "output_tensor")
    if out.size != array.size * backend.world_size or out.dtype != array.dtype:
        raise ValueError(
            f"{where}: output_tensor must hold world_size={backend.world_size} x "
            f"{array.size} {array.dtype} elements, got shape {out.shape} ({out.dtype})"
        )
    _check_call(backend, where, lambda: f"{where}(shape={array.shape}, dtype={array.dtype})")
    buffer, copied = _contiguous(out)
    backend.all_gather(_contiguous(array)[0], buffer)
    if copied:
        out[...] = buffer.reshape(out.shape)
    return _finish(async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """`output` on rank r = the reduction over ranks of their `input_list[r]`."""
    where = "reduce_scatter"
    backend = current_backend(where, group)
    op = as_reduce_op(op, where)
    out = _array_of(output, where, backend, "output")
    inputs = _check_list(where, "input_list", input_list, backend.world_size, out, backend)
    if op is ReduceOp.AVG and out.dtype.kind != "f":
        raise TypeError(f"{where}: ReduceOp.AVG needs a floating-point tensor, got {out.dtype}")
    _check_call(backend, where, lambda: f"{where}(shape={out.shape}, dtype={out.dtype}, {op})")
    xp = get_array_module(out)
    send = xp.stack(inputs)
    buffer, copied = _contiguous(out)
    backend.reduce_scatter(send, buffer, op)
    if copied:
        out[...] = buffer
    return _finish(async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):  # noqa: A002
    """`output` on rank r = the reduction over ranks of block r of `input` (world_size blocks)."""
    where = "reduce_scatter_tensor"
    backend = current_backend(where, group)
    op = as_reduce_op(op, where)
    out = _array_of(output, where, backend, "output")
    array = _array_of(input, where, backend, "input")
    if array.size != out.size * backend.world_size or out.dtype != array.dtype:
        raise ValueError(
            f"{where}: input must hold world_size={backend.world_size} x {out.size} "
            f"{out.dtype} elements, got shape {array.shape} ({array.dtype})"
        )
    if op is ReduceOp.AVG and out.dtype.kind != "f":
        raise TypeError(f"{where}: ReduceOp.AVG needs a floating-point tensor, got {out.dtype}")
    _check_call(backend, where, lambda: f"{where}(shape={out.shape}, dtype={out.dtype}, {op})")
    buffer, copied = _contiguous(out)
    backend.reduce_scatter(_contiguous(array)[0], buffer, op)
    if copied:
        out[...] = buffer
    return _finish(async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Returns on each rank only once every rank has called it."""
    current_backend("barrier", group).barrier()
    return _finish(async_op)


def all_gather_object(object_list, obj, group=None) -> None:
    """Fills `object_list[r]` with rank r's picklable `obj` (small things: metadata, metrics)."""
    backend = current_backend("all_gather_object", group)
    if not isinstance(object_list, list) or len(object_list) != backend.world_size:
        raise ValueError(
            f"all_gather_object: object_list must be a list of world_size={backend.world_size} "
            f"entries, e.g. [None] * world_size"
        )
    object_list[:] = backend.all_gather_object(obj)


def broadcast_object_list(object_list, src: int = 0, group=None, device=None) -> None:
    """Replaces the entries of `object_list` on every rank by rank `src`'s (picklable)."""
    backend = current_backend("broadcast_object_list", group)
    src = _check_rank("broadcast_object_list", "src", src, backend.world_size)
    if not isinstance(object_list, list):
        raise TypeError("broadcast_object_list: object_list must be a list")
    object_list[:] = backend.broadcast_object(list(object_list), src)
