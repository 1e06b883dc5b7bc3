"""The training scripts refuse every bad flag and bad data file before any work: exit status 2,
one line on stderr (`train_gpt.py: error: ...`), nothing on stdout, no traceback, nothing
written. Run as a user runs them (a subprocess each); the property test at the end drives
`main` in-process over many generated bad values."""

import hashlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}  # tiny runs on a busy 2-core machine

TEXT = "row, row, row your boat, gently down the stream.\n" * 10  # 490 characters
# NOTE: every run starts from flags of a tiny model and a 2-step run, so that a bad flag the
# scripts failed to catch costs seconds, not the default run's minutes
TINY = {
    "train_gpt.py": "--data {text} --out-dir {out} --steps 2 --n-layer 1 --n-embd 16 --n-head 2 "
    "--block-size 16 --batch-size 2 --sample-chars 4 --no-progress --no-plot",
    "train_bert.py": "--data {docs} --out-dir {out} --steps 2 --n-layer 1 --d-model 16 --n-head 2 "
    "--max-length 24 --batch-size 2 --no-progress --no-plot",
    "train_seq2seq.py": "--out-dir {out} --steps 2 --n-layer 1 --d-model 16 --n-head 2 "
    "--batch-size 2 --eval-examples 4 --no-progress --no-plot",
}
PREFIX = "..."  # an expected message ending in it is compared up to there

