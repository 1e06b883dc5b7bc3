"""What the launcher told this process: rank, world size and rank within the machine.

mpiexec (MPICH/Hydra: PMI_*, MPI_LOCAL*), Open MPI's mpirun (OMPI_COMM_WORLD_*) and torchrun
(RANK, WORLD_SIZE, LOCAL_RANK) each name them differently; the first one set wins.
"""

from __future__ import annotations

import os

RANK = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "RANK")
WORLD_SIZE = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "WORLD_SIZE")
LOCAL_RANK = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK")
LOCAL_WORLD_SIZE = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE")


def launcher_value(names, default: int) -> int:
    """The first of the environment variables `names` that is set, as an int, else `default`."""
    for name in names:
        if name in os.environ:
            return int(os.environ[name])
    return default


def export_torchrun_variables() -> None:
    """Sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE as torchrun does, from MPI's
    names, so that scripts ported from PyTorch (nanoGPT reads RANK) find them under mpiexec."""
    for names in (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE):
        torch_name = names[-1]
        for name in names[:-1]:
            if name in os.environ:
                os.environ.setdefault(torch_name, os.environ[name])
                break
