"""The NCCL backend: collectives on CuPy arrays through `cupy.cuda.nccl` (CUDA tensors).

One process per GPU, launched by mpiexec like the MPI backend. Rank 0 makes NCCL's unique id
and MPI broadcasts it (a job of one process needs no MPI at all); every process then joins the
NCCL communicator. Collectives are enqueued on the current CuPy stream, so they are ordered
with the kernels around them: the optimizer step that follows on the same stream sees the
reduced gradients without a host synchronization. Untested without a GPU (the tests skip).
"""

from __future__ import annotations

import os

from .launcher_env import LOCAL_RANK, RANK, WORLD_SIZE, launcher_value
from .reduce_op import ReduceOp
from .work import Work, completed


class NCCLBackend:
    """One GPU of an NCCL job; the process uses GPU (rank within the node) % visible GPUs."""

    name = "nccl"

    def __init__(self):
        try:
            import cupy
            from cupy.cuda import nccl
        except ImportError as e:
            raise RuntimeError(
                "init_process_group(backend='nccl') needs CuPy with NCCL "
                f"(pip install 'tinytensor[cuda]'): {e}"
            ) from None
        if not getattr(nccl, "available", True):
            raise RuntimeError(
                "init_process_group(backend='nccl'): CuPy found no NCCL library (install the "
                "nvidia-nccl wheel for your CUDA version, or use backend='mpi' on the CPU)"
            )
        self.cupy, self.nccl = cupy, nccl
        self.rank = launcher_value(RANK, 0)
        self.world_size = launcher_value(WORLD_SIZE, 1)
        self._mpi = None
        if self.world_size > 1:
            from .mpi_backend import MPIBackend

            self._mpi = MPIBackend()  # bootstrap and Python-object collectives only
            self.rank, self.world_size = self._mpi.rank, self._mpi.world_size
        local_rank = launcher_value(LOCAL_RANK, self.rank)
        cupy.cuda.Device(local_rank % cupy.cuda.runtime.getDeviceCount()).use()
        unique_id = nccl.get_unique_id() if self.rank == 0 else None
        if self._mpi is not None:
            unique_id = self._mpi.broadcast_object(unique_id, 0)
        self.comm = nccl.NcclCommunicator(self.world_size, unique_id, self.rank)
        self._ops = {
            ReduceOp.SUM: nccl.NCCL_SUM,
            ReduceOp.AVG: nccl.NCCL_SUM,  # then divided by the world size
            ReduceOp.PRODUCT: nccl.NCCL_PROD,
            ReduceOp.MAX: nccl.NCCL_MAX,
            ReduceOp.MIN: nccl.NCCL_MIN,
        }
        self._types = {
            "float16": nccl.NCCL_FLOAT16,
            "float32": nccl.NCCL_FLOAT32,
            "float64": nccl.NCCL_FLOAT64,
            "int32": nccl.NCCL_INT32,
            "int64": nccl.NCCL_INT64,
            "uint8": nccl.NCCL_UINT8,
            "int8": nccl.NCCL_INT8,
        }

    def _type(self, array):
        try:
            return self._types[array.dtype.name]
        except KeyError:
            raise TypeError(f"the nccl backend cannot communicate {array.dtype} arrays") from None

    def _stream(self) -> int:
        return self.cupy.cuda.get_current_stream().ptr

    def _average(self, array):
        array *= 1.0 / self.world_size

    def all_reduce(self, array, op: ReduceOp) -> None:
        ptr = array.data.ptr
        self.comm.allReduce(ptr, ptr, array.size, self._type(array), self._ops[op], self._stream())
        if op is ReduceOp.AVG:
            self._average(array)

    def iall_reduce(self, array, op: ReduceOp) -> Work:
        # NOTE: enqueued on the stream, so it already runs asynchronously to the host; the
        # division is enqueued after it on the same stream.
        self.all_reduce(array, op)
        return completed()

    def broadcast(self, array, src: int) -> None:
        self.comm.bcast(array.data.ptr, array.size, self._type(array), src, self._stream())

    def all_gather(self, send, recv) -> None:
        self.comm.allGather(
            send.data.ptr, recv.data.ptr, send.size, self._type(send), self._stream()
        )

    def reduce_scatter(self, send, recv, op: ReduceOp) -> None:
        self.comm.reduceScatter(
            send.data.ptr, recv.data.ptr, recv.size, self._type(send), self._ops[op],
            self._stream(),
        )  # fmt: skip
        if op is ReduceOp.AVG:
            self._average(recv)

    def all_reduce_host(self, array, op: ReduceOp) -> None:
        """A small NumPy array reduced through MPI (argument checks); one process: as is."""
        if self._mpi is not None:
            self._mpi.all_reduce(array, op)

    def barrier(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()
        if self._mpi is not None:
            self._mpi.barrier()

    def all_gather_object(self, obj) -> list:
        return [obj] if self._mpi is None else self._mpi.all_gather_object(obj)

    def broadcast_object(self, obj, src: int):
        return obj if self._mpi is None else self._mpi.broadcast_object(obj, src)

    def abort(self, code: int = 1) -> None:
        if self._mpi is not None:
            self._mpi.abort(code)
        os._exit(code)

    def close(self) -> None:
        self.cupy.cuda.get_current_stream().synchronize()
        self.comm.destroy()
