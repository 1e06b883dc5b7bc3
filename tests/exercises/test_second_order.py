"""Exercise 14 (second order): the reference VJPs of tanh's and softmax's backward agree with
torch's double backward, the .md's plug-in makes a tanh that passes gradgradcheck, and the
checker's feedback on the ways a double backward goes wrong."""

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import tinytensor as tt
from examples.exercises.checker import catalogue, grading, report
from tests.exercises.learner_mistakes import WRONG

ROOT = Path(__file__).resolve().parents[2]
EX = catalogue.find("second_order")
PLAIN = report.Style(color=False)


def _solution():
    return grading.load_module(ROOT / "examples" / "solutions" / f"{EX.stem}.py")


def _wrong(name):
    (w,) = [w for w in WRONG if w.name == name]
    return w


def _kinds(result):
    return set().union(*(p.kinds for p in result.parts))


def test_the_exercise_is_14_and_checks_both_parts():
    assert EX.number == 14 and EX.stem == "14_second_order"
    assert [p.function for p in EX.parts] == ["TanhBackward", "SoftmaxBackward"]
    assert catalogue.find("14") is EX and catalogue.find("14_second_order.py") is EX


@pytest.mark.parametrize("part", EX.parts, ids=lambda p: p.function)
def test_the_solution_matches_torchs_double_backward(torch, part):
    cls = getattr(_solution(), part.function)
    rng = np.random.default_rng(3)
    for case in part.cases(np.random.default_rng(grading.SEED)):
        x, gy = (torch.tensor(a, requires_grad=True) for a in case.arrays.values())
        if part.function == "TanhBackward":
            y = torch.tanh(x)
        else:
            y = torch.softmax(x, case.params["dim"])
        (gx,) = torch.autograd.grad(y, x, gy, create_graph=True)
        r = rng.standard_normal(gx.shape)
        gx.backward(torch.tensor(r))
        leaves = [tt.tensor(a, requires_grad=True) for a in case.arrays.values()]
        out = cls.apply(*leaves, **case.params)
        np.testing.assert_allclose(out.numpy(), gx.detach().numpy(), rtol=1e-12, atol=1e-14)
        mine = out._ctx.backward(r)
        np.testing.assert_allclose(mine[0], x.grad.numpy(), rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(mine[1], gy.grad.numpy(), rtol=1e-10, atol=1e-13)


def _plugged_in_tanh(tanh_backward):
    """The `Tanh` of the .md's "plug it in" section, with `tanh_backward` as its double
    backward, and the x it runs gradgradcheck on."""
    page = (ROOT / "examples" / "exercises" / f"{EX.stem}.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, re.S)
    setup, check = code.split("\nx = ", 1)
    scope = {"np": np, "tt": tt, "TanhBackward": tanh_backward}
    exec(setup, scope)
    assert "tt.autograd.gradgradcheck(lambda x: Tanh.apply(x), (x,))" in check
    return scope["Tanh"]


def test_the_pages_plug_in_passes_gradgradcheck_with_the_solution():
    tanh = _plugged_in_tanh(_solution().TanhBackward)
    x = tt.randn(3, 4, dtype=tt.float64, requires_grad=True)
    assert tt.autograd.gradgradcheck(lambda x: tanh.apply(x), (x,))
    # the first derivative is still the plain array backward, and equals the engine's tanh
    (ours,) = tt.autograd.grad(tanh.apply(x).sum(), [x])
    (engine,) = tt.autograd.grad(tt.tanh(x).sum(), [x])
    np.testing.assert_allclose(ours.numpy(), engine.numpy(), rtol=1e-12)


def test_the_pages_plug_in_fails_gradgradcheck_with_a_wrong_double_backward():
    wrong = _wrong("tanh2_dx_without_the_2")
    stub = grading.load_module(ROOT / "examples" / "exercises" / f"{EX.stem}.py").TanhBackward
    tanh = _plugged_in_tanh(type("TanhBackward", (stub,), {"backward": wrong.backward}))
    x = tt.randn(3, 4, dtype=tt.float64, requires_grad=True)
    assert not tt.autograd.gradgradcheck(lambda x: tanh.apply(x), (x,), raise_exception=False)


def test_a_hessian_vector_product_through_the_plug_in():
    tanh = _plugged_in_tanh(_solution().TanhBackward)
    x = tt.randn(6, dtype=tt.float64, requires_grad=True)
    v = np.random.default_rng(0).standard_normal(6)
    (gx,) = tt.autograd.grad(tanh.apply(x).sum(), [x], create_graph=True)
    (hv,) = tt.autograd.grad((gx * tt.tensor(v)).sum(), [x])
    y = np.tanh(x.numpy())
    np.testing.assert_allclose(hv.numpy(), -2 * y * (1 - y * y) * v, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "name, says",
    [
        ("tanh2_dx_plus_two_y", "wrong sign"),
        ("tanh2_dx_without_the_2", "the power rule's 2"),
        ("tanh2_dx_derivative_in_y_only", "needs a second factor, dy/dx"),
        ("tanh2_gy_is_a_constant", "gy is an input of this op like x"),
        ("tanh2_dgy_with_y", "is not y"),
        ("softmax2_s_held_constant", "you held s = Σ gy∘p fixed"),
        ("softmax2_returns_dp", "that is ∂M/∂p"),
        (
            "softmax2_s_term_added",
            "the path through s = Σ gy∘p (part 2, step 3) has the wrong sign",
        ),
    ],
)
def test_the_report_names_the_cause_and_points_at_the_step(name, says):
    text = report.format_report(_wrong(name).grade(), PLAIN)
    assert "likely cause: " in text
    text = " ".join(text.split())
    assert says in text, text
    assert "14_second_order.md" in text or "part 2, step" in text


def test_a_factor_two_is_named_twice_over():
    """The catalogue's cause, and the generic hint of the factor itself."""
    result = _wrong("tanh2_dx_without_the_2").grade()
    assert {"factor", "mistake:tanh2-dx-missing-2"} <= _kinds(result)
    assert "yours is 0.5 × the right gradient" in report.format_report(result, PLAIN)


@pytest.mark.parametrize(
    "name", ["tanh2_gy_is_a_constant", "tanh2_gy_gets_zeros", "tanh2_only_the_x_gradient"]
)
def test_leaving_gy_out_is_named_however_it_is_done(name):
    """None for gy, zeros for gy, or one gradient instead of two: the same cause."""
    result = _wrong(name).grade()
    assert "mistake:tanh2-no-gy-path" in _kinds(result)
    text = " ".join(report.format_report(result, PLAIN).split())
    assert "gy is an input of this op like x, not a constant" in text


def test_a_none_elsewhere_is_not_given_the_exercises_reason():
    class NoneForY(grading.load_module(ROOT / "examples" / "solutions" / "05_matmul.py").MatMul):
        def backward(self, g):
            return g @ self.y.T, None

    ex = catalogue.find("matmul")
    sol = grading.load_module(ROOT / "examples" / "solutions" / "05_matmul.py")
    result = grading.grade(
        ex, module=SimpleNamespace(MatMul=NoneForY, BatchedMatMul=sol.BatchedMatMul)
    )
    assert "none" in _kinds(result) and not any(k.startswith("mistake") for k in _kinds(result))


def test_swapped_gradients_are_named_as_swapped_alone():
    """x's gradient is then the first-order VJP too: the swap, seen from both inputs, wins."""
    result = _wrong("tanh2_gradients_swapped").grade()
    (verdict_x, verdict_gy) = result.parts[0].inputs
    assert [k for k, _ in verdict_x.mistakes] == ["swapped"]
    assert [k for k, _ in verdict_gy.mistakes] == ["swapped"]


def test_a_sum_without_keepdims_is_named_where_it_raises_and_where_it_does_not():
    result = _wrong("softmax2_sums_without_keepdims").grade()
    assert "mistake:softmax2-no-keepdims" in _kinds(result)
    text = " ".join(report.format_report(result, PLAIN).split())
    assert "(3,) is x (3, 5) with dim -1 summed away" in text  # the error
    assert "without keepdims=True, so NumPy broadcast it along the wrong dim" in text  # (4, 4)


def test_the_checker_compares_with_central_differences_of_the_first_derivative():
    """The numerical value shown is a second derivative: a difference of the forward (a first
    derivative), which is what gradgradcheck compares with."""
    result = _wrong("tanh2_dx_without_the_2").grade()
    ((label, finding),) = result.parts[0].inputs[0].failed[:1]
    yours, numerical = (
        float(v) for v in re.findall(r"yours (\S+), numerical (\S+)", finding.detail)[0]
    )
    assert numerical == pytest.approx(2 * yours, rel=1e-5)


def _grade_with(function, backward):
    stubs = grading.load_module(ROOT / "examples" / "exercises" / f"{EX.stem}.py")
    sol = _solution()
    classes = {p.function: getattr(sol, p.function) for p in EX.parts}
    classes[function] = type(function, (getattr(stubs, function),), {"backward": backward})
    return grading.grade(EX, module=SimpleNamespace(**classes))


def test_other_right_forms_pass():
    """The checker compares values, not formulas: a right answer written otherwise passes."""

    def tanh_through_cosh(self, g):
        sech2 = 1 / np.cosh(np.arctanh(self.y)) ** 2
        return -2 * g * self.gy * self.y * sech2, g * sech2

    def softmax_expanded(self, g):
        p, d, gy = self.p, self.dim, self.gy
        gp = g * gy - g * self.s - gy * (g * p).sum(axis=d, keepdims=True)
        gx = p * gp - p * (p * gp).sum(axis=d, keepdims=True)
        return gx, p * g - p * (p * g).sum(axis=d, keepdims=True)

    assert _grade_with("TanhBackward", tanh_through_cosh).ok
    assert _grade_with("SoftmaxBackward", softmax_expanded).ok
