"""`ZeroRedundancyOptimizer`: each rank keeps the optimizer state of only its share of the
parameters (ZeRO stage 1; Rajbhandari et al. 2020), as `torch.distributed.optim`.

    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=tt.optim.AdamW, lr=1e-3)
    loss.backward(); opt.step()       # with DDP: every rank holds the averaged gradients

Data parallelism copies the optimizer state (Adam: two buffers the size of the model) into
every rank. Here the parameters are split into world_size shards of about equal size (largest
first, each to the rank holding the fewest elements so far); rank r runs the wrapped optimizer
on shard r only, so it stores about 1/world_size of the state, then every rank broadcasts its
updated shard (one flat message per rank) so all replicas are equal again. The update of each
parameter is the wrapped optimizer's, so the result equals the unsharded optimizer's.
"""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module
from ...optim.optimizer import Optimizer
from ...tensor import Tensor
from ..process_group import current_backend


def partition_parameters(params, world_size: int) -> list[list]:
    """world_size lists of parameters: largest first, each to the least loaded rank."""
    shards, loads = [[] for _ in range(world_size)], [0] * world_size
    for p in sorted(params, key=lambda t: t.numel(), reverse=True):
        rank = int(np.argmin(loads))
        shards[rank].append(p)
        loads[rank] += p.numel()
    return shards


