"""Reading back what draw_graph wrote: a small parser for the DOT that graphviz's Python package
emits, shared by the graph-drawing tests."""

import re

from tinytensor.viz import draw_graph

_ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s\]]+)')


def parse_dot(source):
    """(nodes, edges, clusters): nodes maps id -> dict(attrs, clusters = the stack of cluster
    labels it sits in, outermost first); edges is a list of (src, dst); clusters maps each
    cluster's DOT name -> (label, parent cluster label or None)."""
    nodes, edges, clusters, stack = {}, [], {}, []
    for line in source.splitlines():
        line = line.strip()
        if line.startswith("subgraph "):
            name = line.split()[1]
            clusters[name] = [None, stack[-1][1] if stack else None]
            stack.append([name, None])
            continue
        if line == "}":
            if stack:
                stack.pop()
            continue
        if stack and "[" not in line and "->" not in line and "label=" in line:
            # a graph attribute statement of the cluster: `color=... label="h (Stack)" ...`
            label = dict(_ATTR.findall(line))["label"].strip('"')
            stack[-1][1] = clusters[stack[-1][0]][0] = label
            continue
        edge = re.match(r"^(\w+) -> (\w+)", line)
        if edge:
            edges.append(edge.groups())
            continue
        node = re.match(r"^(\w+) \[(.*)\]$", line)
        if node and node.group(1) not in ("node", "edge", "graph"):
            attrs = {k: v.strip('"') for k, v in _ATTR.findall(node.group(2))}
            attrs["clusters"] = [label for _, label in stack]
            nodes[node.group(1)] = attrs
    return nodes, edges, clusters


def graph_of(*args, **kwargs):
    kwargs.setdefault("legend", False)
    return parse_dot(draw_graph(*args, **kwargs).source)


def by_label(nodes, text):
    """The nodes whose label contains `text`."""
    return [n for n in nodes.values() if text in n["label"]]
