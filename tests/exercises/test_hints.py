"""Each hint fires on a deliberately broken solution of its kind, and the report leads to the fix
without printing the answer.

Every broken variant is a subclass of the reference solution with one mistake in backward, the
kind a learner makes."""

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import tinytensor as tt
from examples.exercises.checker import catalogue, grading, report

SOLUTIONS = Path(__file__).resolve().parents[2] / "examples" / "solutions"
PLAIN = report.Style(color=False)


def solution(name):
    return grading.load_module(SOLUTIONS / f"{catalogue.find(name).stem}.py")


def grade(name, **classes):
    """The checker's report on a module holding `classes` (the broken Functions)."""
    return grading.grade(catalogue.find(name), module=SimpleNamespace(**classes))


def text(result):
    return report.format_report(result, PLAIN)


def kinds(result):
    found = set()
    for part in result.parts:
        found |= part.kinds
    return found


def test_missing_reduction_of_a_broadcast():
    class NoReduction(solution("broadcast_add").BroadcastAdd):
        def backward(self, g):
            return g, g

    result = grade("broadcast_add", BroadcastAdd=NoReduction)
    assert not result.ok and {"shape", "reduce"} <= kinds(result)
    out = text(result)
    assert "forgot to reduce a broadcast" in out
    assert "After that sum your values would be right" in out
    assert "dim 0, which broadcasting added" in out  # (3, 4) + (4,): y's leading dim


def test_broadcasts_flag_is_refused_in_the_reduction_exercise():
    class EngineReduces(solution("broadcast_add").BroadcastAdd):
        broadcasts = True

    result = grade("broadcast_add", BroadcastAdd=EngineReduces)
    assert not result.ok and "broadcasts" in kinds(result)
    assert "broadcasts = True" in text(result)


def test_missing_one_over_n_in_a_mean():
    sol = solution("sum_mean")

    class NoOneOverN(sol.MeanDim):
        def backward(self, g):
            g = g if self.keepdim else np.expand_dims(g, self.dim)
            return np.broadcast_to(g, self.shape)

    result = grade("sum_mean", SumDim=sol.SumDim, MeanDim=NoOneOverN)
    assert not result.ok
    sum_part, mean_part = result.parts
    assert sum_part.ok and not mean_part.ok
    assert {"factor", "named"} <= mean_part.kinds
    out = text(result)
    assert re.search(r"yours is 4 × the right gradient\. 4 = N", out)  # x (3, 4), dim=1
    assert "forget a 1/N" in out


def test_missing_one_over_n_in_cross_entropy_names_the_batch_size():
    class NoMean(solution("softmax_cross_entropy").SoftmaxCrossEntropy):
        def backward(self, g):
            grad = self.p.copy()
            grad[np.arange(len(grad)), self.target] -= 1
            return grad * g

    result = grade("softmax_cross_entropy", SoftmaxCrossEntropy=NoMean)
    assert {"factor", "named"} <= kinds(result)
    assert "3 = N" in text(result)  # the first case has N = 3 rows


def test_missing_scale_in_attention_is_reported_as_a_factor_sqrt_d():
    class NoScale(solution("attention").CausalAttention):
        def backward(self, g):
            dq, dk, dv = super().backward(g)
            return dq / self.scale, dk, dv

    result = grade("attention", CausalAttention=NoScale)
    verdicts = {v.name: v for v in result.parts[0].inputs}
    assert not verdicts["q"].ok and verdicts["k"].ok and verdicts["v"].ok
    assert "= √d" in text(result) and "1/√d" in text(result)


def test_transposed_matmul_gradient():
    class Transposed(solution("matmul").MatMul):
        def backward(self, g):
            return g @ self.y.T, g.T @ self.x  # gy is (n, k): the transpose of (k, n)

    result = grade("matmul", MatMul=Transposed)
    x, y = result.parts[0].inputs
    assert x.ok and not y.ok
    assert "transposed" in y.kinds
    assert all("transposed" in f.kinds for _, f in y.failed)  # square: values; others: shape
    assert "transpose of the right one" in text(result)


def test_sign_flip():
    class Flipped(solution("sigmoid").Sigmoid):
        def backward(self, g):
            return g * self.z * (self.z - 1)

    result = grade("sigmoid", Sigmoid=Flipped)
    assert "sign" in kinds(result)
    assert "sign flipped" in text(result)


