"""Shared bits of the experiment scripts: the output folder and a plain-text table."""

from __future__ import annotations

import argparse
import os


def parse_args(description: str, **extra):
    """--out (default runs/experiments) plus any `extra` name=(type, default, help)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default=os.path.join("runs", "experiments"), help="output dir")
    for name, (kind, default, text) in extra.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=default, help=text)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    return args


def table(headers, rows) -> str:
    """Rows of cells as an aligned text table (numbers right-aligned)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for j, row in enumerate(cells):
        lines.append(
            "  ".join(
                c.rjust(w) if j and i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))
            )
        )
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def save_text(out_dir: str, name: str, text: str) -> str:
    path = os.path.join(out_dir, name)
    with open(path, "w") as f:
        f.write(text + "\n")
    return path