GPT_CASES = [
    ("--n-layer -1", "argument --n-layer: must be a positive integer, got -1"),
    ("--n-layer 0", "argument --n-layer: must be a positive integer, got 0"),
    ("--n-layer abc", "argument --n-layer: must be a positive integer, got 'abc'"),
    ("--n-layer 1.5", "argument --n-layer: must be a positive integer, got '1.5'"),
    ("--n-head 0", "argument --n-head: must be a positive integer, got 0"),
    ("--n-embd 0", "argument --n-embd: must be a positive integer, got 0"),
    ("--n-embd 99999999999", "argument --n-embd: must be a positive integer, got 99999999999"),
    (
        "--n-embd 15",
        "argument --n-embd: 15 is not divisible by --n-head 2 (each head gets width "
        "/ heads channels)",
    ),
    ("--block-size 0", "argument --block-size: must be a positive integer, got 0"),
    (
        "--block-size 1",
        "argument --block-size: must be at least 2 (samples continue from half a block), got 1",
    ),
    (
        "--block-size 1000",
        "argument --data: the text has 49 tokens, too few for windows of block_size=1000",
    ),
    ("--dropout -0.1", "argument --dropout: must be a probability in [0, 1), got -0.1"),
    ("--dropout 1", "argument --dropout: must be a probability in [0, 1), got 1"),
    ("--dropout nan", "argument --dropout: must be a probability in [0, 1), got nan"),
    ("--val-fraction 0", "argument --val-fraction: must be a fraction in (0, 1), got 0"),
    ("--val-fraction 1", "argument --val-fraction: must be a fraction in (0, 1), got 1"),
    ("--val-fraction nan", "argument --val-fraction: must be a fraction in (0, 1), got nan"),
    ("--steps 0", "argument --steps: must be a positive integer, got 0"),
    ("--steps -3", "argument --steps: must be a positive integer, got -3"),
    ("--steps 1e3", "argument --steps: must be a positive integer, got '1e3'"),
    ("--batch-size 0", "argument --batch-size: must be a positive integer, got 0"),
    ("--lr 0", "argument --lr: must be a finite positive number, got 0"),
    ("--lr -1", "argument --lr: must be a finite positive number, got -1"),
    ("--lr nan", "argument --lr: must be a finite positive number, got nan"),
    ("--lr inf", "argument --lr: must be a finite positive number, got inf"),
    ("--lr fast", "argument --lr: must be a finite positive number, got 'fast'"),
    ("--warmup-steps -1", "argument --warmup-steps: must be a non-negative integer, got -1"),
    ("--weight-decay nan", "argument --weight-decay: must be a finite number >= 0, got nan"),
    ("--weight-decay -0.1", "argument --weight-decay: must be a finite number >= 0, got -0.1"),
    ("--grad-clip 0", "argument --grad-clip: must be a finite positive number, got 0"),
    ("--grad-clip nan", "argument --grad-clip: must be a finite positive number, got nan"),
    ("--eval-every 0", "argument --eval-every: must be a positive integer, got 0"),
    ("--checkpoint-every 0", "argument --checkpoint-every: must be a positive integer, got 0"),
    ("--max-minutes 0", "argument --max-minutes: must be a finite positive number, got 0"),
    ("--max-minutes nan", "argument --max-minutes: must be a finite positive number, got nan"),
    ("--seed -1", "argument --seed: must be an integer in [0, 2**63), got -1"),
    ("--seed 1.5", "argument --seed: must be an integer in [0, 2**63), got '1.5'"),
    ("--sample-chars -1", "argument --sample-chars: must be a non-negative integer, got -1"),
    ("--temperature -1", "argument --temperature: must be a finite number >= 0, got -1"),
    ("--temperature nan", "argument --temperature: must be a finite number >= 0, got nan"),
    ("--temperature inf", "argument --temperature: must be a finite number >= 0, got inf"),
    ("--prompt=", "argument --prompt: must not be empty"),
    ("--prompt Zq€", "argument --prompt: characters 'Zq€' do not occur in the text"),
    (
        "--data {missing}",
        "argument --data: data file '{missing}' does not exist (pass a UTF-8 text file)",
    ),
    ("--data {folder}", "argument --data: data file '{folder}' is not a regular file"),
    ("--data {fifo}", "argument --data: data file '{fifo}' is not a regular file"),
    (
        "--data {latin1}",
        "argument --data: data file '{latin1}' is not valid UTF-8: byte 0xe9 at "
        "offset 493 (invalid continuation byte); convert it first, e.g. iconv -f latin1 -t utf-8",
    ),
    (
        "--data {short}",
        "argument --data: data file '{short}' holds 11 characters; need at least 100",
    ),
    ("--out-dir {text}", "argument --out-dir: '{text}' exists and is not a directory"),
    ("--out-dir {text}/run", "argument --out-dir: cannot create '{text}/run': '{text}' is a file"),
    ("--device tpu", "argument --device: invalid choice: 'tpu'" + PREFIX),
    ("--n-layer", "argument --n-layer: expected one argument"),
    ("--bogus 1", "unrecognized arguments: --bogus 1"),
    (
        "--n-layer 100000 --n-embd 100000",
        "--n-layer/--n-embd/--batch-size/--block-size: " + PREFIX,
    ),
    ("--batch-size 2147483647", "--n-layer/--n-embd/--batch-size/--block-size: " + PREFIX),
    # --resume on {trained}, a finished 2-step run on {text}
    (
        "--resume --out-dir {empty}",
        "argument --resume: no checkpoint at "
        "'{empty}/checkpoint.safetensors' to resume from (train without --resume first, or "
        "pass the --out-dir of the run to continue)",
    ),
    ("--resume --out-dir {garbage}", "argument --resume: cannot read the checkpoint: " + PREFIX),
    (
        "--resume --out-dir {trained} --steps 1",
        "argument --steps: the checkpoint has already "
        "reached step 2; pass --steps 2 or more to continue it (got 1)",
    ),
    (
        "--resume --out-dir {trained} --n-layer 2",
        "argument --n-layer: the checkpoint's run has "
        "1; --resume cannot change it (start a new run in another --out-dir instead)",
    ),
    (
        "--resume --out-dir {trained} --seed 7",
        "argument --seed: the checkpoint's run has 0; "
        "--resume cannot change it (start a new run in another --out-dir instead)",
    ),
    (
        "--resume --out-dir {trained} --data {text2}",
        "argument --data: the checkpoint's run has "
        "'{text}'; --resume cannot change it (with --allow-data-change) (start a new run in "
        "another --out-dir instead)",
    ),
    (
        "--resume --out-dir {changed} --data {changing}",
        "argument --resume: the data "
        "'{changing}' has changed since the checkpoint was written (sha256 " + PREFIX,
    ),
]
BERT_CASES = [
    (
        "--max-length 4",
        "argument --max-length: must be at least 5 ([CLS] A [SEP] B [SEP] with a "
        "character each), got 4",
    ),
    ("--mlm-probability 0", "argument --mlm-probability: must be a probability in (0, 1], got 0"),
    (
        "--mlm-probability 1.5",
        "argument --mlm-probability: must be a probability in (0, 1], got 1.5",
    ),
    (
        "--d-model 30 --n-head 4",
        "argument --d-model: 30 is not divisible by --n-head 4 (each head "
        "gets width / heads channels)",
    ),
    ("--dropout 1", "argument --dropout: must be a probability in [0, 1), got 1"),
    ("--n-layer -1", "argument --n-layer: must be a positive integer, got -1"),
    ("--lr nan", "argument --lr: must be a finite positive number, got nan"),
    (
        "--data {latin1}",
        "argument --data: data file '{latin1}' is not valid UTF-8: byte 0xe9 at "
        "offset 493 (invalid continuation byte); convert it first, e.g. iconv -f latin1 -t utf-8",
    ),
]
SEQ2SEQ_CASES = [
    ("--min-len 0", "argument --min-len: must be a positive integer, got 0"),
    ("--max-len -2", "argument --max-len: must be a positive integer, got -2"),
    ("--min-len 5 --max-len 3", "--min-len 5 and --max-len 3: need 1 <= min <= max"),
    ("--eval-examples 0", "argument --eval-examples: must be a positive integer, got 0"),
    ("--window 0", "argument --window: must be a positive integer, got 0"),
    (
        "--eval-examples 1000000",
        "argument --eval-examples: must be at most 100000 (every evaluation decodes them all), "
        "got 1000000",
    ),
    (
        "--d-model 30 --n-head 4",
        "argument --d-model: 30 is not divisible by --n-head 4 (each head "
        "gets width / heads channels)",
    ),
    (
        "--task sort --min-len 1 --max-len 1 --eval-examples 300",
        "argument --max-len: --task sort "
        "has 26 distinct inputs of 1..1 characters and --eval-examples holds out 26 of them, "
        "leaving too few to train on; raise --max-len or lower --eval-examples",
    ),
    (
        "--task sort --min-len 27 --max-len 30",
        "argument --min-len: must be at most 26 (sort uses distinct letters), got 27",
    ),
    (
        "--model bart --max-len 300",
        "argument --max-len: must be at most 254 (BART learns 256 positions: <s>, </s>), got 300",
    ),
    (
        "--max-len 100000",
        "argument --max-len: must be at most 4096 (longer rows do not fit a CPU "
        "example), got 100000",
    ),
    (
        "--model bart --task denoise --data {text} --window 100",
        "argument --window: 100 characters "
        "do not fit in the held-out 10% of the text (49 characters); lower it or pass a longer "
        "--data",
    ),
    (
        "--model bart --task denoise --data {fifo}",
        "argument --data: data file '{fifo}' is not a regular file",
    ),
    (
        "--model t5 --task denoise",
        "--task denoise is BART's pretraining objective: use --model bart",
    ),
    (
        "--task reverse --data {text}",
        "--data is for --task denoise; the other tasks make their own examples",
    ),
]
CASES = (
    [("train_gpt.py", *case) for case in GPT_CASES]
    + [("train_bert.py", *case) for case in BERT_CASES]
    + [("train_seq2seq.py", *case) for case in SEQ2SEQ_CASES]
)


