"""`DistributedDataParallel`: one replica of the model per process, gradients averaged across them.

    dist.init_process_group("mpi")
    model = DistributedDataParallel(model)       # every rank starts from rank 0's weights
    loss = model(x_of_this_rank, y_of_this_rank).loss
    loss.backward()                              # leaves the gradient of the global batch
    optimizer.step()                             # the same update on every rank

Each rank computes the gradient g_r of its mean loss over its own B examples; DDP replaces it by
(1/N) Σ_r g_r, the gradient of the mean loss over all N·B examples, so N ranks with batch B take
the same steps as one process with batch N·B.

How: the parameters are grouped into buckets (flat buffers of about `bucket_cap_mb`, filled in
reverse registration order, the order backward produces gradients in; the first bucket is
smaller so that communication starts early). A hook on each parameter copies its gradient
into its bucket as soon as backward has accumulated all of it (a weight used twice, like GPT's
tied embedding, after its last contribution); when a bucket is full its all-reduce is
started without blocking (MPI Iallreduce), and backward goes on computing the gradients of the
layers below while the bucket travels. When the last gradient is ready, DDP waits for the
buckets, divides by N and writes the averages back into `.grad`. Buckets are launched in a
fixed order on every rank (MPI requires collectives in the same order everywhere), even if a
later bucket happens to fill first.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

from tinytensor.backend import get_array_module
from tinytensor.distributed.collectives import check_same_call
from tinytensor.distributed.process_group import current_backend
from tinytensor.distributed.reduce_op import ReduceOp
from tinytensor.function import is_grad_enabled
from tinytensor.tensor import Tensor

from ..module import Module

DEFAULT_BUCKET_CAP_MB = 25  # as PyTorch
FIRST_BUCKET_MB = 1  # as PyTorch's _DEFAULT_FIRST_BUCKET_BYTES: the first all-reduce starts early


class _Bucket:
    """Parameters whose gradients travel together in one flat buffer (one dtype, one device)."""

    __slots__ = ("params", "spans", "flat", "pending", "ready", "work")

    def __init__(self, params):
        self.params = params
        self.spans, start = [], 0
        for p in params:
            self.spans.append((start, start + p.numel()))
            start += p.numel()
        # NOTE: allocated once and reused every step, so MPI sees the same memory each time
        self.flat = get_array_module(params[0]._array).empty(start, dtype=params[0].dtype)
        self.ready = [False] * len(params)
        self.pending = len(params)
        self.work = None

    def reset(self):
        self.ready = [False] * len(self.params)
        self.pending = len(self.params)
        self.work = None


def assign_buckets(params, bucket_cap_bytes: int, first_bucket_bytes: int) -> list[_Bucket]:
    """Buckets of the parameters in reverse order, each closed once it holds the cap in bytes
    (the first one once it holds `first_bucket_bytes`); one dtype and device per bucket."""
    buckets, open_by_kind = [], {}
    for p in reversed(params):
        kind = (p.dtype, str(p.device))
        members = open_by_kind.setdefault(kind, [])
        members.append(p)
        cap = first_bucket_bytes if not buckets else bucket_cap_bytes
        if sum(q._array.nbytes for q in members) >= cap:
            buckets.append(_Bucket(members))
            open_by_kind[kind] = []
    buckets += [_Bucket(members) for members in open_by_kind.values() if members]
    return buckets


class DistributedDataParallel(Module):
    """Wraps `module` so that backward leaves gradients averaged over all ranks.

    Args:
        module: the model; it must have the same parameters (names, shapes, dtypes) on every
            rank. Its parameters and buffers are overwritten with rank 0's at construction.
        broadcast_buffers: copy rank 0's buffers to every rank before each forward.
        bucket_cap_mb: the size of a gradient bucket in MiB (default 25, as PyTorch); smaller
            buckets start communicating earlier during backward but send more messages.
        find_unused_parameters: walk the graph after each forward to find parameters that the
            output does not depend on, and count their gradients as ready (zero); without it,
            a parameter without a gradient stops the reduction and the next forward raises.
        device_ids, output_device, dim, process_group, check_reduction,
            gradient_as_bucket_view, static_graph: accepted for PyTorch compatibility
            (process_group must be None: the default group); they change nothing here.

    Attributes:
        module: the wrapped model (save `ddp.module.state_dict()` for a checkpoint that loads
            without DDP; `ddp.state_dict()` has PyTorch's `module.` prefix).

    Example:
        >>> ddp = DistributedDataParallel(model, bucket_cap_mb=1)
        >>> with ddp.no_sync():                 # accumulate locally ...
        ...     ddp(x1, y1).loss.backward()
        >>> ddp(x2, y2).loss.backward()         # ... and average once
    """

    def __init__(
        self,
        module,
        device_ids=None,
        output_device=None,
        dim=0,
        broadcast_buffers=True,
        process_group=None,
        bucket_cap_mb=None,
        find_unused_parameters=False,
        check_reduction=False,
        gradient_as_bucket_view=False,
        static_graph=False,
    ):
        super().__init__()
        where = "DistributedDataParallel"
        if not isinstance(module, Module):
            raise TypeError(f"{where}: module must be an nn.Module, got {type(module).__name__}")
        backend = current_backend(where, process_group)
        cap_mb = DEFAULT_BUCKET_CAP_MB if bucket_cap_mb is None else bucket_cap_mb
        if not cap_mb > 0:
            raise ValueError(f"{where}: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError(f"{where}: the module has no parameter that requires grad")
        layout = ", ".join(f"{n} {tuple(p.shape)} {p.dtype}" for n, p in named)
        check_same_call(backend, where, f"parameters: {layout}")
        _sync_from_rank0(backend, [p for _, p in named] + list(module.buffers()))
        self.module = module
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.require_backward_grad_sync = True  # False inside no_sync()
        # NOTE: the reducer holds the parameter lists; a list of Parameters on this Module
        # would be found by named_parameters() and change the state_dict keys.
        self._reducer = _Reducer(backend, named, int(cap_mb * 2**20))

    def forward(self, *args, **kwargs):
        reducer = self._reducer
        reducer.check_previous_reduction_finished()
        if self.broadcast_buffers and reducer.backend.world_size > 1:
            _sync_from_rank0(reducer.backend, list(self.module.buffers()))
        reducer.prepare(armed=is_grad_enabled() and self.require_backward_grad_sync)
        output = self.module(*args, **kwargs)
        if reducer.armed and self.find_unused_parameters:
            uses = _leaf_uses(output)
            reducer.mark_unused_parameters_ready({key for key, n in uses.items() if n})
        return output

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside this context keep their gradients local (they
        accumulate in `.grad`); the first synchronized backward afterwards averages the sum."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def extra_repr(self) -> str:
        sizes = ", ".join(f"{b.flat.nbytes / 2**20:.2f}" for b in self._reducer.buckets)
        return f"world_size={self._reducer.backend.world_size}, buckets (MiB)=[{sizes}]"


class _Reducer:
    """The gradient averaging that backward drives: buckets, hooks, launch order, the wait."""

    def __init__(self, backend, named_params, bucket_cap_bytes: int):
        self.backend = backend
        self.names = {id(p): n for n, p in named_params}
        self.params = [p for _, p in named_params]
        first = min(bucket_cap_bytes, FIRST_BUCKET_MB * 2**20)
        self.buckets = assign_buckets(self.params, bucket_cap_bytes, first)
        self.slot = {id(p): (b, i) for b in self.buckets for i, p in enumerate(b.params)}
        self.armed = False  # the backward after this forward must average the gradients
        self.finished = False  # ... and it has: a later gradient would be lost
        self.next_bucket = 0  # buckets are launched in this order on every rank
        self.first_in_flight = 0  # buckets before it are known to have arrived
        self.drive_progress = True  # test in-flight buckets as gradients arrive (see below)
        self.locally_used = None  # with find_unused_parameters: id(p) -> reached by the output
        self.hook_handles = [
            _register_grad_ready_hook(p, self.on_gradient_ready) for p in self.params
        ]

    def prepare(self, armed: bool) -> None:
        self.armed = armed
        self.finished = False
        for bucket in self.buckets:
            bucket.reset()
        self.next_bucket = 0
        self.first_in_flight = 0
        self.locally_used = None

    def on_gradient_ready(self, p):
        """Called by backward once p.grad holds p's gradient of this backward pass."""
        if not self.armed:
            if self.finished:
                raise RuntimeError(
                    f"DistributedDataParallel: a gradient of {self.names[id(p)]} arrived after "
                    "the gradients of this forward were averaged (a second backward through "
                    "the same graph?); run forward again for each backward, or use no_sync()"
                )
            return
        if self.drive_progress and self.first_in_flight < self.next_bucket:
            self.test_in_flight()
        key = id(p)
        bucket, i = self.slot[key]
        if bucket.ready[i]:
            raise RuntimeError(
                f"DistributedDataParallel: the gradient of {self.names[id(p)]} was reported "
                "ready twice in one backward pass (backward run twice after one forward? use "
                "no_sync() for the extra passes, or run forward again)"
            )
        self.fill(bucket, i, p.grad._array)

    def fill(self, bucket, i, grad_array):
        start, stop = bucket.spans[i]
        if grad_array is None:
            bucket.flat[start:stop] = 0
        else:
            bucket.flat[start:stop] = grad_array.reshape(-1)
        bucket.ready[i] = True
        bucket.pending -= 1
        if bucket.pending == 0:
            self.launch_ready_buckets()

    def launch_ready_buckets(self):
        buckets = self.buckets
        while self.next_bucket < len(buckets) and buckets[self.next_bucket].pending == 0:
            bucket = buckets[self.next_bucket]
            bucket.work = self.backend.iall_reduce(bucket.flat, ReduceOp.SUM)
            self.next_bucket += 1
        if self.next_bucket == len(buckets):
            self.finish()

    def test_in_flight(self):
        """Lets the in-flight buckets move on while backward runs.

        NOTE: MPICH advances a non-blocking collective only inside MPI calls (it starts no
        progress thread by default), so an Iallreduce left alone until the final wait would
        do all its work there, after backward. Testing the oldest request as each gradient
        arrives (about a microsecond) drives MPI's progress engine for all of them.
        """
        while self.first_in_flight < self.next_bucket:
            if not self.buckets[self.first_in_flight].work.is_completed():
                return
            self.first_in_flight += 1

    def finish(self):
        """Waits for every bucket and writes the averaged gradients into .grad."""
        self.armed, self.finished = False, True
        globally_used = self.globally_used()
        scale = 1.0 / self.backend.world_size
        for bucket in self.buckets:
            bucket.work.wait()
            bucket.flat *= scale
            for p, (start, stop) in zip(bucket.params, bucket.spans):
                if globally_used is not None and not globally_used[id(p)]:
                    continue  # no rank used it: its .grad stays as it was (as PyTorch)
                averaged = bucket.flat[start:stop].reshape(p.shape)
                if p.grad is None:
                    p.grad = Tensor._wrap(averaged.copy(), False, None)
                else:
                    p.grad._array[...] = averaged

    def check_previous_reduction_finished(self):
        if not self.armed:
            return
        missing = [
            self.names[id(p)]
            for bucket in self.buckets
            for p, ready in zip(bucket.params, bucket.ready)
            if not ready
        ]
        if len(missing) < len(self.params):  # some gradients came, not all: a stuck reduction
            raise RuntimeError(
                "DistributedDataParallel: the previous backward did not produce gradients for "
                f"{len(missing)} parameter(s), so their average was never computed: "
                f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}. If the "
                "loss does not use every parameter, pass find_unused_parameters=True"
            )

    def mark_unused_parameters_ready(self, reached: set):
        self.locally_used = {id(p): id(p) in reached for p in self.params}
        for p in self.params:
            if not self.locally_used[id(p)]:
                bucket, i = self.slot[id(p)]
                # NOTE: its existing .grad (accumulated under no_sync) still counts
                self.fill(bucket, i, None if p.grad is None else p.grad._array)

    def globally_used(self):
        """{id(p): some rank's output used p} when finding unused parameters, else None."""
        if self.locally_used is None:
            return None
        flags = np.array([self.locally_used[id(p)] for p in self.params], dtype=np.int32)
        self.backend.all_reduce_host(flags, ReduceOp.MAX)
        self.locally_used = None
        return {id(p): bool(f) for p, f in zip(self.params, flags)}