def test_nan_is_reported_with_its_first_index():
    class NaNs(solution("relu").ReLU):
        def backward(self, g):
            return g * (self.x > 0) + 0 * np.sqrt(self.x)  # sqrt of the negatives: NaN

    result = grade("relu", ReLU=NaNs)
    assert "nonfinite" in kinds(result)
    out = text(result)
    first = int(np.argmax(result.parts[0].inputs[0].failed[0][1].problem != ""))
    assert "NaN" in out and "the first at index" in out and first == 0


def test_square_only_bug():
    sol = solution("layernorm")

    class SquareOnly(sol.LayerNorm):
        def backward(self, g):
            xhat, d = self.xhat, g.shape[0]  # the bug: the row length is g.shape[-1]
            rows = tuple(range(g.ndim - 1))
            gh = g * self.weight
            mean_gh = gh.sum(axis=-1, keepdims=True) / d
            mean_ghx = (gh * xhat).sum(axis=-1, keepdims=True) / d
            return self.r * (gh - mean_gh - xhat * mean_ghx), (g * xhat).sum(rows), g.sum(rows)

    result = grade("layernorm", LayerNorm=SquareOnly)
    assert not result.ok and "square-only" in kinds(result)
    assert "right on the square shapes, wrong on the others" in text(result)


def test_a_setting_that_separates_passing_and_failing_cases():
    class LastAxisOnly(solution("softmax").Softmax):
        def backward(self, g):
            p = self.p
            return p * (g - (g * p).sum(axis=-1, keepdims=True))

    result = grade("softmax", Softmax=LastAxisOnly)
    assert "setting" in kinds(result) and "square-only" not in kinds(result)
    assert "right with dim=-1, wrong with dim=0 or dim=1" in text(result)


def test_none_for_an_input_that_needs_a_gradient():
    class ForgotY(solution("matmul").MatMul):
        def backward(self, g):
            return g @ self.y.T, None

    result = grade("matmul", MatMul=ForgotY)
    assert "none" in kinds(result)
    assert "returned None for it, but it needs a gradient" in text(result)


def test_wrong_dtype_is_caught_by_the_float32_run():
    class Float64Table(solution("embedding").Embedding):
        def backward(self, g):
            gw = np.zeros(self.weight_shape)  # float64 whatever g is
            np.add.at(gw, self.ids.reshape(-1), g.reshape(-1, self.weight_shape[1]))
            return gw

    result = grade("embedding", Embedding=Float64Table)
    (verdict,) = result.parts[0].inputs
    assert not verdict.ok and verdict.kinds == {"dtype"}
    assert len(verdict.failed) == 1 and "float32" in verdict.failed[0][0]
    assert "your gradient is float64, the input is float32" in text(result)


def test_repeated_ids_written_once():
    class Overwrites(solution("embedding").Embedding):
        def backward(self, g):
            gw = np.zeros(self.weight_shape, dtype=g.dtype)
            gw[self.ids] += g
            return gw

    result = grade("embedding", Embedding=Overwrites)
    assert "mistake:embedding-written-once" in kinds(result) and "np.add.at" in text(result)


def test_missing_mean_term_is_an_error_constant_along_the_row():
    class NoMeanTerm(solution("layernorm").LayerNorm):
        def backward(self, g):
            gx, gw, gb = super().backward(g)
            gh = g * self.weight
            return gx + self.r * gh.mean(axis=-1, keepdims=True), gw, gb

    result = grade("layernorm", LayerNorm=NoMeanTerm)
    assert "offset" in kinds(result)
    assert "the same for every element along dim" in text(result)


def test_gradient_of_the_output_shape_needs_expanding():
    sol = solution("sum_mean")

    class NotExpanded(sol.SumDim):
        def backward(self, g):
            return g

    result = grade("sum_mean", SumDim=NotExpanded, MeanDim=sol.MeanDim)
    assert "expand" in result.parts[0].kinds
    assert "has the output's shape" in text(result)


def test_all_zeros():
    class Zeros(solution("gelu").GELU):
        def backward(self, g):
            return np.zeros_like(g)

    assert "zeros" in kinds(grade("gelu", GELU=Zeros))


