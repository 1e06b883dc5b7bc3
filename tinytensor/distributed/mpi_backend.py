"""The MPI backend: collectives on NumPy arrays through mpi4py (CPU tensors).

MPI chooses the algorithm (MPICH: recursive doubling for small messages, a ring or
reduce-scatter + all-gather for large ones); here each call is a thin wrapper over mpi4py's
buffer interface (`Iallreduce`, `Ibcast`, ...), which hands NumPy's memory to MPI without
copies or pickling. Arrays must be C-contiguous: collectives.py copies the others.

Leaving ranks: a rank whose script ends, or calls sys.exit, while the others still wait for it
in a collective would leave them waiting forever (its MPI_Finalize waits for theirs; Python
tells no exit hook the exit status, so it cannot tell an error from a normal end). So, at exit,
each rank sends every other a "leaving" message, and every wait here is a loop that tests the
collective and looks for such a message: a rank that finds one while it waits raises, naming
the rank that left, and its uncaught error ends the job (MPI_Abort). In a
program whose ranks make the same collectives, a rank that left joins none again, so the
message can only be seen by a rank that would otherwise hang.
"""

from __future__ import annotations

import atexit

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
        # a communicator of its own for the "leaving" messages (see the module docstring)
        self._leaving = self.comm.Dup()
        _announce_leaving_at_exit(self)
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
        self.wait(self.comm.Iallreduce(self.MPI.IN_PLACE, array, op=self._mpi_op(array, op)))
        if op is ReduceOp.AVG:
            self._average(array)

    def iall_reduce(self, array, op: ReduceOp) -> Work:
        """Starts the all-reduce and returns at once; `Work.wait()` completes it."""
        request = self.comm.Iallreduce(self.MPI.IN_PLACE, array, op=self._mpi_op(array, op))
        then = (lambda: self._average(array)) if op is ReduceOp.AVG else None
        return Work(lambda: self.wait(request), then, request.Test)

    def broadcast(self, array, src: int) -> None:
        self.wait(self.comm.Ibcast(array, root=src))

    def all_gather(self, send, recv) -> None:
        """recv (world_size * send.size elements) receives every rank's `send`, rank by rank."""
        self.wait(self.comm.Iallgather(send, recv))

    def reduce_scatter(self, send, recv, op: ReduceOp) -> None:
        """Reduces `send` (world_size equal blocks) across ranks; block r lands in rank r's recv."""
        self.wait(self.comm.Ireduce_scatter_block(send, recv, op=self._mpi_op(send, op)))
        if op is ReduceOp.AVG:
            self._average(recv)

    def all_reduce_host(self, array, op: ReduceOp) -> None:
        """A small NumPy array (argument checks): the same as all_reduce on this backend."""
        self.all_reduce(array, op)

    def barrier(self) -> None:
        self.wait(self.comm.Ibarrier())

    # ---- Python objects (pickled): small metadata only --------------------------------------

    def all_gather_object(self, obj) -> list:
        self.barrier()  # every rank is here (mpi4py's pickled collectives cannot be polled)
        return self.comm.allgather(obj)

    def broadcast_object(self, obj, src: int):
        self.barrier()
        return self.comm.bcast(obj, root=src)

    # ---- waiting ------------------------------------------------------------------------------

    def wait(self, request) -> None:
        """Completes `request`, raising if another rank left the job meanwhile."""
        # NOTE: tests in bursts between looks for a leaving message, which cost more
        while not any(request.Test() for _ in range(_TESTS_PER_LOOK)):
            status = self.MPI.Status()
            if self._leaving.Iprobe(source=self.MPI.ANY_SOURCE, tag=_LEAVING, status=status):
                raise RuntimeError(
                    f"rank {status.Get_source()} left the job (its script ended or called "
                    f"sys.exit) while rank {self.rank} was waiting for it in a collective: the "
                    "ranks did not make the same collectives (see rank "
                    f"{status.Get_source()}'s output for why it stopped)"
                )

    def abort(self, code: int = 1) -> None:
        """Ends every process of the job (mpiexec then exits non-zero)."""
        self.comm.Abort(code)

    def close(self) -> None:
        """Nothing to release: mpi4py finalizes MPI when the interpreter exits."""


_TESTS_PER_LOOK = 64
_LEAVING = 1  # the tag of "this rank is leaving" messages, on the backend's own communicator
_exiting_backend = None  # the backend that announces this process's exit (the latest one)


def _announce_leaving_at_exit(backend: MPIBackend) -> None:
    global _exiting_backend
    if _exiting_backend is None:
        # NOTE: registered after mpi4py's own exit handler (which finalizes MPI): runs first
        atexit.register(_say_leaving)
    _exiting_backend = backend


def _say_leaving() -> None:
    backend = _exiting_backend
    MPI = backend.MPI
    if backend.world_size == 1 or MPI.Is_finalized():
        return
    empty = np.zeros(0, np.uint8)
    requests = [
        backend._leaving.Isend(empty, dest=other, tag=_LEAVING)
        for other in range(backend.world_size)
        if other != backend.rank
    ]
    MPI.Request.Waitall(requests)  # an empty message: sent at once, received or not