def _sync_from_rank0(backend, tensors):
    """Overwrites `tensors` on every rank with rank 0's values."""
    if backend.world_size == 1:
        return
    for t in tensors:
        array = t._array
        if array.flags.c_contiguous and getattr(array.flags, "writeable", True):
            backend.broadcast(array, 0)
        else:
            copy = array.copy()
            backend.broadcast(copy, 0)
            t._array[...] = copy


def _register_grad_ready_hook(p, hook):
    """hook(p) after backward has accumulated p's gradient into p.grad (PyTorch's
    register_post_accumulate_grad_hook)."""
    return p.register_post_accumulate_grad_hook(hook)


def _tensors_in(output):
    """The Tensors in a forward's output: Tensors, tuples, lists, dicts, dataclasses."""
    stack, found = [output], []
    while stack:
        item = stack.pop()
        if isinstance(item, Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return found


def _leaf_uses(output) -> dict:
    """{id(leaf): how many graph edges lead into it} for the leaves that `output` depends on."""
    uses, seen = {}, set()
    stack = [t.grad_fn for t in _tensors_in(output) if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen or node.inputs is None:
            continue
        seen.add(id(node))
        # NOTE: the producer of each input when the node was recorded (an in-place op may
        # have given the tensor a new grad_fn since)
        parents = getattr(node, "parents", None) or [x.grad_fn for x in node.inputs]
        for x, parent in zip(node.inputs, parents):
            if not x.requires_grad:
                continue
            if parent is None:
                uses[id(x)] = uses.get(id(x), 0) + 1
            else:
                stack.append(parent)
    return uses