def test_wrong_number_of_gradients_and_tensor_returned():
    class TwoOfThree(solution("batchnorm").BatchNorm):
        def backward(self, g):
            return super().backward(g)[:2]

    result = grade("batchnorm", BatchNorm=TwoOfThree)
    assert "count" in kinds(result)
    assert "returned 2 gradients but the op has 3 inputs (x, weight, bias)" in text(result)

    class ReturnsTensor(solution("relu").ReLU):
        def backward(self, g):
            return tt.tensor(g * (self.x > 0))

    assert "type" in kinds(grade("relu", ReLU=ReturnsTensor))


def test_an_exception_in_backward_points_at_the_line():
    class Crashes(solution("matmul").MatMul):
        def backward(self, g):
            return g @ self.y, self.x.T @ g  # forgot a transpose: a shape error unless square

    result = grade("matmul", MatMul=Crashes)
    part = result.parts[0]
    assert "backward" in part.kinds
    out = text(result)
    assert "backward raised an error on 4 of 5 shapes" in out  # float32 run included
    assert "ValueError: matmul" in out
    assert "return g @ self.y, self.x.T @ g" in out  # the learner's line


def test_a_changed_forward_is_noticed():
    class Changed(solution("relu").ReLU):
        def forward(self, x):
            self.x = x
            return np.maximum(x, 0) * 2

    result = grade("relu", ReLU=Changed)
    assert "forward_changed" in kinds(result)
    assert "put forward back" in text(result)


def test_missing_class_and_unloadable_file(tmp_path):
    result = grade("relu")
    assert result.parts[0].status == "missing" and "no class ReLU" in text(result)
    broken = tmp_path / "01_relu.py"
    broken.write_text("def oops(:\n")
    result = grading.grade(catalogue.find("relu"), broken)
    assert result.status == "error" and "SyntaxError" in result.load_error


@pytest.mark.parametrize("name", ["sigmoid", "layernorm", "second_order"])
def test_the_report_never_prints_the_expected_gradient(name):
    """A wrong gradient's report shows at most the worst element's numerical value."""
    sol = solution(name)
    cls = getattr(sol, catalogue.find(name).parts[0].function)

    class Halved(cls):
        def backward(self, g):
            out = super().backward(g)
            return tuple(a / 2 for a in out) if isinstance(out, tuple) else out / 2

    result = grade(name, **{cls.__name__: Halved})
    out = text(result)
    case = catalogue.find(name).parts[0].cases(np.random.default_rng(grading.SEED))[0]
    leaves = [tt.tensor(a.copy(), requires_grad=True) for a in case.arrays.values()]
    reference = catalogue.find(name).parts[0].reference(leaves, case.params)
    reference.backward(tt.ones_like(reference))
    numbers = set(re.findall(r"-?\d+\.\d+", out))
    for t in leaves:
        shown = [v for v in t.grad._array.reshape(-1) if f"{v:.6g}" in numbers]
        assert len(shown) <= 1, f"{len(shown)} elements of the right gradient appear in the report"


def test_forgetting_g_is_caught_because_a_vjp_is_linear_in_g():
    class NoG(solution("sigmoid").Sigmoid):
        def backward(self, g):
            return self.z * (1 - self.z)

    result = grade("sigmoid", Sigmoid=NoG)
    assert "linear" in kinds(result) and "not linear in g" in text(result)


def test_a_backward_that_edits_its_saved_arrays_is_not_called_nonlinear():
    class InPlace(solution("softmax_cross_entropy").SoftmaxCrossEntropy):
        def backward(self, g):
            grad = self.p  # no copy: changes the saved p, harmless when called once
            grad[np.arange(len(grad)), self.target] -= 1
            return grad * g  # and forgets the 1/N

    result = grade("softmax_cross_entropy", SoftmaxCrossEntropy=InPlace)
    assert "factor" in kinds(result) and "linear" not in kinds(result)


def test_a_strange_return_value_is_reported_not_a_crash():
    class ObjectArray(solution("relu").ReLU):
        def backward(self, g):
            return np.array([object()] * g.size, dtype=object).reshape(g.shape)

    result = grade("relu", ReLU=ObjectArray)
    assert not result.ok  # and the checker itself did not raise
    assert "ReLU.backward" in text(result)