class ZeroRedundancyOptimizer(Optimizer):
    """Wraps `optimizer_class` so that each rank holds the state of 1/world_size of the params.

    Args:
        params: Tensors or parameter-group dicts, the same on every rank.
        optimizer_class: the optimizer to shard, e.g. `tt.optim.AdamW`.
        process_group: must be None (the default group).
        parameters_as_bucket_view, overlap_with_ddp: accepted for PyTorch compatibility; must
            be False.
        **defaults: the wrapped optimizer's arguments (lr, betas, weight_decay, ...).

    `state_dict()` needs `consolidate_state_dict(to=rank)` first (on every rank), as PyTorch,
    and gives the unsharded optimizer's state dict on that rank; `load_state_dict` takes one.
    """

    def __init__(
        self,
        params,
        optimizer_class,
        process_group=None,
        parameters_as_bucket_view=False,
        overlap_with_ddp=False,
        **defaults,
    ):
        where = "ZeroRedundancyOptimizer"
        if parameters_as_bucket_view or overlap_with_ddp:
            raise NotImplementedError(
                f"{where}: parameters_as_bucket_view and overlap_with_ddp are not supported"
            )
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(
                f"{where}: optimizer_class must be an optimizer class such as tt.optim.AdamW, "
                f"got {optimizer_class!r}"
            )
        self._backend = current_backend(where, process_group)
        self.optimizer_class = optimizer_class
        super().__init__(params, defaults)
        self._consolidated = None
        self._build_local_optimizer()

    def _build_local_optimizer(self):
        world, rank = self._backend.world_size, self._backend.rank
        everything = [p for group in self.param_groups for p in group["params"]]
        self._shards = partition_parameters(everything, world)
        self._owner = {id(p): r for r, shard in enumerate(self._shards) for p in shard}
        mine = {id(p) for p in self._shards[rank]}
        local_groups = []
        for group in self.param_groups:
            local = {k: v for k, v in group.items() if k != "params"}
            local["params"] = [p for p in group["params"] if id(p) in mine]
            local_groups.append(local)
        # NOTE: a rank may own nothing of a group (or nothing at all); the wrapped optimizer
        # rejects empty lists, so such groups are left out and matched back by position.
        self._local_group_index = [i for i, g in enumerate(local_groups) if g["params"]]
        kept = [local_groups[i] for i in self._local_group_index]
        self.optim = self.optimizer_class(kept, **self.defaults) if kept else None

    @property
    def state(self):
        """This rank's shard of the state (Tensor -> buffers)."""
        return {} if self.optim is None else self.optim.state

    @state.setter
    def state(self, value):
        if value:  # Optimizer.__init__ assigns {}; the shard lives in self.optim
            raise AttributeError("ZeroRedundancyOptimizer.state is the local optimizer's")

    def _sync_hyperparameters(self):
        """Copies lr etc. from the global groups (a scheduler changes those) to the local ones."""
        if self.optim is None:
            return
        for local, i in zip(self.optim.param_groups, self._local_group_index):
            for key, value in self.param_groups[i].items():
                if key != "params":
                    local[key] = value

    def step(self, closure=None):
        """The wrapped optimizer's step on this rank's shard, then every shard to every rank."""
        loss = None
        if closure is not None:
            from ...function import enable_grad

            with enable_grad():
                loss = closure()
        self._sync_hyperparameters()
        if self.optim is not None:
            self.optim.step()
        self._broadcast_shards()
        return loss

    def _broadcast_shards(self):
        """Each rank sends its updated parameters as one flat message; the others unpack it."""
        backend = self._backend
        if backend.world_size == 1:
            return
        for owner, shard in enumerate(self._shards):
            if not shard:
                continue
            xp = get_array_module(shard[0]._array)
            dtype = np.result_type(*[p.dtype for p in shard])
            if owner == backend.rank:
                flat = xp.concatenate([p._array.reshape(-1).astype(dtype) for p in shard])
            else:
                flat = xp.empty(sum(p.numel() for p in shard), dtype=dtype)
            backend.broadcast(flat, owner)
            if owner != backend.rank:
                start = 0
                for p in shard:
                    stop = start + p.numel()
                    p._array[...] = flat[start:stop].reshape(p.shape)
                    start = stop

    def _update_group(self, group):  # step() is overridden; kept for the base class contract
        raise NotImplementedError

    # ---- checkpoints --------------------------------------------------------------------------

    def _global_index(self) -> dict:
        index, start = {}, 0
        for group in self.param_groups:
            for i, p in enumerate(group["params"]):
                index[id(p)] = start + i
            start += len(group["params"])
        return index

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gathers every rank's shard of the state on rank `to` (call it on every rank)."""
        index = self._global_index()
        mine = {index[id(p)]: {k: _plain(v) for k, v in s.items()} for p, s in self.state.items()}
        shards = self._backend.all_gather_object(mine)
        self._consolidated = None
        if self._backend.rank == to:
            merged = {}
            for shard in shards:
                merged.update(shard)
            self._consolidated = {k: merged[k] for k in sorted(merged)}

    def state_dict(self) -> dict:
        """The unsharded optimizer's state dict, on the rank `consolidate_state_dict` chose."""
        if self._consolidated is None:
            raise RuntimeError(
                "ZeroRedundancyOptimizer.state_dict: call consolidate_state_dict(to=rank) on "
                "every rank first, then state_dict() on that rank"
            )
        groups, start = [], 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = list(range(start, start + len(group["params"])))
            start += len(group["params"])
            groups.append(packed)
        state = {
            k: {name: _as_tensor(v) for name, v in buffers.items()}
            for k, buffers in self._consolidated.items()
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Loads an unsharded state dict (from `state_dict()`, or a plain optimizer's): each
        rank keeps the buffers of its own shard."""
        Optimizer.load_state_dict(self, {"state": {}, "param_groups": state_dict["param_groups"]})
        index = self._global_index()
        if self.optim is None:
            return
        local_state, local_groups, start = {}, [], 0
        for local in self.optim.param_groups:
            packed = {k: v for k, v in local.items() if k != "params"}
            packed["params"] = list(range(start, start + len(local["params"])))
            for i, p in enumerate(local["params"]):
                saved = state_dict["state"].get(index[id(p)])
                if saved is None:
                    saved = state_dict["state"].get(str(index[id(p)]))
                if saved is not None:
                    local_state[start + i] = saved
            start += len(local["params"])
            local_groups.append(packed)
        self._sync_hyperparameters()
        for packed, local in zip(local_groups, self.optim.param_groups):
            packed.update({k: v for k, v in local.items() if k != "params"})
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})


def _plain(value):
    """A picklable copy of a state buffer (arrays travel through all_gather_object)."""
    if isinstance(value, Tensor):
        return ("tensor", value.numpy().copy())
    return value


def _as_tensor(value):
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "tensor":
        return Tensor(value[1])
    return value
