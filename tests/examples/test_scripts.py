"""The example scripts as a user runs them: --help, bad input, and a tiny end-to-end run."""

import json
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
SCRIPTS = ["train_gpt.py"]


def run_script(name, *args, timeout=120):
    return subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name), *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_exits_0_and_lists_the_flags(script):
    done = run_script(script, "--help")
    assert done.returncode == 0, done.stderr
    for flag in ("--steps", "--resume", "--out-dir", "--device", "--max-minutes"):
        assert flag in done.stdout


@pytest.mark.parametrize("script", ["train_gpt.py"])
def test_a_missing_data_file_is_a_clear_error(script, tmp_path):
    done = run_script(script, "--data", str(tmp_path / "missing.txt"), "--out-dir", str(tmp_path))
    assert done.returncode == 2
    assert "missing.txt" in done.stderr and "does not exist" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bad_flag_value_is_a_clear_error(script):
    done = run_script(script, "--steps", "-3")
    assert done.returncode == 2 and "--steps" in done.stderr and "Traceback" not in done.stderr


def test_resume_without_a_checkpoint_is_a_clear_error(tmp_path):
    done = run_script("train_gpt.py", "--resume", "--out-dir", str(tmp_path))
    assert done.returncode == 2 and "no checkpoint" in done.stderr


def test_gpt_trains_on_a_user_text_file_and_writes_its_outputs(tmp_path):
    sys.path.insert(0, EXAMPLES)
    import train_gpt

    data = tmp_path / "poem.txt"
    data.write_text("row, row, row your boat, gently down the stream.\n" * 30)
    out = tmp_path / "run"
    flags = ["--data", str(data), "--out-dir", str(out), "--steps", "6", "--n-layer", "1",
             "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
             "--eval-every", "3", "--sample-chars", "20", "--no-progress", "--no-plot"]  # fmt: skip
    assert train_gpt.main(flags) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 6 and metrics["val_loss"] > 0
    sample = (out / "sample.txt").read_text()
    assert sample.startswith("row, row") and len(sample) == 8 + 20  # 'T' is not in this text
