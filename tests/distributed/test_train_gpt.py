"""`mpiexec -n 2 python examples/train_gpt.py`: data-parallel training of the main job's script.

Rank 0 alone prints and writes; the ranks draw different batches; a run stopped early and
resumed on 2 processes gives the same losses, bit for bit, as one that was not stopped; a
2-process checkpoint refuses to resume on 1 process.
"""

import json
import os

import tinytensor as tt

from .jobs import REPO, run_job

SCRIPT = os.path.join(REPO, "examples", "train_gpt.py")
TINY = ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "16",
        "--batch-size", "8", "--eval-every", "100000", "--checkpoint-every", "100000",
        "--no-progress", "--no-plot", "--sample-chars", "20"]  # fmt: skip


def train(mpiexec, out, *flags, n=2):
    return run_job([mpiexec, "-n", str(n)], SCRIPT, "--out-dir", str(out), *flags, timeout=300)


def test_two_ranks_train_print_once_and_resume_exactly(mpiexec, tmp_path):
    data = tmp_path / "text.txt"
    data.write_text("the quick brown fox jumps over the lazy dog. " * 300)
    common = ["--data", str(data), *TINY]

    full = train(mpiexec, tmp_path / "full", *common, "--steps", "60")
    assert full.returncode == 0, full.output
    assert full.stdout.count("GPT: ") == 1 and full.stdout.count("trained 60 steps") == 1
    assert "on 2 processes" in full.stdout
    assert sorted(os.listdir(tmp_path / "full")) == [
        "checkpoint.safetensors", "metrics.json", "sample.txt"]  # fmt: skip
    state = tt.load(str(tmp_path / "full" / "checkpoint.safetensors"))
    ranks = state["rng"]["ranks"]
    assert len(ranks) == 2 and ranks[0]["batches"] != ranks[1]["batches"]  # own data order
    assert ranks[0]["global"] != ranks[1]["global"]  # own dropout masks
    assert list(state["model"])[0].startswith("wte")  # the plain model's keys, no "module."
    assert json.loads((tmp_path / "full" / "metrics.json").read_text())["steps"] == 60

    # stopped before the end, then resumed on 2 processes (a step, not a time limit: how far a
    # run gets in a given time depends on the machine)
    part = tmp_path / "part"
    first = train(mpiexec, part, *common, "--steps", "60", "--stop-at-step", "23")
    assert first.returncode == 0, first.output
    assert "stopped by --stop-at-step at step 23" in first.stdout
    stopped_at = tt.load(str(part / "checkpoint.safetensors"))["step"]
    assert stopped_at == 23
    resumed = train(mpiexec, part, "--resume", "--no-progress", "--no-plot")
    assert resumed.returncode == 0, resumed.output
    assert resumed.stdout.count(f"resuming from step {stopped_at} of 60") == 1
    history = tt.load(str(part / "checkpoint.safetensors"))["history"]
    assert history["train_loss"] == state["history"]["train_loss"]  # bit for bit

    # a 2-process checkpoint cannot continue on 1 process (each rank's data order would break)
    alone = train(mpiexec, part, "--resume", "--no-progress", n=1)
    assert alone.returncode != 0
    assert "written by 2 process(es), this run has 1" in alone.output


def test_a_batch_that_does_not_divide_is_a_clear_error(mpiexec, tmp_path):
    done = train(mpiexec, tmp_path, "--batch-size", "7", "--steps", "1", "--no-progress")
    assert done.returncode != 0
    assert "--batch-size 7 does not divide among 2 processes" in done.output
