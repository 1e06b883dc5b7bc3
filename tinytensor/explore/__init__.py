"""The graph explorer: `tt.explore(loss, params=model)` writes one self-contained HTML page.

explorer.py  the public function and what it returns
graph.py     the graph, module tree, value/gradient summaries and backward steps as data
summary.py   statistics and histograms of arrays
page.py      the HTML page around the bundled browser code (static/, built from explorer/)
__main__.py  `python -m tinytensor.explore` on a saved graph or a model script
"""

import sys
import types

from .explorer import ExploredGraph, explore, render_saved

__all__ = ["ExploredGraph", "explore", "render_saved"]


class _CallableModule(types.ModuleType):
    # NOTE: importing the package tinytensor.explore makes `tt.explore` this module (Python sets
    # the attribute on its parent package), so the module itself must be callable for
    # `tt.explore(loss)` to keep working after `python -m tinytensor.explore` or any import.
    def __call__(self, *args, **kwargs):
        return explore(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