def run_script(name, args, timeout=120):
    return subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
    )


def tiny_flags(script, paths, extra=""):
    """The script's tiny flags then `extra` (argparse: the last value of a flag wins)."""
    flags = TINY[script].split() + extra.split()
    return [f.format(**paths) for f in flags]


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """Data files good and bad, and run folders; {trained} and {changed} hold 2-step GPT runs."""
    root = tmp_path_factory.mktemp("flags")
    p = {
        name: str(root / name)
        for name in (
            "text",
            "text2",
            "docs",
            "missing",
            "folder",
            "fifo",
            "latin1",
            "short",
            "out",
            "empty",
            "garbage",
            "trained",
            "changed",
            "changing",
        )
    }
    for name in ("text", "text2", "changing"):
        (root / name).write_text(TEXT)
    sentences = "One sentence here. Another one follows. And a third one.\n\n\n"
    (root / "docs").write_text(sentences * 12)
    (root / "latin1").write_bytes(TEXT.encode() + "café au lait".encode("latin-1"))  # é: offset 493
    (root / "short").write_text("hello world")
    os.mkdir(p["folder"])
    os.mkfifo(p["fifo"])
    os.mkdir(p["empty"])
    os.mkdir(p["garbage"])
    (root / "garbage" / "checkpoint.safetensors").write_bytes(b"\x00" * 64)
    for run, data in (("trained", "text"), ("changed", "changing")):
        done = run_script(
            "train_gpt.py",
            tiny_flags("train_gpt.py", p, f"--out-dir {{{run}}}") + ["--data", p[data]],
        )
        assert done.returncode == 0, done.stderr
    with open(p["changing"], "a") as f:
        f.write("row, row.\n")
    return p


