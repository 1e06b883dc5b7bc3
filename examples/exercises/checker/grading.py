"""Runs a learner's Function on every case of an exercise and collects the verdicts.

For each case, in float64: forward through `Function.apply` (so `needs_input_grad` is set as
the engine sets it), then the learner's `backward` called directly with a random upstream
gradient r, and each returned gradient compared with (a) the engine op's gradient of Σ out·r and
(b) central differences of Σ forward(x)·r (tinytensor.gradcheck.numerical_gradient). Calling
backward directly, rather than through `Tensor.backward`, lets the checker see exactly what was
returned: the engine would silently cast a wrong dtype and reduce a broadcast for ops that set
`broadcasts = True`. One extra float32 run checks that the gradients keep the input's dtype.

g is handed over read-only, and compared with r afterwards: an edit in place (`g[x <= 0] = 0`)
would, in the engine, corrupt the gradient of another op that holds the same array. A failing
gradient is also compared with the known wrong derivations (the `mistakes` package); those that
explain most of the failing cases are reported as the likely cause.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import tinytensor as tt
from tinytensor.gradcheck import numerical_gradient

from . import mistakes
from .catalogue import Case, Exercise, Part
from .diagnosis import Finding, diagnose, dtype_finding

SEED = 0


@dataclass
class CaseError:
    """A case that stopped before the gradients could be compared."""

    kind: str  # not_implemented, forward, backward, inplace, forward_changed, count, setup
    message: str
    location: str = ""  # "11_layernorm.py, line 42:  gx = ..."
    hint: str = ""
    cause: str = ""  # the known mistake the hint names, if any (a key, as in checker/mistakes)


@dataclass
class CaseOutcome:
    case: Case
    label: str  # the case's description (with "as float32" for the dtype run)
    values_checked: bool = True  # False for the float32 run, which checks dtypes only
    error: CaseError | None = None
    findings: list[Finding] = field(default_factory=list)  # one per input, when no error


@dataclass
class InputVerdict:
    """One input's gradient over every case."""

    name: str
    ok: bool
    failed: list[tuple[str, Finding]]  # (case label, finding) for each failing case
    total: int
    hints: list[str] = field(default_factory=list)  # hints that come from several cases
    kinds: set[str] = field(default_factory=set)
    mistakes: list[tuple[str, str]] = field(default_factory=list)  # (key, hint), all cases
    non_square: tuple[str, Finding | CaseError] | None = None  # what a non-square case shows


@dataclass
class PartReport:
    part: Part
    status: str  # pass, fail, todo (not implemented), missing (no such class)
    inputs: list[InputVerdict] = field(default_factory=list)
    errors: list[tuple[str, CaseError]] = field(default_factory=list)  # (case label, error)
    hints: list[str] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)
    total: int = 0
    message: str = ""  # for todo / missing

    @property
    def ok(self) -> bool:
        return self.status == "pass"


@dataclass
class ExerciseReport:
    exercise: Exercise
    path: Path | None
    parts: list[PartReport] = field(default_factory=list)
    load_error: str = ""
    module: object = None

    @property
    def status(self) -> str:
        if self.load_error:
            return "error"
        if all(p.ok for p in self.parts):
            return "pass"
        if any(p.status not in ("pass", "todo") for p in self.parts):
            return "fail"
        return "todo"

    @property
    def ok(self) -> bool:
        return self.status == "pass"


# ---- loading the learner's file -----------------------------------------------------------


def load_module(path: Path):
    """Imports the learner's file by path (its name starts with a digit, so not by name)."""
    name = f"_tinytensor_exercise_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _where(error: BaseException, path: Path | None) -> str:
    """The line of the learner's file where `error` was raised (else the innermost line)."""
    frames = traceback.extract_tb(error.__traceback__)
    mine = [f for f in frames if path is not None and Path(f.filename) == path]
    frame = (mine or frames or [None])[-1]
    if frame is None:
        return ""
    return f"{Path(frame.filename).name}, line {frame.lineno}:  {(frame.line or '').strip()}"


