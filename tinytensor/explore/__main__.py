"""`python -m tinytensor.explore`: a page from a saved graph or from a model script.

    python -m tinytensor.explore graph.json           # saved by tt.explore(loss, path="graph.json")
    python -m tinytensor.explore model.py -o m.html   # runs model.py, explores its `loss`

A model script is run with __name__ == "__explore__" (so its `if __name__ == "__main__":` part
does not run); it must leave the output tensor in a global (`loss` unless --output says) and may
leave the model in another (`model` unless --params says) to name parameters and modules.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

from .explorer import explore, render_saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tinytensor.explore",
        description="Write the self-contained graph explorer page for a saved graph (.json) or "
        "a model script (.py).",
    )
    parser.add_argument("source", help="a graph saved as .json by tt.explore, or a .py script")
    parser.add_argument("-o", "--out", help="the page to write (default: SOURCE with .html)")
    parser.add_argument("--output", default="loss", help="the script's output tensor global")
    parser.add_argument("--params", default="model", help="the script's model global, if any")
    parser.add_argument("--title", help="the page title")
    args = parser.parse_args(argv)

    source = Path(args.source)
    if not source.is_file():
        parser.error(f"source {str(source)!r} does not exist")
    out = Path(args.out) if args.out else source.with_suffix(".html")
    if source.suffix == ".json":
        try:
            written = render_saved(source, out)
        except ValueError as e:
            parser.error(str(e))
        print(f"wrote {written}")
        return 0
    if source.suffix != ".py":
        parser.error(f"source must be a .json graph or a .py script, got {str(source)!r}")
    sys.path.insert(0, str(source.resolve().parent))  # the script's own imports, as `python x.py`
    scope = runpy.run_path(str(source), run_name="__explore__")
    if args.output not in scope:
        parser.error(f"{source} defines no global {args.output!r}; pass --output NAME")
    result = explore(scope[args.output], scope.get(args.params), out, title=args.title)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
