"""The MPI backend: collectives on NumPy arrays through mpi4py (CPU tensors).

MPI chooses the algorithm (MPICH: recursive doubling for small messages, a ring or
reduce-scatter + all-gather for large ones); here each call is a thin wrapper over mpi4py's
buffer interface (`Allreduce`, `Iallreduce`, `Bcast`, ...), which hands NumPy's memory to MPI
without copies or pickling. Arrays must be C-contiguous: collectives.py copies the others.
"""

from __future__ import annotations

import numpy as np

from .reduce_op import ReduceOp
from .work import Work


class MPIBackend:
    """One process of an MPI job (COMM_WORLD). Rank and size come from the launcher (mpiexec)."""

    name = "mpi"

    def __init__(self):
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise RuntimeError(
                "init_process_group(backend='mpi') needs mpi4py and an MPI library: "
                "pip install 'tinytensor[distributed]' (it brings mpi4py and MPICH's mpiexec); "
                f"importing mpi4py failed with: {e}"
            ) from None
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.world_size = self.comm.Get_size()
        self._ops = {
            ReduceOp.SUM: MPI.SUM,
            ReduceOp.AVG: MPI.SUM,  # then divided by the world size
            ReduceOp.PRODUCT: MPI.PROD,
            ReduceOp.MAX: MPI.MAX,
            ReduceOp.MIN: MPI.MIN,
        }
        # NOTE: MPI defines no arithmetic on C_BOOL; PyTorch's SUM/MAX of bools is OR,
        # PRODUCT/MIN is AND.
        self._bool_ops = {
            ReduceOp.SUM: MPI.LOR,
            ReduceOp.MAX: MPI.LOR,
            ReduceOp.PRODUCT: MPI.LAND,
            ReduceOp.MIN: MPI.LAND,
        }

    def _mpi_op(self, array, op: ReduceOp):
        return self._bool_ops[op] if array.dtype == np.bool_ else self._ops[op]

    def _average(self, array):
        array *= 1.0 / self.world_size  # NOTE: exact for power-of-two world sizes

    # ---- collectives on contiguous arrays, in place where PyTorch's are -------------------

    def all_reduce(self, array, op: ReduceOp) -> None:
        self.comm.Allreduce(self.MPI.IN_PLACE, array, op=self._mpi_op(array, op))
        if op is ReduceOp.AVG:
            self._average(array)

    def iall_reduce(self, array, op: ReduceOp) -> Work:
        """Starts the all-reduce and returns at once; `Work.wait()` completes it."""
        request = self.comm.Iallreduce(self.MPI.IN_PLACE, array, op=self._mpi_op(array, op))
        then = (lambda: self._average(array)) if op is ReduceOp.AVG else None
        return Work(request.Wait, then, request.Test)

    def broadcast(self, array, src: int) -> None:
        self.comm.Bcast(array, root=src)

    def all_gather(self, send, recv) -> None:
        """recv (world_size * send.size elements) receives every rank's `send`, rank by rank."""
        self.comm.Allgather(send, recv)

    def reduce_scatter(self, send, recv, op: ReduceOp) -> None:
        """Reduces `send` (world_size equal blocks) across ranks; block r lands in rank r's recv."""
        self.comm.Reduce_scatter_block(send, recv, op=self._mpi_op(send, op))
        if op is ReduceOp.AVG:
            self._average(recv)

    def all_reduce_host(self, array, op: ReduceOp) -> None:
        """A small NumPy array (argument checks): the same as all_reduce on this backend."""
        self.all_reduce(array, op)

    def barrier(self) -> None:
        self.comm.Barrier()

    # ---- Python objects (pickled): small metadata only --------------------------------------

    def all_gather_object(self, obj) -> list:
        return self.comm.allgather(obj)

    def broadcast_object(self, obj, src: int):
        return self.comm.bcast(obj, root=src)

    def abort(self, code: int = 1) -> None:
        """Ends every process of the job (mpiexec then exits non-zero)."""
        self.comm.Abort(code)

    def close(self) -> None:
        """Nothing to release: mpi4py finalizes MPI when the interpreter exits."""
