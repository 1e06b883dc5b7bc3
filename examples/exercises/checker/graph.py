"""`check.py NAME --graph FILE`: the exercise's graph, with the gradients your backward gives.

The op runs on the exercise's first case, L = Σ out·r is formed as in the check, and the
engine's backward (which calls your `backward`) fills each input's `.grad`; `tt.draw_graph`
with show_grad=True then prints each gradient's norm (its values when it has at most 4
elements) on the input it belongs to. Drawing needs tinytensor/viz.py and graphviz's `dot` for
SVG/PNG/PDF; without `dot` the DOT source is still written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tinytensor as tt

from .grading import SEED, ExerciseReport


def _build(cls, part, prefix):
    """The part's first case through the learner's op, backward done; (loss, names, note)."""
    case = part.cases(np.random.default_rng(SEED))[0]
    leaves = [tt.tensor(a.copy(), requires_grad=True) for a in case.arrays.values()]
    out = cls.apply(*leaves, **case.params)
    r = tt.tensor(np.random.default_rng(SEED + 1).standard_normal(out.shape))
    loss = (out * r).sum()
    names = {f"{prefix}{name}": t for name, t in zip(case.arrays, leaves)}
    names.update({f"{prefix}out": out, f"{prefix}r (random)": r, f"{prefix}L": loss})
    note = ""
    try:
        loss.backward(retain_graph=True)
    except NotImplementedError:
        note = f"{cls.__name__}.backward is not implemented yet, so no gradients are shown"
    except Exception as e:  # a wrong shape or an exception in backward: draw without gradients
        note = f"{cls.__name__}: no gradients shown, backward failed ({type(e).__name__}: {e})"
    return loss, names, note, case.describe()


def draw(report: ExerciseReport, path: Path) -> str:
    """Draws `report`'s exercise to `path`; returns one line saying what was written (or why
    nothing was). Never raises: the check's verdict stands whatever happens here."""
    try:
        from tinytensor.viz import draw_graph, save_graph
    except ImportError as e:
        return (
            f"--graph: graph drawing needs tinytensor.viz (tt.draw_graph), which this checkout "
            f"cannot import ({e}); the check above is unaffected"
        )
    if report.module is None:
        return "--graph: nothing to draw, the exercise file did not load"
    ex = report.exercise
    outputs, names, notes, shapes = [], {}, [], []
    for part in ex.parts:
        cls = getattr(report.module, part.function, None)
        if cls is None:
            continue
        prefix = f"{part.function}." if len(ex.parts) > 1 else ""
        try:
            loss, part_names, note, shape = _build(cls, part, prefix)
        except Exception as e:
            notes.append(f"{part.function}: the forward failed ({type(e).__name__}: {e})")
            continue
        outputs.append(loss)
        names.update(part_names)
        shapes.append(shape)
        if note:
            notes.append(note)
    if not outputs:
        return "--graph: nothing to draw. " + " ".join(notes)
    title = f"{ex.stem}: L = Σ out·r on {'; '.join(shapes)}, with your gradients"
    try:
        digraph = draw_graph(
            outputs if len(outputs) > 1 else outputs[0], params=names, show_grad=True, name=title
        )
        written = save_graph(digraph, path)
    except Exception as e:
        return f"--graph: drawing failed ({type(e).__name__}: {e})"
    lines = [f"graph written to {', '.join(str(p) for p in written)}"] + notes
    return "\n".join(lines)