@pytest.mark.parametrize("script, extra, message", CASES, ids=[f"{c[0]} {c[1]}" for c in CASES])
def test_a_bad_invocation_is_one_line_exit_2_and_no_work(script, extra, message, paths):
    checkpoints = {
        name: _read(os.path.join(paths[name], "checkpoint.safetensors"))
        for name in ("trained", "changed")
    }
    done = run_script(script, tiny_flags(script, paths, extra))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    expected = f"{script}: error: " + message.format(**paths)
    if expected.endswith(PREFIX):
        assert lines[0].startswith(expected[: -len(PREFIX)]), lines[0]
    else:
        assert lines[0] == expected
    assert done.stdout == ""  # nothing printed: no model was built, no step was taken
    assert not os.path.exists(paths["out"])  # nothing written
    for name, before in checkpoints.items():  # a refused --resume leaves its checkpoint alone
        assert _read(os.path.join(paths[name], "checkpoint.safetensors")) == before


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- what a valid run does with the same features ------------------------------------------------


def _checkpoint(folder):
    import tinytensor as tt

    return tt.load(os.path.join(folder, "checkpoint.safetensors"))


def test_the_checkpoint_records_the_sha256_of_its_data(paths):
    with open(paths["text"], "rb") as f:
        expected = hashlib.sha256(f.read()).hexdigest()
    assert _checkpoint(paths["trained"])["meta"]["data_sha256"] == expected


def test_resume_with_a_larger_steps_continues_to_it(paths, tmp_path):
    run = str(tmp_path / "run")
    shutil.copytree(paths["trained"], run)
    done = run_script(
        "train_gpt.py", ["--resume", "--out-dir", run, "--steps", "4", "--no-progress", "--no-plot"]
    )
    assert done.returncode == 0, done.stderr
    assert "resuming from step 2 of 4" in done.stdout
    state = _checkpoint(run)
    assert state["step"] == 4 and len(state["history"]["train_loss"]) == 4
    assert state["meta"]["args"]["steps"] == 4  # a later --resume continues to 4, not 2
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["steps"] == 4


def test_resume_with_the_steps_reached_trains_nothing_and_says_so(paths, tmp_path):
    run = str(tmp_path / "run")
    shutil.copytree(paths["trained"], run)
    done = run_script(
        "train_gpt.py", ["--resume", "--out-dir", run, "--steps", "2", "--no-progress", "--no-plot"]
    )
    assert done.returncode == 0, done.stderr
    assert "already reached --steps 2" in done.stdout
    assert _checkpoint(run)["step"] == 2


def test_allow_data_change_resumes_on_the_changed_file_and_records_its_hash(paths, tmp_path):
    run = str(tmp_path / "run")
    shutil.copytree(paths["changed"], run)
    done = run_script(
        "train_gpt.py",
        [
            "--resume",
            "--out-dir",
            run,
            "--steps",
            "3",
            "--allow-data-change",
            "--no-progress",
            "--no-plot",
        ],
    )
    assert done.returncode == 0, done.stderr
    assert "--allow-data-change: resuming on changed data" in done.stdout
    with open(paths["changing"], "rb") as f:
        now = hashlib.sha256(f.read()).hexdigest()
    state = _checkpoint(run)
    assert state["step"] == 3 and state["meta"]["data_sha256"] == now


def test_a_checkpoint_without_a_data_hash_still_resumes(paths, tmp_path):
    """Checkpoints written before the hash was recorded continue as they did."""
    import tinytensor as tt

    run = str(tmp_path / "run")
    shutil.copytree(paths["trained"], run)
    state = _checkpoint(run)
    del state["meta"]["data_sha256"]
    tt.save(state, os.path.join(run, "checkpoint.safetensors"))
    done = run_script(
        "train_gpt.py", ["--resume", "--out-dir", run, "--steps", "3", "--no-progress", "--no-plot"]
    )
    assert done.returncode == 0, done.stderr
    assert _checkpoint(run)["step"] == 3


@pytest.mark.parametrize("flag", ["--lr 1e30", "--weight-decay 1e300"])
def test_a_diverging_run_ends_with_one_line_and_exit_1(flag, paths, tmp_path):
    extra = f"{flag} --out-dir {tmp_path / 'run'} --steps 4"
    done = run_script("train_gpt.py", tiny_flags("train_gpt.py", paths, extra))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    # NOTE: the last line; NumPy may warn of the overflow before it
    last = done.stderr.splitlines()[-1]
    assert last.startswith("train_gpt.py: error: the training loss became nan at step ")
    assert last.endswith("; lower the learning rate (--lr) or the gradient clip (--grad-clip)")


