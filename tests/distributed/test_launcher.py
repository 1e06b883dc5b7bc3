"""`python -m tinytensor.distributed.run`: torchrun's flags over mpiexec."""

import sys

import pytest

from tinytensor.distributed import run

from .jobs import expect_ok, run_job


def test_launcher_runs_the_script_on_n_ranks(mpiexec):
    launcher = [sys.executable, "-m", "tinytensor.distributed.run", "--nproc-per-node", "2"]
    expect_ok(run_job(launcher, "collectives.py", timeout=120, python=False))


def test_launcher_command_line():
    args = run.build_parser().parse_args(["--nproc_per_node", "3", "train.py", "--lr", "0.1"])
    command = run.command(args)
    assert command[1:3] == ["-n", "3"]
    assert command[3:] == [sys.executable, "-m", "tinytensor.distributed.worker", "train.py",
                           "--lr", "0.1"]  # fmt: skip


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--nproc-per-node", "0", "x.py"], "--nproc-per-node must be >= 1"),
        (["--nnodes", "2", "x.py"], "--nnodes 2: this launcher starts processes on one machine"),
    ],
)
def test_launcher_rejects_what_it_cannot_do(argv, message, capsys):
    with pytest.raises(SystemExit):
        run.main(argv)
    assert message in capsys.readouterr().err
