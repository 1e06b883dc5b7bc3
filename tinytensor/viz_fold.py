"""Folding the graph of a whole model so that it stays readable: the module tree decides.

A 40-layer GPT's loss hangs on some 2,000 graph nodes, far too many to read. The model's own
structure says how to show less without cutting the graph into fragments:

- **runs**: consecutive sibling modules that compute the same thing (same class, same ops in the
  same order, same parameter shapes, each feeding the next, such as `blocks.0` ... `blocks.39`)
  are drawn once, as "blocks.0–39 ×40": the first member stands for all of them, and the edges
  that left the last member leave it instead;
- **boxes**: a module collapsed to one node that gives its name, class, input and output
  shapes and parameter count. `fold` picks the deepest level of the module tree at which the
  picture has at most `max_nodes` nodes; `expand` opens chosen modules whatever the level.

Nodes are keyed as `walk_graph` keys them: ("t", id) for a tensor, ("op", id) for a Function
node, and ("box", module name, call, number of calls) for one call of a collapsed module.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

# roles whose tensors live inside a collapsed module's box when only that module uses them
HIDEABLE_ROLES = ("parameter", "constant")


class ModuleTree:
    """A model's modules by dotted name ("" is the model itself), with parents and depths.

    Names come from `named_modules()`; "blocks.3" may sit directly under the root when `blocks`
    is a plain list, so the parent of a name is its longest proper prefix that is a module.
    """

    def __init__(self, named_modules=()):
        # a ModuleList/ModuleDict only holds its items: they sit under its parent, as the items
        # of a plain list attribute did (blocks.3 directly under the root)
        self.by_name = {
            n: m for n, m in named_modules if type(m).__name__ not in ("ModuleList", "ModuleDict")
        }
        self._name_of = {}
        for name, module in self.by_name.items():
            self._name_of.setdefault(id(module), name)  # a shared module keeps its first name
        self.parent, self.depth = {}, {}
        self.children = defaultdict(list)
        for name in self.by_name:  # pre-order: a parent comes before its children
            if name == "":
                self.depth[name] = 0
                continue
            parent = self.owner(name.rpartition(".")[0]) if "." in name else ""
            parent = parent if parent in self.by_name else ""
            self.parent[name] = parent
            self.depth[name] = self.depth.get(parent, 0) + 1
            self.children[parent].append(name)

    def __bool__(self):
        return bool(self.by_name)

    def get(self, name):
        return self.by_name.get(name)

    def name_of(self, module):
        return self._name_of.get(id(module))

    def owner(self, dotted: str) -> str:
        """The module that holds `dotted` (a parameter or module name): its longest prefix
        that is a module name, "" (the root) when there is none."""
        while dotted and dotted not in self.by_name:
            dotted = dotted.rpartition(".")[0]
        return dotted

    def lineage(self, name: str) -> list[str]:
        """`name` and its ancestor modules, the root ("") last."""
        out = [name]
        while name:
            name = self.parent.get(name, "")
            out.append(name)
        return out


def within(name: str, module: str) -> bool:
    """Whether `name` is `module` or lies inside it ("" is the whole model)."""
    return module == "" or name == module or name.startswith(module + ".")


def infer_root(ops):
    """The one module whose tree holds every module that recorded a node, or None."""
    modules = {id(op.module): op.module for op in ops if op.module is not None}
    if not modules or not all(hasattr(m, "named_modules") for m in modules.values()):
        return None
    inside = set()
    for module in modules.values():
        inside.update(id(sub) for _, sub in module.named_modules() if sub is not module)
    roots = [m for key, m in modules.items() if key not in inside]
    return roots[0] if len(roots) == 1 else None


@dataclass
class Walk:
    """Everything reachable from the outputs, as `walk_graph` finds it.

    nodes: key -> Tensor or Function, breadth first from the outputs (the nearest first);
    edges: (source key, destination key), inputs before outputs, each op's in argument order;
    producer: tensor key -> the op key that made that value (None for a leaf);
    inputs_of: op key -> its input tensor keys, in argument order."""

    nodes: dict
    edges: list
    producer: dict
    inputs_of: dict


def walk_graph(outputs) -> Walk:
    """The graph behind `outputs`, walked iteratively (deep graphs do not recurse).

    An edge follows `node.parents`, the node that made each input *when the node was
    recorded*: after `y.mul_(3)`, y's `_ctx` is the in-place node, but the ops that read y
    before still read the old value, made by the old node. A tensor node therefore stands for
    one value: ("t", id(tensor)) normally, ("t", id(tensor), id(node)) for an older value of
    a tensor modified in place since; ops are ("op", id(node))."""
    nodes, edges, producer, inputs_of = {}, [], {}, {}
    value_of = {}  # id(node) -> the key of the value it made (an alias shares it)
    queue = deque()

    def tensor_key(t, made_by):
        if made_by is not None and id(made_by) in value_of:
            return value_of[id(made_by)]
        key = ("t", id(t)) if t._ctx is made_by else ("t", id(t), id(made_by))
        if key not in nodes:
            nodes[key] = t
            producer[key] = None if made_by is None else ("op", id(made_by))
            queue.append((key, made_by))
            if made_by is not None:
                value_of[id(made_by)] = key
        return key

    for t in outputs:
        tensor_key(t, t._ctx)
    while queue:
        key, node = queue.popleft()
        if key[0] == "t":
            if node is None:
                continue
            op_key = ("op", id(node))
            edges.append((op_key, key))
            if op_key not in nodes:
                nodes[op_key] = node
                queue.append((op_key, node))
            continue
        inputs = node.inputs or ()
        parents = node.parents if len(node.parents) == len(inputs) else [x._ctx for x in inputs]
        inputs_of[key] = [tensor_key(x, parent) for x, parent in zip(inputs, parents)]
        edges.extend((x_key, key) for x_key in reversed(inputs_of[key]))
    edges.reverse()  # inputs before outputs: DOT then lays out the graph in computing order
    return Walk(nodes, edges, producer, inputs_of)


@dataclass
class Run:
    """Consecutive identical sibling modules, drawn once as the first of them."""

    members: list[str]
    module: object

    @property
    def label(self) -> str:
        first, last = self.members[0], self.members[-1]
        head, _, a = first.rpartition(".")
        _, _, b = last.rpartition(".")
        span = f"{head}.{a}–{b}" if head else f"{a}–{b}"
        return f"{span} ({type(self.module).__name__}) ×{len(self.members)}"


@dataclass
class View:
    """What to draw: nodes (key -> object, nearest the outputs first) and edges between them.

    Boxes map to `Box`; `runs` maps a run's first member to its `Run`; `cut` are the collapsed
    module names."""

    nodes: dict
    edges: list
    cut: frozenset = frozenset()
    runs: dict = field(default_factory=dict)
    folded: bool = False  # drawn whole even above max_nodes: cutting it would leave fragments


@dataclass
class Box:
    """One collapsed module: what its label says."""

    name: str
    module: object
    inputs: list  # (shape, dtype) of the tensors flowing in (parameters excluded)
    outputs: list  # (shape, dtype) of the tensors flowing out
    n_params: int
    run: Run | None = None
    call: int = 1  # which call of the module this box is, of n_calls
    n_calls: int = 1
    op_key: tuple | None = None  # one op inside: where the box sits among the clusters


class Folder:
    """The walked graph plus the module tree; `view(...)` gives a folded picture of it."""

    def __init__(self, walk: Walk, tree: ModuleTree, tensor_names: dict, roles: dict, outputs):
        self.nodes = walk.nodes  # key -> object, breadth first from the outputs
        self.order = {key: i for i, key in enumerate(self.nodes)}
        self.edges = walk.edges
        self.producer, self.inputs_of = walk.producer, walk.inputs_of
        self.tree = tree
        self.names = tensor_names  # id(tensor) -> dotted name
        self.roles = roles  # tensor key -> role
        self.output_keys = {("t", id(t)) for t in outputs}
        self.out_of = {src: dst for src, dst in self.edges if src[0] == "op"}
        self.consumers = defaultdict(list)
        for src, dst in self.edges:
            if src[0] == "t":
                self.consumers[src].append(dst)
        self.module_of = {}  # op key -> module name, "" at the top level, None outside the tree
        for key, obj in self.nodes.items():
            if key[0] == "op":
                m = obj.module
                self.module_of[key] = "" if m is None else tree.name_of(m)
        self.ops_in = defaultdict(list)  # module name -> op keys inside it (subtree)
        for key, name in self.module_of.items():
            if name is None:
                continue
            for ancestor in tree.lineage(name):
                self.ops_in[ancestor].append(key)
        self.drawn_from = self.nodes  # the nodes after runs are folded (see fold_runs)
        self._call_cache = {}

    # ---- helpers ---------------------------------------------------------------------------

    def out_key(self, op_key):
        """The tensor an op made (each Function makes one)."""
        return self.out_of[op_key]

    def owner_of_leaf(self, key):
        name = self.names.get(key[1])
        return self.tree.owner(name) if name is not None else None

    def used_modules(self):
        return {name for name, ops in self.ops_in.items() if ops}

    def ordered_ops(self, module: str) -> list:
        """The ops of `module`, inputs before outputs, found from its exits by a depth-first
        walk over inputs in argument order: identical modules list corresponding ops at the
        same positions."""
        inside = set(self.ops_in[module])
        exits = []
        for op_key in inside:
            out = self.out_key(op_key)
            if out in self.output_keys or any(c not in inside for c in self.consumers[out]):
                exits.append(op_key)
        exits.sort(key=self.order.__getitem__)
        ordered, seen = [], set()
        for start in exits:
            stack = [(start, False)]
            while stack:
                key, done = stack.pop()
                if done:
                    ordered.append(key)
                    continue
                if key in seen:
                    continue
                seen.add(key)
                stack.append((key, True))
                producers = []
                for x_key in self.inputs_of[key]:
                    producer = self.producer[x_key]
                    if producer in inside and producer not in seen:
                        producers.append(producer)
                stack.extend((p, False) for p in reversed(producers))  # first argument first
        return ordered

    # ---- runs of identical blocks ----------------------------------------------------------

    def _signature(self, module: str):
        ops = self.ordered_ops(module)
        if len(ops) != len(self.ops_in[module]):
            return None
        obj = self.tree.get(module)
        params = ()
        if hasattr(obj, "named_parameters"):
            params = tuple((n, tuple(p.shape)) for n, p in obj.named_parameters())
        steps = tuple((type(self.nodes[k]).__name__, len(self.inputs_of[k])) for k in ops)
        shapes = tuple(tuple(self.nodes[self.out_key(k)].shape) for k in ops)
        return type(obj).__name__, steps, shapes, params

    def _feeds(self, a: str, b: str) -> bool:
        inside_b = set(self.ops_in[b])
        return any(c in inside_b for op in self.ops_in[a] for c in self.consumers[self.out_key(op)])

    def find_runs(self, blocked) -> list[Run]:
        """Maximal runs of ≥ 2 consecutive identical siblings that feed one another; modules in
        `blocked` (opened by the caller) are never part of a run."""
        used = self.used_modules()
        runs = []
        parents = sorted(self.tree.children, key=lambda n: self.tree.depth.get(n, 0))
        for parent in parents:
            kids = [c for c in self.tree.children[parent] if c in used]
            i = 0
            while i < len(kids):
                first = kids[i]
                members = [first]
                signature = None if first in blocked else self._signature(first)
                j = i + 1
                while (
                    signature is not None
                    and j < len(kids)
                    and kids[j] not in blocked
                    and self._feeds(kids[j - 1], kids[j])
                    and self._signature(kids[j]) == signature
                ):
                    members.append(kids[j])
                    j += 1
                if len(members) > 1:
                    runs.append(Run(members, self.tree.get(first)))
                i = j
        return runs

    def fold_runs(self, runs):
        """(nodes, edges, runs kept) with each run's later members mapped onto its first."""
        alias, membership, hidden, kept = {}, defaultdict(list), [], []
        for r, run in enumerate(runs):
            parent = self.tree.parent.get(run.members[0], "")
            if any(within(parent, h) for h in hidden):
                continue  # inside a member that is not drawn
            kept.append(run)
            base = self.ordered_ops(run.members[0])
            for j, member in enumerate(run.members):
                ops = base if j == 0 else self.ordered_ops(member)
                inside = set(ops)
                for k, op_key in enumerate(ops):
                    out = self.out_key(op_key)
                    membership[op_key].append((r, j))
                    membership[out].append((r, j))
                    if j == 0:
                        continue
                    alias[op_key], alias[out] = base[k], self.out_key(base[k])
                    pairs = zip(self.inputs_of[op_key], self.inputs_of[base[k]])
                    for xk, x0k in pairs:  # a member's own leaves (its weights) become the first's
                        if self.producer[xk] is None and xk != x0k and xk not in alias:
                            if all(c in inside for c in self.consumers[xk]):
                                alias[xk] = x0k
                                membership[xk].append((r, j))
                if j:
                    hidden.append(member)
        edges, seen = [], set()
        for src, dst in self.edges:
            runs_src = dict(membership.get(src, ()))
            if any(runs_src.get(r, j) != j for r, j in membership.get(dst, ())):
                continue  # from one member into another: drawn once, the run says ×N
            edge = (alias.get(src, src), alias.get(dst, dst))
            if edge[0] != edge[1] and edge not in seen:
                seen.add(edge)
                edges.append(edge)
        nodes = {k: v for k, v in self.nodes.items() if k not in alias}
        self.drawn_from, self._call_cache = nodes, {}
        return nodes, edges, {run.members[0]: run for run in kept}

    # ---- collapsing modules ----------------------------------------------------------------

    def cut_at(self, depth, expanded) -> frozenset:
        """The modules drawn as boxes when the tree is opened down to `depth` (None: all the
        way), with the modules in `expanded` opened fully and their ancestors opened."""
        used = self.used_modules()
        cut = set()

        def visit(parent):
            for child in self.tree.children.get(parent, ()):
                if child not in used:
                    continue
                if any(within(e, child) for e in expanded):  # child is opened or on the way
                    if child not in expanded:
                        visit(child)
                elif depth is not None and self.tree.depth[child] >= depth:
                    cut.add(child)
                else:
                    visit(child)

        visit("")
        return frozenset(cut)

    def view(self, nodes, edges, runs, cut) -> View:
        """The picture with the modules in `cut` collapsed into boxes."""
        box_of_module = {}

        def box_of(name):
            if name is None:
                return None
            if name not in box_of_module:
                found = None
                for ancestor in reversed(self.tree.lineage(name)):
                    if ancestor in cut:
                        found = ("box", ancestor)
                        break
                box_of_module[name] = found
            return box_of_module[name]

        consumers = defaultdict(list)
        for src, dst in edges:
            if src[0] == "t":
                consumers[src].append(dst)
        rep, first_op = {}, {}
        for key in nodes:
            if key[0] == "op":
                box = box_of(self.module_of[key])
                if box is None:
                    rep[key] = key
                    continue
                rep[key] = ("box", box[1], *self.call_of(box[1], key))
                first_op.setdefault(rep[key], key)
        for key in nodes:
            if key[0] != "t":
                continue
            rep[key] = key
            if self.producer[key] is not None:
                producer = rep.get(self.producer[key], key)
                if producer[0] == "box" and key not in self.output_keys:
                    rep[key] = producer
            elif self.roles.get(key) in HIDEABLE_ROLES:
                users = {rep.get(c, c) for c in consumers[key]}
                if len(users) == 1 and next(iter(users))[0] == "box":
                    rep[key] = users.pop()
        view_nodes = {}
        for key in nodes:
            r = rep[key]
            if r not in view_nodes:
                view_nodes[r] = None
        view_edges, seen = [], set()
        flows = defaultdict(lambda: ([], []))  # box -> (tensors in, tensors out)
        for src, dst in edges:
            a, b = rep[src], rep[dst]
            if a == b:
                continue
            tensor = src if src[0] == "t" else dst
            if b[0] == "box" and self.roles.get(tensor) not in HIDEABLE_ROLES:
                _add_once(flows[b][0], tensor)
            if a[0] == "box":
                _add_once(flows[a][1], tensor)
            if (a, b) not in seen:
                seen.add((a, b))
                view_edges.append((a, b))
        for r in view_nodes:
            if r[0] == "box":
                box = self._box(r[1], flows[r], runs.get(r[1]), *r[2:])
                box.op_key = first_op[r]
                view_nodes[r] = box
            else:
                view_nodes[r] = nodes[r]
        return View(view_nodes, view_edges, cut, runs, folded=True)

    def call_of(self, module: str, op_key) -> tuple[int, int]:
        """(which call, how many calls) of `module` ran the op `op_key` ((1, 1) if not in it)."""
        if module not in self._call_cache:
            self._call_cache[module] = self._calls(module, self.drawn_from)
        return self._call_cache[module].get(op_key, (1, 1))

    def _calls(self, module, nodes):
        """op key -> (call number, number of calls) for the ops of `module`.

        A module called several times (one Dropout applied in three places, an embedding
        shared by encoder and decoder) records its module on the nodes of every call; the
        calls are told apart as the groups of its ops that are not connected to each other,
        numbered in the order they ran."""
        ops = [k for k in self.ops_in[module] if k in nodes]
        parent = {k: k for k in ops}

        def root(k):
            while parent[k] != k:
                parent[k] = parent[parent[k]]
                k = parent[k]
            return k

        for key in ops:
            for x_key in self.inputs_of[key]:
                producer = self.producer[x_key]
                if producer in parent:
                    parent[root(producer)] = root(key)
        groups = defaultdict(list)
        for key in ops:
            groups[root(key)].append(key)
        # the breadth-first order counts from the outputs: the call that ran first is farthest
        ordered = sorted(groups.values(), key=lambda g: -max(self.order[k] for k in g))
        return {k: (i + 1, len(ordered)) for i, group in enumerate(ordered) for k in group}

    def _box(self, name, flows, run, call=1, n_calls=1):
        module = self.tree.get(name)
        tensors_in, tensors_out = flows
        if hasattr(module, "named_parameters"):
            n_params = sum(int(p._array.size) for _, p in module.named_parameters())
        else:
            n_params = sum(
                int(self.nodes[k]._array.size)
                for k, role in self.roles.items()
                if role == "parameter" and within(self.owner_of_leaf(k) or "", name)
            )

        def shapes(keys):
            return [(tuple(self.nodes[k].shape), self.nodes[k].dtype) for k in keys]

        return Box(
            name, module, shapes(tensors_in), shapes(tensors_out), n_params, run, call, n_calls
        )


def _add_once(items, item):
    if item not in items:
        items.append(item)


def fold(folder: Folder, max_nodes: int, expanded=frozenset()) -> View:
    """The most detailed view with at most `max_nodes` nodes: everything when it fits; else
    runs drawn once, then the module tree collapsed from the leaves up, one level at a time.
    If even the top level is too big (or `expanded` asks for more), that view is returned
    whole: the module tree is the coarsest honest picture."""
    if len(folder.nodes) <= max_nodes or not folder.tree:
        return View(folder.nodes, folder.edges)
    # opened modules stand alone, and so do those that make an output (it must stay drawn)
    blocked = {
        m
        for m in folder.used_modules()
        if any(within(e, m) for e in expanded)
        or any(folder.out_key(op) in folder.output_keys for op in folder.ops_in[m])
    }
    nodes, edges, runs = folder.fold_runs(folder.find_runs(blocked))
    deepest = max((folder.tree.depth.get(m, 0) for m in folder.used_modules()), default=0)
    view = None
    for depth in [None, *range(deepest, 0, -1)]:
        view = folder.view(nodes, edges, runs, folder.cut_at(depth, expanded))
        if len(view.nodes) <= max_nodes:
            break
    return view
