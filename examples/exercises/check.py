"""Checks your backward (VJP) for a tinytensor exercise and says exactly what is wrong.

    python examples/exercises/check.py relu           # one exercise (name, number or file)
    python examples/exercises/check.py --all          # every exercise, easy to hard
    python examples/exercises/check.py --list         # what there is
    python examples/exercises/check.py layernorm --graph ln.svg   # the graph, your gradients on it

Each gradient your backward returns is compared, in float64 on several shapes (square,
non-square, broadcasting), with central differences of the forward and with the engine's own
op; a float32 run checks the dtype. Exit status: 0 if everything checked passes, 1 if anything
fails or is not written yet (for autograders), 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `examples.exercises` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.exercises.checker import catalogue, grading, report  # noqa: E402

HERE = Path(__file__).resolve().parent
SOLUTIONS = HERE.parent / "solutions"


def command() -> str:
    """How to run this script from the current directory: `python check.py` inside
    examples/exercises, `python examples/exercises/check.py` from the repository root, the
    absolute path where that is shorter than a climb of ../"""
    return f"python {_shown(Path(__file__))}"


def _parser() -> argparse.ArgumentParser:
    names = ", ".join(ex.name for ex in catalogue.EXERCISES)
    COMMAND = command()
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description=(
            "Checks the backward (VJP) you wrote for a tinytensor exercise: each gradient is\n"
            "compared, in float64 on square, non-square and broadcasting shapes, with central\n"
            "differences and with the engine's own op (plus one float32 run for the dtype).\n"
            "Per input it reports pass/fail, the worst element (index, your value, the numerical\n"
            "value), the likely cause when your gradient is what a known wrong derivation gives\n"
            "(with the step of the .md it comes from), and a hint when the mistake has a\n"
            "recognisable shape. g is handed to backward read-only: editing it in place is a\n"
            "mistake. It never shows the solution. Start with examples/exercises/README.md."
        ),
        epilog=(
            "exercises, easy to hard:\n"
            + textwrap.fill(names, width=88, initial_indent="  ", subsequent_indent="  ")
            + "\n\nexamples:\n"
            f"  {COMMAND} relu                   check exercise 1 (or: 1, 01_relu.py)\n"
            f"  {COMMAND} --all                  check all of them\n"
            f"  {COMMAND} layernorm --graph g.svg  also draw the graph with your gradients\n"
            f"  {COMMAND} --all --dir submissions/alice   grade another folder of files\n\n"
            "exit status: 0 when everything checked passes, 1 when something fails or is not\n"
            "implemented yet, 2 for a bad command line."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "exercise", nargs="?", help="the exercise: its name, number or file (layernorm, 11)"
    )
    parser.add_argument("--all", action="store_true", help="check every exercise")
    parser.add_argument("--list", action="store_true", help="list the exercises and exit")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--solutions",
        action="store_true",
        help="check the reference solutions in examples/solutions instead of your files",
    )
    source.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="the folder holding the exercise files to check (default: examples/exercises)",
    )
    parser.add_argument(
        "--graph",
        type=Path,
        metavar="FILE",
        help="draw the exercise's graph with your gradients to FILE (.svg, .png, .pdf or .dot)",
    )
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colored output: auto (when writing to a terminal, default), always, never",
    )
    return parser


def _shown(path: Path) -> str:
    """`path` as the learner can type it from here: relative when that is shorter than the
    absolute path ("" for the current directory itself)."""
    path = path.resolve()
    try:
        relative = os.path.relpath(path, Path.cwd())
    except ValueError:  # another drive on Windows
        return str(path)
    if relative == ".":
        return ""
    return relative if len(relative) <= len(str(path)) else str(path)


def _list(style) -> int:
    for ex in catalogue.EXERCISES:
        fns = ", ".join(p.function for p in ex.parts)
        print(f"{ex.number:2d}  {style(ex.name.ljust(22), 'bold')} {ex.title}  ({fns})")
    print(f"\nfiles: {_shown(HERE) or '.'}/NN_name.md (the maths) and NN_name.py (your code)")
    return 0


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    style = report.choose_style(args.color)
    if args.list:
        return _list(style)
    if args.all == bool(args.exercise):
        parser.error("name one exercise (e.g. `relu`) or pass --all; --list shows them")
    if args.graph and args.all:
        parser.error("--graph draws one exercise: name it instead of --all")
    folder = SOLUTIONS if args.solutions else (args.dir or HERE)
    if not folder.is_dir():
        parser.error(f"--dir {folder}: no such folder")
    if args.all:
        exercises = catalogue.EXERCISES
    else:
        try:
            exercises = (catalogue.find(args.exercise),)
        except KeyError:
            names = ", ".join(ex.name for ex in catalogue.EXERCISES)
            parser.error(f"no exercise called {args.exercise!r}; there are: {names}")
    reports = [grading.grade(ex, folder / f"{ex.stem}.py") for ex in exercises]
    for r in reports:
        print(report.format_report(r, style, compact=args.all and r.status in ("pass", "todo")))
    if args.all:
        print("\n" + report.summary_line(reports, style))
    else:
        flags = " --solutions" if args.solutions else (f" --dir {args.dir}" if args.dir else "")
        rerun = f"{command()} {args.exercise}{flags}"
        print("\n" + report.verdict_line(reports[0], style, rerun, _shown(HERE), _shown(folder)))
    if args.graph:
        from examples.exercises.checker import graph

        print(graph.draw(reports[0], args.graph))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `check.py --all | head`: the reader left early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
