// Lays out the visible graph with dagre (layered, top to bottom in computing order); unfolded
// modules are dagre's compound nodes, so each one is a box around its contents.

import dagre from '@dagrejs/dagre';
import { num } from './format.js';

const CHAR_WIDTH = 6.6; // px per character at the page's 11px font; dagre needs sizes up front

export function itemSize(item, model) {
  const lines = itemLines(item, model);
  const longest = Math.max(...lines.map((l) => l.length));
  const width = Math.max(44, Math.ceil(longest * CHAR_WIDTH) + (item.kind === 'module' ? 36 : 18));
  const height = item.kind === 'op' ? 24 : 10 + 14 * lines.length;
  return { width, height };
}

// The text lines drawn in a node (render.js draws exactly these).
export function itemLines(item, model) {
  if (item.kind === 'module') {
    const m = model.modules[item.module];
    const second = [`${m.ops_total ?? m.ops} ops`];
    if (m.repeat) second.push(`${m.repeat.index + 1} of ${m.repeat.count} alike`);
    return [model.moduleLabel(item.module), second.join(' · ')];
  }
  const node = item.node;
  if (item.kind === 'op') return [node.name];
  const shape = model.shapeText(node.shape);
  if (node.role === 'intermediate') return [shape];
  const name = model.tensorLabel(node);
  const shown = node.value.size === 1 && node.value.mean !== null && node.role !== 'input';
  const scalar = shown ? ` = ${num(node.value.mean)}` : ''; // a constant's name has its value
  return [name + scalar, `${shape} ${node.dtype}`];
}

export function layout(visible, model) {
  const g = new dagre.graphlib.Graph({ compound: true, multigraph: false });
  g.setGraph({ rankdir: 'TB', nodesep: 16, ranksep: 26, marginx: 24, marginy: 24 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const c of visible.clusters) {
    g.setNode(`c${c}`, { cluster: c });
    const parent = model.modules[c].parent;
    if (parent !== null) g.setParent(`c${c}`, `c${parent}`);
  }
  for (const item of visible.items) {
    g.setNode(item.key, { ...itemSize(item, model) });
    if (item.cluster !== null) g.setParent(item.key, `c${item.cluster}`);
  }
  for (const [a, b] of visible.edges) g.setEdge(a, b);
  addClusterTitles(g, visible, model);
  dagre.layout(g);
  const boxes = new Map();
  for (const key of g.nodes()) {
    if (key.startsWith('title')) continue;
    const n = g.node(key);
    boxes.set(key, { x: n.x, y: n.y, width: n.width, height: n.height });
  }
  const edges = visible.edges.map(([a, b]) => ({ from: a, to: b, points: g.edge(a, b).points }));
  const { width, height } = g.graph();
  return { boxes, edges, width, height };
}

// dagre has no room for a cluster's title: an invisible node the title's size, placed above the
// cluster's contents by edges, keeps the first row free for it. Only the members nothing inside
// the cluster leads to get such an edge: the others are below those anyway, and an edge to every
// member would add long-edge dummies by the thousand in a 48-block model.
function addClusterTitles(g, visible, model) {
  const path = new Map(); // drawn key -> the clusters around it, outermost first
  for (const item of visible.items) path.set(item.key, item.cluster === null ? [] : model.ancestors[item.cluster]);
  // the member of cluster `path[depth]` that holds `key`: a child cluster's title, or the item
  const memberAt = (key, p, depth) => (depth + 1 < p.length ? `title${p[depth + 1]}` : key);
  const led = new Set(); // "c|member" pairs with a predecessor inside cluster c
  for (const [a, b] of visible.edges) {
    const pa = path.get(a);
    const pb = path.get(b);
    for (let d = 0; d < Math.min(pa.length, pb.length) && pa[d] === pb[d]; d++) {
      const ma = memberAt(a, pa, d);
      const mb = memberAt(b, pb, d);
      if (ma !== mb) led.add(`${pa[d]}|${mb}`);
    }
  }
  const members = new Map(visible.clusters.map((c) => [c, []]));
  for (const item of visible.items) if (item.cluster !== null) members.get(item.cluster).push(item.key);
  for (const c of visible.clusters) {
    const parent = model.modules[c].parent;
    if (parent !== null) members.get(parent).push(`title${c}`);
    const width = Math.ceil(model.moduleLabel(c).length * CHAR_WIDTH) + 30;
    g.setNode(`title${c}`, { width, height: 4 });
    g.setParent(`title${c}`, `c${c}`);
  }
  for (const c of visible.clusters) {
    for (const key of members.get(c)) {
      if (!led.has(`${c}|${key}`)) g.setEdge(`title${c}`, key, { weight: 0, minlen: 1 });
    }
  }
}
