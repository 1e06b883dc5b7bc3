// The graph as the page sees it: nodes, the module tree, which modules are folded, and the
// visible graph that folding leaves (each node shown as itself or as its outermost folded module).

export const nodeKey = (id) => `n${id}`;
export const moduleKey = (index) => `m${index}`;
export const clusterKey = (index) => `c${index}`;

export class GraphModel {
  constructor(data) {
    this.data = data;
    this.nodes = data.nodes;
    this.modules = data.modules;
    this.steps = data.steps || [];
    // ancestors[i]: module indices from the outermost down to module i itself
    this.ancestors = this.modules.map(() => null);
    this.modules.forEach((_, i) => this._ancestorsOf(i));
    this.children = this.modules.map(() => []);
    this.modules.forEach((m, i) => {
      if (m.parent !== null) this.children[m.parent].push(i);
    });
    this.flaggedModules = this._flaggedModules();
    this.unfolded = new Set();
    this.resetFolding();
  }

  _ancestorsOf(i) {
    if (this.ancestors[i]) return this.ancestors[i];
    const parent = this.modules[i].parent;
    const chain = parent === null ? [i] : [...this._ancestorsOf(parent), i];
    this.ancestors[i] = chain;
    return chain;
  }

  _flaggedModules() {
    const flags = this.modules.map(() => new Set());
    for (const node of this.nodes) {
      if (node.kind !== 'tensor' || !node.flags.length || node.module === null) continue;
      for (const m of this.ancestors[node.module]) node.flags.forEach((f) => flags[m].add(f));
    }
    return flags;
  }

  // A whole model opens folded to its top-level modules; a small graph opens unfolded.
  resetFolding() {
    this.unfolded.clear();
    if (this.nodes.length <= 60) this.modules.forEach((_, i) => this.unfolded.add(i));
  }

  isFolded(index) {
    return !this.unfolded.has(index);
  }

  toggle(index) {
    if (this.unfolded.has(index)) this.unfolded.delete(index);
    else this.unfolded.add(index);
  }

  // Unfolds every module around a node (or a module), so that it is drawn as itself.
  reveal(key) {
    const index = this.moduleOfKey(key);
    if (index === null) return;
    const chain = this.ancestors[index];
    const upTo = key.startsWith('m') ? chain.length - 1 : chain.length;
    for (let k = 0; k < upTo; k++) this.unfolded.add(chain[k]);
  }

  moduleOfKey(key) {
    const id = Number(key.slice(1));
    if (key.startsWith('n')) return this.nodes[id].module;
    return id;
  }

  // The key a node is drawn under: its outermost folded module, else the node itself.
  representative(id) {
    const m = this.nodes[id].module;
    if (m !== null) {
      for (const a of this.ancestors[m]) if (!this.unfolded.has(a)) return moduleKey(a);
    }
    return nodeKey(id);
  }

  // What to draw now: items (nodes and folded modules with their enclosing cluster), clusters
  // (unfolded modules that hold something visible) and edges between representatives.
  visibleGraph() {
    const rep = this.nodes.map((n) => this.representative(n.id));
    const items = new Map();
    const clusters = new Set();
    const addClusters = (moduleIndex) => {
      if (moduleIndex === null) return null;
      for (const a of this.ancestors[moduleIndex]) clusters.add(a);
      return moduleIndex;
    };
    for (const node of this.nodes) {
      const key = rep[node.id];
      if (items.has(key)) continue;
      if (key.startsWith('m')) {
        const index = Number(key.slice(1));
        const parent = this.modules[index].parent;
        items.set(key, { key, kind: 'module', module: index, cluster: addClusters(parent) });
      } else {
        items.set(key, { key, kind: node.kind, node, cluster: addClusters(node.module) });
      }
    }
    const edges = new Map();
    for (const [src, dst] of this.data.edges) {
      const a = rep[src];
      const b = rep[dst];
      if (a !== b) edges.set(`${a}>${b}`, [a, b]);
    }
    return { items: [...items.values()], clusters: [...clusters], edges: [...edges.values()], rep };
  }

  // "blocks.3 · EncoderBlock"; a plain list of alike modules reads "blocks · 48 × EncoderBlock"
  moduleLabel(index) {
    const m = this.modules[index];
    if (m.cls) return `${m.name} · ${m.cls}`;
    const kids = this.children[index];
    const first = kids.length ? this.modules[kids[0]] : null;
    if (first && first.repeat && first.repeat.count === kids.length) {
      return `${m.name} · ${kids.length} × ${first.cls}`;
    }
    return m.name;
  }

  tensorLabel(node) {
    return node.name || node.role;
  }

  shapeText(shape) {
    return `(${shape.join(', ')}${shape.length === 1 ? ',' : ''})`;
  }

  // Everything matching `query` by name: parameters and named tensors, modules, op names.
  search(query) {
    const q = query.trim().toLowerCase();
    if (!q) return [];
    const results = [];
    for (const node of this.nodes) {
      if (node.kind === 'tensor' && node.name && node.name.toLowerCase().includes(q)) {
        results.push({ key: nodeKey(node.id), text: node.name, what: node.role, exact: node.name.toLowerCase() === q });
      }
    }
    this.modules.forEach((m, i) => {
      if (m.name.toLowerCase().includes(q) || (m.cls && m.cls.toLowerCase() === q)) {
        results.push({ key: moduleKey(i), text: this.moduleLabel(i), what: 'module', exact: m.name.toLowerCase() === q });
      }
    });
    for (const node of this.nodes) {
      if (node.kind === 'op' && node.name.toLowerCase().includes(q)) {
        const where = node.module === null ? '' : ` in ${this.modules[node.module].name}`;
        results.push({ key: nodeKey(node.id), text: node.name + where, what: 'op', exact: node.name.toLowerCase() === q });
      }
    }
    // exact names first, then in the order found (parameters, modules, ops)
    return results.filter((r) => r.exact).concat(results.filter((r) => !r.exact));
  }
}