def test_temperature_0_samples_greedily(paths, tmp_path):
    """Two runs that differ only in --seed's effect on sampling would differ if temperature 0
    still drew random numbers; instead the sample is the argmax continuation of the prompt."""
    sys.path.insert(0, EXAMPLES)
    import numpy as np
    import train_gpt
    from training.data import CharTokenizer

    import tinytensor as tt

    tokenizer = CharTokenizer.from_text(TEXT)
    args = train_gpt.build_parser().parse_args(
        ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "16"]
    )
    tt.manual_seed(0)
    model = train_gpt.build_model(args, tokenizer.vocab_size)
    samples = [
        train_gpt.sample_text(model, tokenizer, "row", 12, 0.0, 16, "cpu", seed=seed)
        for seed in (0, 1)
    ]
    assert samples[0] == samples[1]
    ids = list(tokenizer.encode("row"))
    with tt.no_grad():
        while len(ids) < 3 + 12:
            context = ids[-8:] if len(ids) >= 8 else ids  # the script's half-block context
            logits = model(tt.tensor(np.array([context]))).logits.numpy()[0, -1]
            ids.append(int(logits.argmax()))
    assert samples[0] == tokenizer.decode(ids)
    sampled = train_gpt.sample_text(model, tokenizer, "row", 12, 5.0, 16, "cpu", seed=1)
    assert sampled != samples[0]  # a hot temperature (with this seed) does sample


def test_crlf_data_is_read_as_python_text_mode_reads_it(tmp_path):
    sys.path.insert(0, EXAMPLES)
    from training.data import load_text_and_hash

    data = tmp_path / "crlf.txt"
    data.write_bytes(TEXT.replace("\n", "\r\n").encode())
    text, sha = load_text_and_hash(str(data))
    assert text == TEXT and sha == hashlib.sha256(data.read_bytes()).hexdigest()


# ---- property: any bad number for a numeric flag is one usage line -------------------------------

INT_FLAGS = [
    "--n-layer",
    "--n-head",
    "--n-embd",
    "--block-size",
    "--steps",
    "--batch-size",
    "--eval-every",
    "--checkpoint-every",
]
FLOAT_FLAGS = {  # flag: (low, high, low allowed, high allowed)
    "--lr": (0.0, math.inf, False, False),
    "--grad-clip": (0.0, math.inf, False, False),
    "--max-minutes": (0.0, math.inf, False, False),
    "--temperature": (0.0, math.inf, True, False),
    "--weight-decay": (0.0, math.inf, True, False),
    "--dropout": (0.0, 1.0, True, False),
    "--val-fraction": (0.0, 1.0, False, False),
}


def _bad_float(flag):
    low, high, low_ok, high_ok = FLOAT_FLAGS[flag]
    below = st.floats(max_value=low, allow_nan=False).filter(lambda v: not (low_ok and v == 0))
    above = st.floats(min_value=high, allow_nan=False, exclude_min=high_ok)
    junk = st.sampled_from(["nan", "-nan", "inf", "-inf", "", "1,5", "0x10", "one"])
    return st.one_of(below.map(repr), above.map(repr), junk)


bad_values = st.one_of(
    st.tuples(
        st.sampled_from(INT_FLAGS),
        st.one_of(
            st.integers(max_value=0).map(str),
            st.integers(min_value=2**31).map(str),
            st.floats(allow_nan=True).map(repr),
            st.sampled_from(["", "1.0", "1e2", "two", "0x10", " "]),
        ),
    ),
    st.sampled_from(sorted(FLOAT_FLAGS)).flatmap(lambda f: st.tuples(st.just(f), _bad_float(f))),
)


@settings(max_examples=150, deadline=None)
@given(bad=bad_values)
def test_property_every_bad_number_is_one_usage_line(bad):
    sys.path.insert(0, EXAMPLES)
    import train_gpt

    flag, value = bad
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        train_gpt.main([f"{flag}={value}", "--out-dir", "/nonexistent-never-written"])
    assert exit_.value.code == 2
    out, err = out.getvalue(), err.getvalue()
    assert out == "" and len(err.splitlines()) == 1, err
    assert f": error: argument {flag}: must be " in err, err
