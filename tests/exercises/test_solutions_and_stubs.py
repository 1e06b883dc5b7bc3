"""Every reference solution passes the checker; every untouched exercise fails it, as "not
implemented yet", with the learner's message; exercise and solution share the same forward."""

import inspect
from pathlib import Path

import numpy as np
import pytest

from examples.exercises.checker import catalogue, grading

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = ROOT / "examples" / "exercises"
SOLUTIONS = ROOT / "examples" / "solutions"
NAMES = [ex.name for ex in catalogue.EXERCISES]


def _failures(report):
    """Everything that went wrong, readable in a pytest failure message."""
    lines = [report.load_error] if report.load_error else []
    for part in report.parts:
        lines += [part.message] if part.message else []
        lines += [f"{label}: {e.kind}: {e.message}" for label, e in part.errors]
        for v in part.inputs:
            lines += [f"{v.name} on {label}: {f.problem} {f.detail}" for label, f in v.failed]
    return "\n".join(lines)


@pytest.mark.parametrize("name", NAMES)
def test_solution_passes(name):
    ex = catalogue.find(name)
    report = grading.grade(ex, SOLUTIONS / f"{ex.stem}.py")
    assert report.ok, _failures(report)
    for part in report.parts:
        assert part.total >= 4, "each Function is checked on at least 3 shapes plus float32"


@pytest.mark.parametrize("name", NAMES)
def test_untouched_exercise_is_not_implemented(name):
    ex = catalogue.find(name)
    report = grading.grade(ex, EXERCISES / f"{ex.stem}.py")
    assert report.status == "todo" and not report.ok
    for part in report.parts:
        assert part.status == "todo"
        assert part.part.function in part.message and f"{ex.stem}.md" in part.message


@pytest.mark.parametrize("name", NAMES)
def test_exercise_and_solution_share_the_forward(name):
    ex = catalogue.find(name)
    exercise = grading.load_module(EXERCISES / f"{ex.stem}.py")
    solution = grading.load_module(SOLUTIONS / f"{ex.stem}.py")
    for part in ex.parts:
        mine = inspect.getsource(getattr(exercise, part.function).forward)
        theirs = inspect.getsource(getattr(solution, part.function).forward)
        assert mine == theirs, f"{ex.stem}: {part.function}.forward differs between the two files"


@pytest.mark.parametrize("ex", catalogue.EXERCISES, ids=NAMES)
def test_cases_mix_square_and_non_square_shapes(ex):
    """The square-only hint needs both kinds, and both must be there for every exercise."""
    for part in ex.parts:
        cases = part.cases(np.random.default_rng(0))
        assert any(c.square for c in cases) and any(not c.square for c in cases), part.function
        assert all(a.dtype == np.float64 for c in cases for a in c.arrays.values())


def test_exercises_are_numbered_in_order_and_have_their_files():
    assert [ex.number for ex in catalogue.EXERCISES] == list(range(1, len(NAMES) + 1))
    for ex in catalogue.EXERCISES:
        for folder, suffix in ((EXERCISES, ".py"), (EXERCISES, ".md"), (SOLUTIONS, ".py")):
            assert (folder / f"{ex.stem}{suffix}").is_file(), f"{ex.stem}{suffix} in {folder}"


def test_learner_functions_stay_out_of_the_engine_registry():
    from tinytensor.function import REGISTRY

    ex = catalogue.find("relu")
    module = grading.load_module(EXERCISES / f"{ex.stem}.py")
    assert module.ReLU not in REGISTRY.values()
