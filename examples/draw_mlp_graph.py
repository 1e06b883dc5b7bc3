"""Draw the computation graph of a small MLP's loss, with the gradients of one backward pass.

    python examples/draw_mlp_graph.py                       # writes runs/mlp_graph/graph.svg
    python examples/draw_mlp_graph.py --out graph.png       # the suffix picks the format

Each nn.Module's ops are boxed in a cluster named after the module (fc1, fc2, ...); parameters
carry their names, and after backward every tensor that has a gradient shows it (its values when
it has at most 4 elements, else its norm). Without graphviz's `dot` program only graph.dot is
written; paste it into any graphviz viewer.
"""

from __future__ import annotations

import argparse

import numpy as np

import tinytensor as tt
from tinytensor import nn
from tinytensor.viz import draw_graph, save_graph

F = nn.functional


class TinyMLP(nn.Module):
    """2 -> 4 -> 3 classes with a ReLU: small enough that every gradient can be read."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 4)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/mlp_graph/graph.svg", help=".svg, .png or .pdf")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    tt.manual_seed(args.seed)
    model = TinyMLP()
    x = tt.tensor(np.random.default_rng(args.seed).normal(size=(4, 2)).astype(np.float32))
    target = tt.tensor([0, 2, 1, 2])

    logits = model(x)
    logits.retain_grad()  # an intermediate: without this it has no .grad to show
    loss = F.cross_entropy(logits, target)
    # retain_graph keeps the graph that backward would otherwise free as it walks it
    loss.backward(retain_graph=True)

    graph = draw_graph(
        loss, params=model, show_grad=True, name=f"TinyMLP, loss = {loss.item():.4f}"
    )
    written = save_graph(graph, args.out)
    print(f"loss {loss.item():.4f}; graph of {graph.source.count(' -> ')} edges written to:")
    for path in written:
        print(f"  {path}")


if __name__ == "__main__":
    main()
