"""The command a learner types: `python examples/exercises/check.py NAME` (and --all, --list,
--solutions, --dir, --graph, --color), its output and its exit status."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from examples.exercises import check
from examples.exercises.checker import catalogue

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "exercises" / "check.py"
N = len(catalogue.EXERCISES)


def run(capsys, *argv):
    """main() in this process: (exit status, stdout)."""
    try:
        status = check.main(list(argv))
    except SystemExit as e:  # argparse errors and --help
        status = e.code
    return status, capsys.readouterr()


def test_script_runs_from_any_directory_and_exits_0_when_all_solutions_pass(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--all", "--solutions"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{N} of {N} exercises pass" in done.stdout
    assert "\033[" not in done.stdout  # not a terminal: no colors


def test_module_form_exits_1_on_an_untouched_exercise():
    done = subprocess.run(
        [sys.executable, "-m", "examples.exercises.check", "layernorm"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "not implemented yet" in done.stdout and "11_layernorm.md" in done.stdout


def test_help_explains_the_command(capsys):
    status, out = run(capsys, "--help")
    assert status == 0
    for words in (
        "central",
        "differences",
        "--all",
        "--solutions",
        "--dir",
        "--graph",
        "exit status",
    ):
        assert words in out.out
    assert "layernorm" in out.out  # the list of exercises


def test_list(capsys):
    status, out = run(capsys, "--list")
    assert status == 0
    lines = [line for line in out.out.splitlines() if line.strip()[:2].strip().isdigit()]
    assert len(lines) == N == 14 and "relu" in lines[0] and "second_order" in lines[-1]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["nope"], "no exercise called 'nope'"),
        ([], "name one exercise"),
        (["relu", "--all"], "name one exercise"),
        (["--all", "--graph", "g.svg"], "--graph draws one exercise"),
        (["relu", "--dir", "/no/such/folder"], "no such folder"),
    ],
)
def test_usage_errors_exit_2(capsys, argv, message):
    status, out = run(capsys, *argv)
    assert status == 2 and message in out.err


@pytest.mark.parametrize("name", ["relu", "1", "01_relu", "01_relu.py"])
def test_an_exercise_by_name_number_or_file(capsys, name):
    status, out = run(capsys, name, "--solutions")
    assert status == 0 and "PASS  01_relu" in out.out


def test_a_failing_exercise_in_a_folder_of_submissions(capsys, tmp_path):
    solution = (ROOT / "examples" / "solutions" / "02_sigmoid.py").read_text()
    wrong = solution.replace("g * self.z * (1 - self.z)", "g * self.z * (self.z - 1)")
    assert wrong != solution
    (tmp_path / "02_sigmoid.py").write_text(wrong)
    status, out = run(capsys, "sigmoid", "--dir", str(tmp_path))
    assert status == 1
    assert "sign flipped" in out.out and "worst at index" in out.out and "numerical" in out.out
    assert f"--dir {tmp_path}" in out.out  # the command to run again


def test_all_reports_each_exercise_and_a_summary(capsys):
    status, out = run(capsys, "--all")
    assert status == 1
    assert sum(line.endswith("not implemented yet") for line in out.out.splitlines()) == N
    assert f"0 of {N} exercises pass ({N} not implemented yet)" in out.out


def test_colors_only_when_asked_or_on_a_terminal(capsys):
    _, plain = run(capsys, "relu", "--solutions")
    _, colored = run(capsys, "relu", "--solutions", "--color", "always")
    assert "\033[" not in plain.out and "\033[32m" in colored.out


def test_graph_with_the_learners_gradients(capsys, tmp_path):
    pytest.importorskip("graphviz", reason="the graph needs the graphviz Python package")
    target = tmp_path / "relu.svg"
    status, out = run(capsys, "relu", "--solutions", "--graph", str(target))
    assert status == 0
    dot = target.with_suffix(".dot")
    if "cannot import" in out.out:  # tinytensor/viz.py is missing: a clear message instead
        assert "graph drawing needs tinytensor.viz" in out.out
        return
    assert dot.is_file() and "grad" in dot.read_text() and "ReLU" in dot.read_text()
    assert "graph written to" in out.out


def test_graph_of_an_unwritten_backward_says_so(capsys, tmp_path):
    pytest.importorskip("graphviz", reason="the graph needs the graphviz Python package")
    status, out = run(capsys, "relu", "--graph", str(tmp_path / "g.dot"))
    assert status == 1
    assert "not implemented yet, so no gradients are shown" in out.out or "cannot import" in out.out