def _describe_exception(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# ---- one case -----------------------------------------------------------------------------


def _leaves(case: Case):
    return [tt.tensor(a.copy(), requires_grad=True) for a in case.arrays.values()]


def _reference(part: Part, case: Case, r):
    """The engine op's output and its gradients for upstream gradient r."""
    tensors = _leaves(case)
    out = part.reference(tensors, case.params)
    out.backward(tt.tensor(r))
    return out._array, [t.grad._array for t in tensors]


def run_case(cls, part: Part, case: Case, rng, path: Path | None, check_values=True):
    """One case: forward, the learner's backward, and a Finding per input."""
    label = case.describe()
    if not check_values:
        label += f" as {next(iter(case.arrays.values())).dtype}"
    outcome = CaseOutcome(case, label, check_values)
    tensors = _leaves(case)
    try:
        out = cls.apply(*tensors, **case.params)
    except Exception as e:  # the learner may have edited forward: say where it broke
        outcome.error = CaseError("forward", _describe_exception(e), _where(e, path))
        return outcome
    r = np.asarray(rng.standard_normal(out.shape)).astype(out.dtype)
    ref_out, ref_grads = _reference(part, case, r)
    if (
        out.shape != ref_out.shape
        or out.dtype != ref_out.dtype
        or (check_values and not np.allclose(out._array, ref_out, rtol=1e-7, atol=1e-9))
    ):
        outcome.error = CaseError(
            "forward_changed",
            f"the forward output ({out.shape} {out.dtype}) no longer matches "
            f"{part.reference_name} ({ref_out.shape} {ref_out.dtype}); the exercise is the "
            "backward: put forward back as it was",
        )
        return outcome
    if out._ctx is None:
        outcome.error = CaseError("setup", f"{cls.__name__}.apply recorded no graph node")
        return outcome
    g = _read_only(r)
    try:
        grads = out._ctx.backward(g)
    except NotImplementedError as e:
        outcome.error = CaseError("not_implemented", str(e).strip(), _where(e, path))
        return outcome
    except Exception as e:
        outcome.error = _backward_error(e, case, out.shape, path)
        specific = part.error_hint(e, case) if part.error_hint else None
        if specific and outcome.error.kind == "backward":
            outcome.error.cause, outcome.error.hint = specific
        return outcome
    if not np.array_equal(g, r):  # read-only can be switched off; the values tell
        outcome.error = CaseError("inplace", IN_PLACE)
        return outcome
    n = len(tensors)
    if not isinstance(grads, (tuple, list)):
        grads = (grads,)
    if len(grads) != n:
        names = ", ".join(case.arrays)
        outcome.error = CaseError(
            "count",
            f"backward returned {len(grads)} gradient{'s' if len(grads) != 1 else ''} but the "
            f"op has {n} input{'s' if n != 1 else ''} ({names}): return one per input, in the "
            "order forward takes them",
        )
        left_out = [
            key for name in list(case.arrays)[len(grads) :] for key in _left_out(part, name)
        ]
        if left_out:  # an input the exercise knows learners leave out
            outcome.error.cause, outcome.error.hint = left_out[0]
        return outcome
    names = list(case.arrays)
    for i, (yours, t) in enumerate(zip(grads, tensors)):
        if not check_values:  # the float32 run: only the dtype is new information
            ok = isinstance(yours, (np.ndarray, np.generic)) and yours.dtype == t.dtype
            outcome.findings.append(
                Finding(True)
                if ok or yours is None or not hasattr(yours, "dtype")
                else dtype_finding(np.asarray(yours), t.dtype)
            )
            continue
        numerical = numerical_gradient(
            lambda *xs: cls.apply(*xs, **case.params), _leaves(case), i, [r]
        )
        outcome.findings.append(
            diagnose(
                yours,
                expected=ref_grads[i],
                numerical=numerical,
                output_shape=out.shape,
                constants=case.constants,
            )
        )
    right, returned = dict(zip(names, ref_grads)), dict(zip(names, grads))
    for i, finding in enumerate(outcome.findings):
        if not finding.ok and finding.kinds & {"values", "shape"}:
            finding.mistakes = _recognise(part.function, names[i], returned, case, r, right)
        elif not finding.ok and "none" in finding.kinds:  # an input left out, knowingly?
            finding.mistakes = _left_out(part, names[i])
    wrong = [i for i, f in enumerate(outcome.findings) if not f.ok and "values" in f.kinds]
    if wrong and part.extra_hint:
        for i in (i for i in wrong if not outcome.findings[i].mistakes):
            hint = part.extra_hint(names[i], np.asarray(grads[i]), ref_grads[i], case)
            if hint:
                outcome.findings[i].hints.insert(0, hint)
                outcome.findings[i].kinds.add("hint")
    if wrong:
        for i in _not_linear(cls, case, r, grads, wrong):
            outcome.findings[i].hints.insert(0, NOT_LINEAR)
            outcome.findings[i].kinds.add("linear")
    return outcome


IN_PLACE = (
    "backward changed g in place. g is not yours to edit: the engine can hand the same array "
    "to other ops as well (when the output feeds two ops, or an Add passes one g to both its "
    "inputs), so writing into it silently corrupts their gradients. Build a new array instead "
    "(np.where(mask, g, 0), g*mask), or edit a g.copy()"
)


def _recognise(*args):
    """mistakes.recognise, which must never turn a learner's odd gradient into a crash."""
    try:
        return mistakes.recognise(*args)
    except Exception:
        return []


def _left_out(part, name):
    """[(key, hint)] when the exercise knows why a learner gives input `name` no gradient."""
    try:
        return mistakes.recognise_none(part.function, name)
    except Exception:
        return []


def _read_only(r):
    """A read-only copy of the upstream gradient: writing into it raises, where it happens."""
    g = np.array(r)  # a copy, and an array even when r is a 0-d NumPy scalar
    g.flags.writeable = False
    return g


def _backward_error(e, case, out_shape, path) -> CaseError:
    """The CaseError for an exception raised by backward, with a hint where one fits."""
    where = _where(e, path)
    if isinstance(e, ValueError) and "read-only" in str(e):
        return CaseError("inplace", IN_PLACE, where)
    error = CaseError("backward", _describe_exception(e), where)
    line = where.partition(":  ")[2]
    batched = any(a.ndim > 2 for a in case.arrays.values())
    if batched and ".T" in line.replace(".Tensor", ""):
        error.cause = "batched-dot-T"
        error.hint = (
            "`.T` reverses *every* axis of an array with more than 2 dims, batch dims included; "
            "to transpose the matrices of a batch, swap the last two: a.swapaxes(-1, -2)"
        )
    elif (
        isinstance(e, ValueError)
        and "broadcast" in str(e)
        and len(out_shape) < max(a.ndim for a in case.arrays.values())
    ):
        error.cause = "not-expanded"
        error.hint = (
            f"g is {tuple(out_shape)}: the forward removed a dim, and NumPy lines shapes up from "
            "the last dim, so g does not broadcast against the input until that dim is put back "
            "where it was (np.expand_dims) as size 1"
        )
    elif isinstance(e, ValueError) and any(w in str(e) for w in ("shape", "mismatch", "broadc")):
        shapes = ", ".join(f"{k} {tuple(a.shape)}" for k, a in case.arrays.items())
        error.hint = (
            f"a shape mismatch: here g is {tuple(out_shape)} and the inputs are {shapes}; "
            "write the shape of each intermediate next to its line and check every product"
        )
    return error


NOT_LINEAR = (
    "your backward is not linear in g: with 2·g it does not return twice the gradient, but a "
    "VJP always is (every term is g times something). Is g missing from a term, or a constant "
    "added?"
)


def _not_linear(cls, case, r, grads, indices):
    """The inputs among `indices` whose gradient does not double when g doubles.

    Runs a fresh forward, so that a backward that changed its saved arrays in place (harmless
    in the engine, which calls it once) is not blamed."""
    try:
        out = cls.apply(*_leaves(case), **case.params)
        doubled = out._ctx.backward(_read_only(2 * r))
        doubled = doubled if isinstance(doubled, (tuple, list)) else (doubled,)
        return [
            i
            for i in indices
            if not np.allclose(np.asarray(doubled[i]), 2 * np.asarray(grads[i]), 1e-6, 1e-9)
        ]
    except Exception:  # whatever went wrong is reported by the first call already
        return []


# ---- one part (one Function) --------------------------------------------------------------


def _most_consistent(per_case):
    """The mistakes that explain the most failing cases (two that coincide on one case are told
    apart by the others), in the catalogue's order; [] when none explains at least half of
    them (a coincidence on one odd shape, such as (1, 3) @ (3, 1), is not a diagnosis)."""
    counts, says = {}, {}
    for found in per_case:
        for key, text in found:
            counts[key] = counts.get(key, 0) + 1
            says.setdefault(key, text)
    if not counts:
        return []
    best = max(counts.values())
    if 2 * best < len(per_case):
        return []
    return [(key, says[key]) for key in counts if counts[key] == best]


def _non_square_view(outcomes, i):
    """When input i first fails on a square case, and only on its values, the first
    non-square case that fails too: there a mix-up of two sizes shows as a shape error or a
    crash, which says more. None otherwise."""
    checked = [o for o in outcomes if o.values_checked]
    failing = [o for o in checked if o.error or not o.findings[i].ok]
    if not failing or failing[0].error or not failing[0].case.square:
        return None
    first = failing[0].findings[i]
    if "shape" in first.kinds:
        return None
    for o in failing:
        if not o.case.square:
            if o.error:
                return o.label, o.error
            other = o.findings[i]
            if "shape" in other.kinds or (other.mistakes and not first.mistakes):
                return o.label, other
            return None  # the same kind of failure: nothing more to see there
    return None


def _square_only_hint(outcomes, failed_labels):
    """Fires when every square case passes and every non-square one fails."""
    square = [o for o in outcomes if o.values_checked and o.case.square]
    other = [o for o in outcomes if o.values_checked and not o.case.square]
    if not square or not other or any(o.label in failed_labels for o in square):
        return None
    if not all(o.label in failed_labels for o in other):
        return None
    return (
        "right on the square shapes, wrong on the others: two dims of the same size were mixed "
        "up (x.shape[0] where x.shape[-1] was meant, a sum or mean over the wrong axis, a "
        "missing or extra transpose); compare each shape in your code with the exercise's"
    )


def _setting_hint(outcomes, failed_labels):
    """Fires when an option (dim, approximate, ...) separates the passing and failing cases."""
    checked = [o for o in outcomes if o.values_checked]
    for key in checked[0].case.params:
        values = [o.case.params.get(key) for o in checked]
        if not all(isinstance(v, (str, int, float, bool)) for v in values):
            continue  # ids and targets: not a setting
        good = {v for o, v in zip(checked, values) if o.label not in failed_labels}
        bad = {v for o, v in zip(checked, values) if o.label in failed_labels}
        if good and bad and not good & bad:
            show = lambda vs, k=key: " or ".join(f"{k}={v!r}" for v in sorted(vs, key=repr))
            return (
                f"right with {show(good)}, wrong with {show(bad)}: look at how your code uses "
                f"self.{key} (or where it assumes one value of it)"
            )
    return None


def _factor_hint(failures, constants):
    """When every failing case is off by a factor: the size it is in every case, if one is
    (`constants`: each case's named sizes, by label), else the list of factors."""
    factors = [(label, f.factor) for label, f in failures if f.factor not in (None, -1.0)]
    if len(factors) < 2 or len(factors) != len(failures):
        return None
    names = set.intersection(*(set(constants[label]) for label, _ in factors))
    for name in sorted(names):
        for power, words in ((-1, f"1/{name}"), (1, name)):
            if all(
                np.isclose(c, constants[label][name] ** power, rtol=1e-4) for label, c in factors
            ):
                return f"on every failing shape the factor is {words}, with that shape's {name}"
    if "named" in failures[0][1].kinds:
        return None
    values = {round(c, 6) for _, c in factors}
    if len(values) == 1:
        return f"the factor is {factors[0][1]:.6g} on every failing shape"
    listing = "; ".join(f"{c:.4g} on {label}" for label, c in factors)
    return f"the factor changes with the shape ({listing}): it depends on a size"


def _guarded(cls, part, case, rng, path, check_values=True):
    """run_case, turning an unexpected failure of the checker itself into a reported error
    (a strange return value must never end in a traceback from the checker's own code)."""
    try:
        return run_case(cls, part, case, rng, path, check_values)
    except Exception as e:
        outcome = CaseOutcome(case, case.describe(), check_values)
        outcome.error = CaseError(
            "checker",
            f"the checker could not compare what backward returned ({_describe_exception(e)}); "
            "return one NumPy float array per input",
            _where(e, path),
        )
        return outcome


def grade_part(module, part: Part, exercise: Exercise, path: Path | None) -> PartReport:
    cls = getattr(module, part.function, None)
    if cls is None:
        return PartReport(
            part,
            "missing",
            message=f"no class {part.function} in {path.name if path else 'the module'}: the "
            "checker looks it up by that name (was it renamed?)",
        )
    if not (isinstance(cls, type) and issubclass(cls, tt.Function)):
        return PartReport(
            part, "missing", message=f"{part.function} must be a subclass of tinytensor.Function"
        )
    if exercise.reduce_by_hand and getattr(cls, "broadcasts", False):
        return PartReport(
            part,
            "fail",
            message=f"{part.function} sets `broadcasts = True`, which makes the engine reduce "
            "the gradients for you; in this exercise that reduction is yours to write: remove "
            "that line",
            kinds={"broadcasts"},
        )
    rng = np.random.default_rng(SEED)
    cases = part.cases(rng)
    outcomes = []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NaN and overflow are diagnosed, not warned about
        for case in cases:
            outcomes.append(_guarded(cls, part, case, rng, path))
            error = outcomes[-1].error
            if error and error.kind == "not_implemented":
                return PartReport(part, "todo", message=error.message, total=len(cases))
        outcomes.append(_guarded(cls, part, cases[-1].astype(np.float32), rng, path, False))
    return _summarize(part, outcomes)


def _summarize(part, outcomes) -> PartReport:
    report = PartReport(part, "pass", total=len(outcomes))
    names = list(outcomes[0].case.arrays)
    failed_labels = set()
    for o in outcomes:
        if o.error:
            report.errors.append((o.label, o.error))
            report.kinds.add(o.error.kind)
            if o.error.cause:
                report.kinds |= {"mistake", f"mistake:{o.error.cause}"}
            failed_labels.add(o.label)
    for i, name in enumerate(names):
        failures = [
            (o.label, o.findings[i]) for o in outcomes if not o.error and not o.findings[i].ok
        ]
        failed_labels.update(label for label, _ in failures)
        verdict = InputVerdict(name, not failures, failures, len(outcomes))
        for _, f in failures:
            verdict.kinds |= f.kinds
        verdict.mistakes = _most_consistent(
            [f.mistakes for _, f in failures if f.kinds & {"values", "shape"} or f.mistakes]
        )
        verdict.kinds |= {"mistake"} if verdict.mistakes else set()
        verdict.kinds |= {f"mistake:{key}" for key, _ in verdict.mistakes}
        verdict.non_square = _non_square_view(outcomes, i)
        factor = _factor_hint(failures, {o.label: o.case.constants for o in outcomes})
        if factor:
            verdict.hints.append(factor)
        report.inputs.append(verdict)
        report.kinds |= verdict.kinds
    square = _square_only_hint(outcomes, failed_labels)
    if square:
        report.hints.append(square)
        report.kinds.add("square-only")
    setting = _setting_hint(outcomes, failed_labels)
    if setting:
        report.hints.append(setting)
        report.kinds.add("setting")
    if failed_labels:
        report.status = "fail"
    return report


def grade(exercise: Exercise, path: Path | None = None, module=None) -> ExerciseReport:
    """Checks every Function of `exercise`, from the file at `path` or an already loaded module."""
    report = ExerciseReport(exercise, path)
    if module is None:
        try:
            module = load_module(path)
        except FileNotFoundError:
            report.load_error = f"{path} does not exist"
            return report
        except BaseException as e:  # a syntax error or a failing import in the learner's file
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            report.load_error = f"could not load {path.name}: {_describe_exception(e)}"
            if isinstance(e, SyntaxError) and e.lineno:
                report.load_error += f" (line {e.lineno})"
            return report
    report.module = module
    report.parts = [grade_part(module, part, exercise, path) for part in exercise.parts]
    return report
