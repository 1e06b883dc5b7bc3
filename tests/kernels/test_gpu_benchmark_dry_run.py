"""benchmarks/gpu_attention.py must work before a GPU is lent: its --dry-run runs the same checks
through the CPU executor, and every check must pass."""

import subprocess
import sys
from pathlib import Path

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
