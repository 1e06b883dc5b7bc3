// Draws a laid-out graph as SVG: module boxes, edges, then nodes on top. Every drawn node carries
// data-key ("n12" for graph node 12, "m3" for folded module 3, "c3" for unfolded module 3's box)
// so that clicks, highlights and tests find it.

import { itemLines } from './layout.js';

const SVG = 'http://www.w3.org/2000/svg';
const FLAG_BADGES = { nan: 'NaN', inf: '∞', exploding: '↑grad', vanishing: '↓grad' };

function el(name, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function text(parent, x, y, content, cls) {
  const t = el('text', { x, y, class: cls }, parent);
  t.textContent = content;
  return t;
}

export function addArrowMarker(svg) {
  const defs = el('defs', {}, svg);
  const marker = el('marker', {
    id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse',
  }, defs);
  el('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }, marker);
}

export function render(viewport, visible, placed, model) {
  viewport.replaceChildren();
  const clusterLayer = el('g', { class: 'clusters' }, viewport);
  const edgeLayer = el('g', { class: 'edges' }, viewport);
  const nodeLayer = el('g', { class: 'nodes' }, viewport);

  // outer boxes first, so inner ones are drawn over them
  const depth = (c) => model.ancestors[c].length;
  for (const c of [...visible.clusters].sort((a, b) => depth(a) - depth(b))) {
    const box = placed.boxes.get(`c${c}`);
    if (!box) continue;
    const g = el('g', { class: `cluster depth${Math.min(depth(c), 4)}`, 'data-key': `c${c}` }, clusterLayer);
    const x = box.x - box.width / 2;
    const y = box.y - box.height / 2;
    el('rect', { x, y, width: box.width, height: box.height, rx: 8 }, g);
    const toggle = el('g', { class: 'toggle', 'data-toggle': c }, g);
    el('rect', { x: x + 4, y: y + 3, width: 12, height: 12, rx: 2 }, toggle);
    text(toggle, x + 10, y + 13, '−', 'toggle-sign');
    text(g, x + 20, y + 13, model.moduleLabel(c), 'cluster-label');
  }

  for (const edge of placed.edges) {
    const d = edge.points.map((p, i) => `${i ? 'L' : 'M'}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join('');
    el('path', { d, class: 'edge', 'data-from': edge.from, 'data-to': edge.to, 'marker-end': 'url(#arrow)' }, edgeLayer);
  }

  for (const item of visible.items) {
    const box = placed.boxes.get(item.key);
    drawItem(nodeLayer, item, box, model);
  }
}

function drawItem(layer, item, box, model) {
  const classes = ['node', item.kind];
  let flags = [];
  if (item.kind === 'tensor') {
    classes.push(item.node.role);
    flags = item.node.flags;
  } else if (item.kind === 'module') {
    flags = [...model.flaggedModules[item.module]];
    if (model.modules[item.module].repeat) classes.push('repeated');
  }
  flags.forEach((f) => classes.push(`flag-${f}`));
  const g = el('g', { class: classes.join(' '), 'data-key': item.key }, layer);
  const x = box.x - box.width / 2;
  const y = box.y - box.height / 2;
  const lines = itemLines(item, model);
  if (item.kind === 'op') {
    el('rect', { x, y, width: box.width, height: box.height, rx: box.height / 2 }, g);
  } else if (item.kind === 'module') {
    el('rect', { x, y, width: box.width, height: box.height, rx: 5, class: 'module-box' }, g);
    const toggle = el('g', { class: 'toggle', 'data-toggle': item.module }, g);
    el('rect', { x: x + 5, y: box.y - 7, width: 14, height: 14, rx: 2 }, toggle);
    text(toggle, x + 12, box.y + 4, '+', 'toggle-sign');
  } else {
    el('rect', { x, y, width: box.width, height: box.height, rx: item.node.role === 'intermediate' ? 6 : 2 }, g);
  }
  const cx = item.kind === 'module' ? box.x + 10 : box.x;
  const top = box.y - (lines.length - 1) * 7 + 4;
  lines.forEach((line, i) => text(g, cx, top + 14 * i, line, i === 0 ? 'label' : 'sublabel'));
  if (flags.length) {
    const badge = flags.map((f) => FLAG_BADGES[f]).join(' ');
    const b = el('g', { class: 'badge' }, g);
    const w = badge.length * 6 + 8;
    el('rect', { x: x + box.width - w + 4, y: y - 8, width: w, height: 13, rx: 6 }, b);
    text(b, x + box.width - w / 2 + 4, y + 2, badge, 'badge-text');
  }
}
