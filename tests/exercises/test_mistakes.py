"""The checker names the cause of the mistakes learners really make (learner_mistakes.py), lets
none of them pass, catches edits of g in place, and shows a non-square case where a square one
hides the cause."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from examples.exercises.checker import catalogue, grading, mistakes, report
from tests.exercises.learner_mistakes import WRONG, measure

ROOT = Path(__file__).resolve().parents[2]
PLAIN = report.Style(color=False)


def _kinds(result):
    return set().union(*(p.kinds for p in result.parts))


@pytest.mark.parametrize("wrong", WRONG, ids=[w.name for w in WRONG])
def test_each_realistic_mistake_fails_and_its_cause_is_named(wrong):
    result = wrong.grade()
    assert not result.ok, f"{wrong.name} passed the checker"
    text = report.format_report(result, PLAIN)
    if wrong.cause is None:
        return  # a mistake no hint names yet: counted as unnamed in the measurement
    assert wrong.cause in _kinds(result), f"{wrong.name}: no hint naming {wrong.cause}\n{text}"
    assert "likely cause: " in text or "hint: " in text or wrong.cause == "inplace"


def test_the_collection_covers_every_exercise_and_meets_the_target():
    table = measure()
    assert set(table) == {ex.name for ex in catalogue.EXERCISES}
    written, caught, named, passed = (sum(col) for col in zip(*table.values()))
    assert written >= 40 and passed == 0 and caught == written
    assert named / written >= 0.85


def test_every_catalogued_mistake_differs_from_the_right_gradient_somewhere():
    """A mistake whose gradient equals the right one on every case could never be named."""
    for ex in catalogue.EXERCISES:
        for part in ex.parts:
            cases = part.cases(np.random.default_rng(grading.SEED))
            visible = set()
            for case in cases:
                r = np.random.default_rng(1).standard_normal(_output_shape(part, case))
                right = _right(part, case, r)
                for m in mistakes.BY_FUNCTION[part.function]:
                    try:
                        wrong = m.grads(case.arrays, case.params, r, right)
                    except Exception:
                        continue
                    if any(
                        np.shape(w) != right[n].shape or not np.allclose(w, right[n])
                        for n, w in wrong.items()
                    ):
                        visible.add(m.key)
            keys = {m.key for m in mistakes.BY_FUNCTION[part.function]}
            assert keys <= visible, f"{part.function}: never visible: {keys - visible}"


def _output_shape(part, case):
    import tinytensor as tt

    return part.reference([tt.tensor(a) for a in case.arrays.values()], case.params).shape


def _right(part, case, r):
    import tinytensor as tt

    leaves = [tt.tensor(a.copy(), requires_grad=True) for a in case.arrays.values()]
    part.reference(leaves, case.params).backward(tt.tensor(r))
    return {n: t.grad.numpy() for n, t in zip(case.arrays, leaves)}


def _relu(backward):
    stub = grading.load_module(ROOT / "examples" / "exercises" / "01_relu.py").ReLU
    cls = type("ReLU", (stub,), {"backward": backward})
    return grading.grade(catalogue.find("relu"), module=SimpleNamespace(ReLU=cls))


def test_zeroing_g_in_place_is_caught_and_explained():
    def backward(self, g):
        g[self.x <= 0] = 0
        return g

    result = _relu(backward)
    text = report.format_report(result, PLAIN)
    assert not result.ok and "inplace" in _kinds(result)
    assert "backward wrote into g" in text and "g[self.x <= 0] = 0" in text
    assert "corrupts" in text  # says why it matters


def test_an_edit_of_g_that_switches_read_only_off_is_caught_afterwards():
    def backward(self, g):
        g.flags.writeable = True  # g is a copy that owns its memory: this is allowed
        g *= self.x > 0
        return g

    result = _relu(backward)
    assert not result.ok and "inplace" in _kinds(result)


def test_a_right_backward_that_copies_g_first_passes():
    def backward(self, g):
        out = g.copy()
        out[self.x <= 0] = 0
        return out

    assert _relu(backward).ok


def test_a_square_case_failing_on_values_shows_the_non_square_case():
    (wrong,) = [w for w in WRONG if w.name == "matmul_gx_without_transpose"]
    text = report.format_report(wrong.grade(), PLAIN)
    assert "first on x (3, 3), y (3, 3)" in text
    assert "the non-square x (2, 4), y (4, 3) tells more" in text


def test_a_mistake_and_a_named_factor_together_are_both_named():
    (wrong,) = [w for w in WRONG if w.name == "ce_every_row_every_target"]
    text = report.format_report(wrong.grade(), PLAIN)
    assert "p[:, target]" in text and "3 = N" in text


def test_coinciding_mistakes_are_told_apart_by_the_other_cases():
    """x.shape[-1] and len(g) are the same number for x (3, 4), dim=0; other cases differ."""
    (wrong,) = [w for w in WRONG if w.name == "mean_divides_by_last_dim"]
    result = wrong.grade()
    (verdict,) = result.parts[1].inputs
    assert [key for key, _ in verdict.mistakes] == ["mean-N-from-last-dim"]


def test_batched_matmul_is_an_exercise_part_with_its_own_cases():
    ex = catalogue.find("matmul")
    assert [p.function for p in ex.parts] == ["MatMul", "BatchedMatMul"]
    cases = ex.parts[1].cases(np.random.default_rng(0))
    shapes = [(c.arrays["x"].shape, c.arrays["y"].shape) for c in cases]
    assert any(len(x) != len(y) for x, y in shapes)  # one input shared across the batch
    assert any(c.square for c in cases) and any(not c.square for c in cases)


def test_rerun_command_works_from_the_directory_it_was_run_in():
    folder = ROOT / "examples" / "exercises"
    done = subprocess.run(
        [sys.executable, "check.py", "relu"], cwd=folder, capture_output=True, text=True
    )
    assert "then run: python check.py relu" in done.stdout
    assert "read 01_relu.md, write backward in 01_relu.py" in done.stdout
    command = done.stdout.rsplit("then run: ", 1)[1].split()
    again = subprocess.run(
        [sys.executable, *command[1:]], cwd=folder, capture_output=True, text=True
    )
    assert again.returncode == 1 and "not implemented yet" in again.stdout


ANSWERS = [  # the final VJPs, as the solutions write them: none may appear in the exercises
    "p ∘ (g - Σ",
    "g·yᵀ",
    "xᵀ·g",
    "p - y",
    "pᵢ - onehot",
    "r·(ĝ - mean(ĝ)",
    "mean(ĝ∘x̂))",
    "Φ(x) + x·Φ'(x)",
    "∂L/∂W[v] = Σ",
    "∂L/∂y = g summed",
    "-2y",  # 14: d(1 - y²)/dx
    "−2y",
    "g·(1 - y²)",  # 14: ∂L/∂gy
    "(Σ g∘p)·gy",  # 14: softmax's term through s
]


@pytest.mark.parametrize("page", ["README.md", *[f"{ex.stem}.md" for ex in catalogue.EXERCISES]])
def test_the_exercise_pages_give_no_answer(page):
    text = (ROOT / "examples" / "exercises" / page).read_text()
    for answer in ANSWERS:
        assert answer not in text, f"{page} gives away {answer!r}"


def test_softmax_page_counts_its_products_right():
    text = (ROOT / "examples" / "exercises" / "08_softmax.md").read_text()
    assert "one elementwise product" not in text and "two elementwise products" in text


def test_all_says_which_parts_of_a_partly_done_exercise_are_right(tmp_path, capsys):
    from examples.exercises import check

    stub = (ROOT / "examples" / "exercises" / "05_matmul.py").read_text()
    start = stub.index('        raise NotImplementedError(\n            "MatMul.backward')
    end = stub.index("        )\n", start) + len("        )\n")
    done = stub[:start] + "        return g @ self.y.T, self.x.T @ g\n" + stub[end:]
    (tmp_path / "05_matmul.py").write_text(done)
    assert check.main(["--all", "--dir", str(tmp_path)]) == 1
    line = next(x for x in capsys.readouterr().out.splitlines() if "05 matmul" in x)
    assert "MatMul: right; the rest not implemented yet" in line
