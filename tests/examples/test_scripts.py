"""The example scripts as a user runs them: --help, bad input, and a tiny end-to-end run."""

import json
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
SCRIPTS = ["train_gpt.py", "train_bert.py", "train_seq2seq.py"]
# NOTE: one BLAS thread: on a busy 2-core machine OpenBLAS's spinning threads make small matmuls
# many times slower, and these runs are tiny.
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}


def run_script(name, *args, timeout=120):
    return subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name), *args],
        capture_output=True, text=True, timeout=timeout, env=ENV,
    )  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_exits_0_and_lists_the_flags(script):
    done = run_script(script, "--help")
    assert done.returncode == 0, done.stderr
    for flag in ("--steps", "--resume", "--out-dir", "--device", "--max-minutes"):
        assert flag in done.stdout


@pytest.mark.parametrize(
    "script, extra",
    [("train_gpt.py", []), ("train_bert.py", []),
     ("train_seq2seq.py", ["--model", "bart", "--task", "denoise"])],
)  # fmt: skip
def test_a_missing_data_file_is_a_clear_error(script, extra, tmp_path):
    missing = str(tmp_path / "missing.txt")
    done = run_script(script, "--data", missing, "--out-dir", str(tmp_path), *extra)
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


def test_t5_cannot_take_the_bart_denoising_task():
    done = run_script("train_seq2seq.py", "--model", "t5", "--task", "denoise")
    assert done.returncode == 2 and "--model bart" in done.stderr


def test_device_cuda_without_a_gpu_is_a_clear_error():
    import tinytensor as tt

    if tt.cuda.is_available():
        pytest.skip("a GPU is present here, so --device cuda is valid")
    done = run_script("train_gpt.py", "--device", "cuda")
    assert done.returncode == 2 and "no usable CUDA GPU" in done.stderr


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


def _tiny_flags(tmp_path):
    return ["--out-dir", str(tmp_path / "run"), "--steps", "4", "--eval-every", "2",
            "--n-layer", "1", "--n-head", "2", "--no-progress", "--no-plot"]  # fmt: skip


@pytest.mark.parametrize("model, task", [("t5", "reverse"), ("bart", "add"), ("bart", "denoise")])
def test_seq2seq_runs_end_to_end(model, task, tmp_path, capsys):
    sys.path.insert(0, EXAMPLES)
    import train_seq2seq

    flags = _tiny_flags(tmp_path) + [
        "--model",
        model,
        "--task",
        task,
        "--d-model",
        "16",
        "--batch-size",
        "4",
        "--eval-examples",
        "6",
        "--window",
        "12",
    ]
    assert train_seq2seq.main(flags) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    score = "char_acc" if task == "denoise" else "exact_match"
    assert metrics["steps"] == 4 and 0.0 <= metrics[score] <= 1.0
    if task != "denoise":  # the printed examples come from the held-out set
        assert "->" in capsys.readouterr().out


def test_bert_runs_end_to_end_and_reports_masked_accuracy(tmp_path):
    sys.path.insert(0, EXAMPLES)
    import train_bert

    flags = _tiny_flags(tmp_path) + ["--d-model", "16", "--batch-size", "4", "--max-length", "24"]
    assert train_bert.main(flags) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0.0 <= metrics["masked_acc"] <= 1.0 and 0.0 <= metrics["nsp_acc"] <= 1.0


def test_graph_drawing_writes_the_block_and_gpt_graphs(tmp_path):
    sys.path.insert(0, EXAMPLES)
    import draw_transformer_graph

    assert draw_transformer_graph.main(["--out-dir", str(tmp_path)]) == 0
    block = (tmp_path / "transformer_block.dot").read_text()
    gpt = (tmp_path / "gpt.dot").read_text()
    # the ops are grouped by module: the clusters carry the modules' dotted names
    assert "self_attn" in block and "ScaledDotProductAttention" in block
    assert "blocks.0.ffn" in gpt and "CrossEntropy" in gpt
    assert (tmp_path / "mlp.dot").exists()


def test_ctrl_c_saves_a_checkpoint_and_resume_finishes_the_run(tmp_path):
    import signal
    import time

    import tinytensor as tt

    data = tmp_path / "text.txt"
    data.write_text("abcdefghij klmnop. " * 200)
    out = tmp_path / "run"
    flags = ["--data", str(data), "--out-dir", str(out), "--steps", "100000", "--n-layer", "1",
             "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
             "--checkpoint-every", "5", "--eval-every", "100000", "--no-progress",
             "--no-plot"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, os.path.join(EXAMPLES, "train_gpt.py"), *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    checkpoint = out / "checkpoint.safetensors"
    deadline = time.time() + 60
    while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C in a terminal sends
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted at step" in stdout and "--resume" in stdout
    state = tt.load(str(checkpoint))
    stopped_at = state["step"]
    assert stopped_at >= 5 and len(state["history"]["train_loss"]) == stopped_at
    # --resume takes the other flags from the checkpoint; --max-minutes may change, so a
    # short limit ends the (otherwise 100000-step) run cleanly after a few more steps
    done = run_script("train_gpt.py", "--resume", "--out-dir", str(out), "--max-minutes", "0.02",
                      "--no-progress", "--no-plot")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"resuming from step {stopped_at}" in done.stdout
    assert tt.load(str(checkpoint))["step"] > stopped_at
