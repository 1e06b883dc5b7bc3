"""The terminal report: one line per passing exercise, the details a learner needs for the rest.

Colors only when writing to a terminal (and NO_COLOR is unset), or when asked for.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

from .grading import ExerciseReport, PartReport

_CODES = {"green": "32", "red": "31", "yellow": "33", "cyan": "36", "bold": "1", "dim": "2"}

ERROR_TITLES = {
    "forward": "forward raised an error",
    "forward_changed": "the forward pass was changed",
    "backward": "backward raised an error",
    "inplace": "backward wrote into g",
    "count": "backward returned the wrong number of gradients",
    "setup": "the op could not run",
    "checker": "what backward returned could not be checked",
}


class Style:
    """Wraps text in ANSI colors when enabled; marks fall back to ASCII on non-UTF-8 streams."""

    def __init__(self, color: bool, unicode: bool = True):
        self.color = color
        self.ok, self.bad, self.todo = ("✓", "✗", "…") if unicode else ("ok", "XX", "..")

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"


def choose_style(mode: str = "auto", stream=None) -> Style:
    """mode: auto (colors on a terminal unless NO_COLOR is set), always or never."""
    stream = stream or sys.stdout
    if mode == "auto":
        color = stream.isatty() and "NO_COLOR" not in os.environ
    else:
        color = mode == "always"
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    return Style(color, unicode=encoding in ("utf8", "utf16", "utf32", ""))


def _width() -> int:
    return max(60, min(110, shutil.get_terminal_size((100, 20)).columns))


def _wrap(text: str, indent: str, first: str = "") -> list[str]:
    lines = textwrap.wrap(
        text,
        width=_width(),
        initial_indent=indent + first,
        subsequent_indent=indent + " " * len(first),
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines or [indent + first]


def _shapes(n: int) -> str:
    return f"{n} shape{'s' if n != 1 else ''}"


def _hint_lines(hints, indent, s: Style, label: str = "hint: ") -> list[str]:
    lines = []
    for hint in hints:
        wrapped = _wrap(hint, indent, label)
        wrapped[0] = wrapped[0].replace(label, s(label, "cyan"), 1)
        lines += wrapped
    return lines


def _non_square_lines(view, s: Style, shown_error=None) -> list[str]:
    """What the first failing non-square case shows, under a square case that failed on values
    (`shown_error`: the error already printed above, not to be repeated)."""
    label, what = view
    if hasattr(what, "problem"):  # a Finding
        text = what.problem + (f": {what.detail}" if what.detail else "")
        hints = [says for _, says in what.mistakes] or what.hints[:1]
    elif what is shown_error:
        text, hints = f"{ERROR_TITLES.get(what.kind, what.kind)} (shown above)", []
    else:  # a CaseError: backward raised there
        text = f"{ERROR_TITLES.get(what.kind, what.kind)}: {what.message}"
        hints = [what.hint] if what.hint else []
    lines = _wrap(f"the non-square {label} tells more: {text}", "        ")
    return lines + _hint_lines(hints, "        ", s)


def _part_lines(part: PartReport, s: Style, path_name: str) -> list[str]:
    fn = f"{part.part.function}.backward"
    if part.status == "todo":
        lines = [f"  {s(s.todo, 'yellow')} {s(fn, 'bold')}: {s('not implemented yet', 'yellow')}"]
        return lines + _wrap(part.message, "      ")
    if part.status == "missing" or (part.status == "fail" and part.message):
        lines = [f"  {s(s.bad, 'red')} {s(fn, 'bold')}"]
        return lines + _wrap(part.message, "      ")
    names = ", ".join(v.name for v in part.inputs)
    if part.ok:
        return [
            f"  {s(s.ok, 'green')} {s(fn, 'bold')}: {names} right on {_shapes(part.total - 1)} "
            "in float64 and one in float32"
        ]
    lines = [f"  {s(s.bad, 'red')} {s(fn, 'bold')}"]
    if part.errors:
        label, error = part.errors[0]
        title = ERROR_TITLES.get(error.kind, error.kind)
        count = f" on {len(part.errors)} of {_shapes(part.total)}" if part.total > 1 else ""
        lines += _wrap(f"{title}{count}, first on {label}:", "    ", s.bad + " ")
        lines += _wrap(error.message, "        ")
        if error.location:
            lines += _wrap(error.location, "        ", "at ")
        if error.hint:
            lines += _hint_lines([error.hint], "        ", s)
    width = max(len(v.name) for v in part.inputs)
    for verdict in part.inputs:
        name = s(verdict.name.ljust(width), "bold")
        clean = verdict.total - len(part.errors)
        if verdict.ok:
            if clean:
                lines.append(f"    {s(s.ok, 'green')} {name}  right on {_shapes(clean)}")
            continue
        label, finding = verdict.failed[0]
        lines.append(
            f"    {s(s.bad, 'red')} {name}  wrong on {len(verdict.failed)} of {_shapes(clean)}, "
            f"first on {s(label, 'dim')}:"
        )
        problem = finding.problem + (f": {finding.detail}" if finding.detail else "")
        lines += _wrap(problem, "        ")
        causes = [says for _, says in verdict.mistakes]
        lines += _hint_lines(causes, "        ", s, "likely cause: ")
        if verdict.non_square:
            shown = part.errors[0][1] if part.errors else None
            lines += _non_square_lines(verdict.non_square, s, shown)
        hints = finding.hints + verdict.hints
        if causes:  # a cause says most; a guess from the shape alone could contradict it
            hints = [] if "shape" in finding.kinds else hints[:1]
        lines += _hint_lines(hints, "        ", s)
    lines += _hint_lines(part.hints, "    ", s)
    return lines


def format_report(report: ExerciseReport, s: Style, compact: bool = False) -> str:
    """The report of one exercise; `compact` shortens a not-implemented one to a single line."""
    ex = report.exercise
    title = f"{ex.number:02d} {ex.name}"
    if report.load_error:
        head = f"{s(s.bad, 'red')} {s(title, 'bold')}  could not be checked"
        return "\n".join([head] + _wrap(report.load_error, "    "))
    if report.ok:
        if compact:
            fns = ", ".join(p.part.function for p in report.parts)
            return f"{s(s.ok, 'green')} {s(title, 'bold')}  {fns}: right"
        head = f"{s(s.ok, 'green')} {s(title, 'bold')}  {ex.title}"
    elif report.status == "todo":
        if compact:
            done = [p.part.function for p in report.parts if p.ok]
            so_far = f"{', '.join(done)}: right; the rest " if done else ""
            todo = s("not implemented yet", "yellow")
            return f"{s(s.todo, 'yellow')} {s(title, 'bold')}  {so_far}{todo}"
        head = f"{s(s.todo, 'yellow')} {s(title, 'bold')}  {ex.title}"
    else:
        head = f"{s(s.bad, 'red')} {s(title, 'bold')}  {ex.title}"
    path_name = report.path.name if report.path else ""
    lines = [head]
    for part in report.parts:
        lines += _part_lines(part, s, path_name)
    return "\n".join(lines)


def verdict_line(
    report: ExerciseReport, s: Style, command: str, md_dir: str = "", py_dir: str = ""
) -> str:
    """The last line for a single exercise: what happened and what to do next. `md_dir` and
    `py_dir` are the folders of the .md and the .py as seen from where the learner is."""
    ex = report.exercise
    md = os.path.join(md_dir, f"{ex.stem}.md")
    py = os.path.join(py_dir, f"{ex.stem}.py")
    if report.ok:
        return s(f"PASS  {ex.stem}: every gradient matches. On to the next exercise!", "green")
    if report.status == "todo":
        return s(f"TODO  read {md}, write backward in {py}, then run: {command}", "yellow")
    if report.load_error:
        return s(f"FAIL  fix {py} so that it loads, then run: {command}", "red")
    wrong = sum(not v.ok for p in report.parts for v in p.inputs)
    total = sum(len(p.inputs) for p in report.parts)
    what = f"{wrong} of {total} gradients wrong" if wrong else "see above"
    return s(f"FAIL  {ex.stem}: {what}. Fix, then run again: {command}", "red")


def summary_line(reports: list[ExerciseReport], s: Style) -> str:
    passed = sum(r.ok for r in reports)
    todo = sum(r.status == "todo" for r in reports)
    failed = len(reports) - passed - todo
    text = f"{passed} of {len(reports)} exercises pass"
    extra = [f"{failed} failing" if failed else "", f"{todo} not implemented yet" if todo else ""]
    extra = [e for e in extra if e]
    if extra:
        text += " (" + ", ".join(extra) + ")"
    return s(text, "green" if passed == len(reports) else "bold")
