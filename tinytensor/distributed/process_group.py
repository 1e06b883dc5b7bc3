"""The process group: which process this is among how many, and the backend that connects them.

    import tinytensor.distributed as dist
    dist.init_process_group(backend="mpi")     # under `mpiexec -n 4 python train.py`
    dist.get_rank(), dist.get_world_size()     # (0..3, 4)

Rank and world size come from the launcher (mpiexec sets them for MPI; the NCCL backend reads
PMI_RANK/OMPI_COMM_WORLD_RANK/RANK). Under a launcher with more than one process, an exception
that nobody catches in any rank (from the import of this package on) prints that rank's
traceback and aborts the whole job (MPI_Abort), so a failing rank can never leave the others
waiting forever in a collective.
"""

from __future__ import annotations

import sys
import time
import traceback

from .launcher_env import RANK, WORLD_SIZE, export_torchrun_variables, launcher_value

_backend = None  # the live backend (MPIBackend or NCCLBackend), None before init
_previous_excepthook = None

# PyTorch's CPU backend is gloo; here MPI plays that part, so scripts that ask for gloo run.
_BACKENDS = {"mpi": "mpi", "gloo": "mpi", "nccl": "nccl"}


def is_available() -> bool:
    """True: the package is always there (the backends need their libraries only at init)."""
    return True


def is_mpi_available() -> bool:
    """Whether mpi4py (and through it an MPI library) can be imported."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_nccl_available() -> bool:
    """Whether CuPy with NCCL can be imported (a GPU is needed to use it)."""
    try:
        from cupy.cuda import nccl
    except Exception:  # CuPy raises several kinds when CUDA is absent
        return False
    return bool(getattr(nccl, "available", True))


def init_process_group(
    backend: str = "mpi",
    init_method=None,
    timeout=None,
    world_size: int = -1,
    rank: int = -1,
    store=None,
    group_name: str = "",
    pg_options=None,
    device_id=None,
) -> None:
    """Joins this process to the job, as `torch.distributed.init_process_group`.

    Args:
        backend: "mpi" (CPU tensors, through mpi4py; "gloo" is accepted as its alias) or
            "nccl" (CUDA tensors, through CuPy's NCCL).
        world_size, rank: optional checks: the launcher decides both; a value that differs from
            the launcher's is an error (-1: accept the launcher's).
        init_method, timeout, store, group_name, pg_options, device_id: accepted for
            PyTorch compatibility; mpiexec does the rendezvous, so they are not used.

    Example:
        >>> dist.init_process_group("mpi")   # run as: mpiexec -n 2 python script.py
    """
    global _backend
    if _backend is not None:
        raise RuntimeError(
            "init_process_group: the default process group is already initialized; call "
            "destroy_process_group() first"
        )
    if not isinstance(backend, str) or backend.lower() not in _BACKENDS:
        raise ValueError(
            f"init_process_group: backend must be 'mpi', 'gloo' (alias of mpi) or 'nccl', "
            f"got {backend!r}"
        )
    if _BACKENDS[backend.lower()] == "mpi":
        from .mpi_backend import MPIBackend

        made = MPIBackend()
    else:
        from .nccl_backend import NCCLBackend

        made = NCCLBackend()
    for name, wanted, actual in (
        ("world_size", world_size, made.world_size),
        ("rank", rank, made.rank),
    ):
        if wanted not in (-1, None) and int(wanted) != actual:
            raise ValueError(
                f"init_process_group: {name}={wanted} but the launcher started this process "
                f"with {name} {actual} (launch with mpiexec -n N, or drop the argument)"
            )
    _backend = made
    _install_excepthook()


def _abort_job_on_uncaught_exception(kind, value, tb) -> None:
    """Prints this rank's traceback, then ends every rank: never a job that hangs."""
    rank = _backend.rank if _backend is not None else launcher_value(RANK, "?")
    text = "".join(traceback.format_exception(kind, value, tb))
    sys.stderr.write(f"[rank {rank}] uncaught {kind.__name__}: aborting the job\n{text}")
    sys.stderr.flush()
    sys.stdout.flush()
    abort_job(1)
    (_previous_excepthook or sys.__excepthook__)(kind, value, tb)


def abort_job(code: int) -> None:
    """Ends every rank of the job with status `code` (MPI_Abort); alone, just returns.

    A rank that fails before init_process_group still joins MPI to abort: the other ranks may
    already be waiting for it in MPI_Init or in a collective.
    """
    if _backend is not None:
        if _backend.world_size > 1:
            _let_output_through()
            _backend.abort(code)
        return
    if launcher_value(WORLD_SIZE, 1) > 1:
        try:
            from mpi4py import MPI
        except ImportError:
            return
        if not MPI.Is_finalized():
            _let_output_through()
            MPI.COMM_WORLD.Abort(code)


OUTPUT_GRACE_SECONDS = 0.5


def _let_output_through() -> None:
    """Waits a moment before MPI_Abort, so that mpiexec forwards what this rank printed.

    NOTE: MPI_Abort has mpiexec kill every process of the job at once; output still in the
    pipes between a rank and mpiexec dies with them. One CI run of the failing-rank test got
    no output at all, the traceback included; the other runs, before and after, had it."""
    sys.stderr.flush()
    sys.stdout.flush()
    time.sleep(OUTPUT_GRACE_SECONDS)


def _install_excepthook() -> None:
    global _previous_excepthook
    if sys.excepthook is not _abort_job_on_uncaught_exception:
        _previous_excepthook = sys.excepthook
        sys.excepthook = _abort_job_on_uncaught_exception


# NOTE: on import under a multi-process MPI launch: the hook, so that a rank failing even
# before init_process_group (while loading data, say) ends the job instead of leaving the
# others waiting for it; and torchrun's variables.
if launcher_value(WORLD_SIZE, 1) > 1:
    _install_excepthook()
    export_torchrun_variables()


def is_initialized() -> bool:
    return _backend is not None


def destroy_process_group(group=None) -> None:
    """Leaves the job's group; init_process_group may be called again afterwards."""
    global _backend
    _check_group(group, "destroy_process_group")
    if _backend is None:
        raise RuntimeError("destroy_process_group: no process group is initialized")
    _backend.close()
    _backend = None
    alone = launcher_value(WORLD_SIZE, 1) == 1  # else keep the hook: a later failure must abort
    if sys.excepthook is _abort_job_on_uncaught_exception and alone:
        sys.excepthook = _previous_excepthook or sys.__excepthook__


def get_backend(group=None) -> str:
    return current_backend("get_backend", group).name


def get_rank(group=None) -> int:
    """This process's index, 0 .. world_size - 1 (rank 0 prints, saves and logs)."""
    return current_backend("get_rank", group).rank


def get_world_size(group=None) -> int:
    """How many processes the job has."""
    return current_backend("get_world_size", group).world_size


def current_backend(where: str, group=None):
    """The initialized backend, or a clear error naming the function that needed it."""
    _check_group(group, where)
    if _backend is None:
        raise RuntimeError(
            f"{where}: the default process group is not initialized; call "
            "tinytensor.distributed.init_process_group('mpi') first (and launch with mpiexec)"
        )
    return _backend


class _World:
    """The default group (`dist.group.WORLD`): the only group this package has."""

    WORLD = None  # as PyTorch, where group=None also means the world


group = _World()


def _check_group(group_arg, where: str) -> None:
    if group_arg is not None:
        raise NotImplementedError(
            f"{where}: only the default group (group=None) is supported, got {group_arg!r}"
        )
