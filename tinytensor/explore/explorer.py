"""`tt.explore(loss, params=model)`: write the graph explorer page for a computation."""

from __future__ import annotations

import json
import time
from pathlib import Path

from . import graph, page


def explore(output, params=None, path="graph.html", backward=True, title=None):
    """Writes one self-contained HTML page to explore the graph behind `output`.

    The page opens offline in any modern browser. It shows the graph folded to the top-level
    modules (click a module's ± to unfold it, search by parameter or op name); clicking an op
    shows its VJP math, arguments and shapes, clicking a tensor the statistics and histogram of
    its value and gradient; "Backward" steps through the gradient pass in the order the engine
    ran it (← → keys, or the slider). Tensors with NaN/inf or exploding/vanishing gradients are
    marked.

    Args:
        output: the loss (a single-element Tensor), or a list of Tensors; the graph must not
            have been freed by an earlier backward.
        params: names for tensors and modules: a Module (its `named_parameters()` and
            `named_modules()`), or a dict name -> Tensor, as `draw_graph`.
        path: the file to write; a ".json" suffix writes the graph data instead, which
            `python -m tinytensor.explore graph.json` turns into a page later.
        backward: run `loss.backward()` and record it (the loss: the first single-element
            output that requires grad, so `[logits, loss]` works). It is the real
            backward: parameters' `.grad` are filled as by your own call, and the graph is
            freed afterwards, so do not call `loss.backward()` again for this loss.
        title: written at the top of the page.

    Returns:
        An `ExploredGraph` (its `path`, `size_bytes`, `seconds`); in Jupyter it shows inline.

    Example:
        >>> logits, loss = model(idx, targets)
        >>> tt.explore(loss, params=model, path="gpt.html")
    """
    started = time.perf_counter()
    path = Path(path)
    data = graph.extract(output, params, backward=backward)
    data["title"] = title or _default_title(params)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(data, separators=(",", ":"), allow_nan=False), "utf-8")
    else:
        path.write_text(page.render(data), encoding="utf-8")
    return ExploredGraph(path, data, time.perf_counter() - started)


def render_saved(json_path, path=None):
    """Turns graph data written by `explore(..., path="x.json")` into a page; returns its path."""
    json_path = Path(json_path)
    try:
        data = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"explore: cannot read a saved graph from {json_path}: {e}") from e
    if not isinstance(data, dict) or data.get("format") != "tinytensor-explore/1":
        raise ValueError(
            f"explore: {json_path} is not a graph saved by tt.explore(..., path='*.json')"
        )
    out = Path(path) if path else json_path.with_suffix(".html")
    out.write_text(page.render(data), encoding="utf-8")
    return out


def _default_title(params):
    if params is not None and hasattr(params, "named_parameters") and not isinstance(params, dict):
        return f"{type(params).__name__}: computation graph"
    return "computation graph"


class ExploredGraph:
    """What `explore` wrote: `path`, `size_bytes`, `seconds`, and counts of nodes and steps."""

    def __init__(self, path, data, seconds):
        self.path = Path(path)
        self.size_bytes = self.path.stat().st_size
        self.seconds = seconds
        self.num_ops = sum(n["kind"] == "op" for n in data["nodes"])
        self.num_tensors = len(data["nodes"]) - self.num_ops
        self.num_steps = len(data["steps"])
        self.data = data  # the graph data the page was written from (graph.extract)

    def __repr__(self):
        return (
            f"ExploredGraph({str(self.path)!r}: {self.num_ops} ops, {self.num_tensors} tensors, "
            f"{self.num_steps} backward steps, {self.size_bytes / 1e6:.2f} MB, "
            f"written in {self.seconds:.2f} s)"
        )

    def _repr_html_(self):
        if self.path.suffix.lower() == ".json":
            return None
        return page.inline_frame(page.render(self.data))
