"""benchmarks/gpu_attention.py must work before a GPU is lent: its --dry-run runs the same checks
through the CPU executor, and every check must pass; without a GPU and without --dry-run it
says there is none and what to run instead."""

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import require_gxx

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_attention.py"


def test_gpu_benchmark_dry_run_passes(torch):
    require_gxx()
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run"], capture_output=True, text=True, timeout=300
    )
    print(result.stdout[-3000:], result.stderr[-3000:])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed, 0 failed" in result.stdout


def test_without_a_gpu_it_says_so_and_suggests_the_dry_run(tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_attention
    finally:
        sys.path.remove(str(SCRIPT.parent))
    if gpu_attention.no_gpu_reason() is None:
        pytest.skip("this machine has a GPU: the benchmark runs for real there")
    result = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no GPU here" in result.stdout
    suggested = result.stdout.split("python ")[-1].split()
    assert suggested[1:] == ["--dry-run"]
    assert (tmp_path / suggested[0]).resolve() == SCRIPT  # a path that works from where it ran
    assert "Traceback" not in result.stderr and "FAIL" not in result.stdout
