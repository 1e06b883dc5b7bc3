"""Data-parallel training across processes, with `torch.distributed`'s API.

    import tinytensor.distributed as dist
    from tinytensor.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")            # "nccl" for CUDA tensors
    model = DDP(model)                        # rank 0's weights everywhere; gradients averaged
    ...
    dist.destroy_process_group()

Launch with `mpiexec -n 4 python train.py`, or `python -m tinytensor.distributed.run
--nproc-per-node 4 train.py` (torchrun's flag names). The CPU backend is MPI through mpi4py
(`pip install 'tinytensor[distributed]'` brings mpi4py and MPICH's mpiexec); the GPU backend is
NCCL through CuPy. Importing this package needs neither: they load at init_process_group.
"""

from .collectives import (
    all_gather,
    all_gather_into_tensor,
    all_gather_object,
    all_reduce,
    barrier,
    broadcast,
    broadcast_object_list,
    reduce_scatter,
    reduce_scatter_tensor,
)
from .process_group import (
    destroy_process_group,
    get_backend,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
)
from .reduce_op import ReduceOp
from .work import Work

__all__ = [
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "destroy_process_group",
    "get_backend",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "is_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "reduce_scatter",
    "reduce_scatter_tensor",
]
