"""The same PyTorch-style DDP script (programs/pytorch_style.py: init_process_group("gloo"),
RANK/WORLD_SIZE, DDP, DistributedSampler + DataLoader, accumulation through
require_backward_grad_sync, all_reduce of the logged loss) run by torchrun on PyTorch and by
tinytensor's launcher on tinytensor: the same indices on every rank, losses and weights."""

import json
import sys

import numpy as np

from .jobs import expect_ok, run_job


def test_the_same_script_gives_the_same_run_on_torch_and_tinytensor(torch, mpiexec, tmp_path):
    results = {}
    launchers = {
        "torch": [sys.executable, "-m", "torch.distributed.run", "--standalone"],
        "tinytensor": [sys.executable, "-m", "tinytensor.distributed.run"],
    }
    for library, launcher in launchers.items():
        out = tmp_path / f"{library}.json"
        done = run_job([*launcher, "--nproc-per-node", "2"], "pytorch_style.py", library, out,
                       timeout=180, python=False)  # fmt: skip
        expect_ok(done)
        results[library] = json.loads(out.read_text())
    ours, theirs = results["tinytensor"], results["torch"]
    assert ours["indices"] == theirs["indices"]
    assert len(ours["losses"]) == len(theirs["losses"]) == 6  # 3 epochs x 2 synced steps
    np.testing.assert_allclose(ours["losses"], theirs["losses"], rtol=1e-10, atol=1e-12)
    assert ours["state"].keys() == theirs["state"].keys()
    for name, value in theirs["state"].items():
        np.testing.assert_allclose(ours["state"][name], value, rtol=1e-10, atol=1e-12)
