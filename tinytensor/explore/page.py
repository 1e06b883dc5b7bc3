"""The self-contained explorer page: the graph data, the bundled script and its style in one file.

The browser code lives in explorer/ (an npm project) and is bundled with esbuild into
static/explorer.js and static/explorer.css, which are committed: writing a page needs neither npm
nor a network, and the page loads nothing when it opens (no server, no CDN).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

STATIC = Path(__file__).parent / "static"


def render(data: dict) -> str:
    """The page for `data` (what `graph.extract` returned), as one HTML string."""
    script = (STATIC / "explorer.js").read_text(encoding="utf-8")
    style = (STATIC / "explorer.css").read_text(encoding="utf-8")
    # NOTE: inside <script> only "</" can end the element early; JSON and JS allow "<\/".
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    script = script.replace("</script", "<\\/script")
    title = html.escape(data.get("title") or "tinytensor graph explorer")
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<style>\n{style}\n</style>\n</head>\n<body>\n"
        f'<script type="application/json" id="tt-graph">{payload}</script>\n'
        f"<script>\n{script}\n</script>\n</body>\n</html>\n"
    )


def inline_frame(page: str, height: int = 640) -> str:
    """`page` inside an iframe, for Jupyter's `_repr_html_` (srcdoc keeps it self-contained)."""
    return (
        f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width:100%;height:{height}px;'
        'border:1px solid #ddd" sandbox="allow-scripts"></iframe>'
    )
