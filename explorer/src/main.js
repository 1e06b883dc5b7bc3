// The explorer page: reads the graph data embedded by tinytensor.explore, draws it folded to the
// top-level modules, and wires folding, selection, search and backward stepping.

import svgPanZoom from 'svg-pan-zoom';
import { moduleHtml, opHtml, stepHtml, tensorHtml } from './inspector.js';
import { layout } from './layout.js';
import { GraphModel, nodeKey } from './model.js';
import { addArrowMarker, render } from './render.js';

const SVG = 'http://www.w3.org/2000/svg';

function buildPage(model) {
  const d = model.data;
  const ops = d.nodes.filter((n) => n.kind === 'op').length;
  document.body.innerHTML = `
  <header>
    <h1>${d.title ? d.title.replace(/[<&]/g, '') : 'graph'}</h1>
    <span class="counts">${ops} ops · ${d.nodes.length - ops} tensors · ${d.modules.length} modules · ${d.steps.length} backward steps</span>
    <div class="search"><input id="search" type="search" placeholder="search parameter, op or module  ( / )" autocomplete="off"><ul id="results" hidden></ul></div>
    <button id="fit" title="fit the graph to the window (f)">fit</button>
    <button id="fold-all" title="fold every module">fold all</button>
    <button id="backward" title="step through backward (← →)" ${d.steps.length ? '' : 'disabled'}>backward ▸</button>
  </header>
  <main>
    <div id="canvas"><svg id="graph" xmlns="${SVG}"><g class="viewport"></g></svg>
    </div>
    <aside><div id="inspector"><p class="muted">Click an op, a tensor or a module. Click + / − to unfold or fold a module; search with /; step through backward with the button or the → key.</p></div>
      <div class="legend"><span class="op">op</span><span class="parameter">parameter</span><span class="input">input</span><span class="leaf">leaf</span><span class="intermediate">intermediate</span><span class="output">output</span><span class="module">folded module (+)</span><span class="flagged">NaN / inf / ↑↓ grad</span></div>
    </aside>
  </main>
  <footer id="stepper" hidden>
    <button id="step-prev" title="previous step (←)">◀</button>
    <input id="step-slider" type="range" min="0" max="${d.steps.length}" value="0">
    <button id="step-next" title="next step (→)">▶</button>
    <span id="step-label"></span>
    <label><input id="step-follow" type="checkbox"> unfold to follow</label>
  </footer>`;
}

class Explorer {
  constructor(data) {
    this.model = new GraphModel(data);
    this.model.stepOfNode = new Map(this.model.steps.map((s, i) => [s.node, i]));
    buildPage(this.model);
    this.svg = document.getElementById('graph');
    addArrowMarker(this.svg);
    this.viewport = this.svg.querySelector('.viewport');
    this.inspector = document.getElementById('inspector');
    this.selected = null;
    this.step = null; // null: not stepping; -1 .. steps-1 while stepping
    this.searchHits = new Set();
    this.panZoom = null;
    this.redraw({ fit: true });
    this.wire();
  }

  redraw({ fit = false, focus = null } = {}) {
    this.visible = this.model.visibleGraph();
    this.placed = layout(this.visible, this.model);
    render(this.viewport, this.visible, this.placed, this.model);
    if (!this.panZoom) {
      this.panZoom = svgPanZoom(this.svg, {
        viewportSelector: '.viewport', fit: true, center: true, minZoom: 0.01, maxZoom: 40,
        zoomScaleSensitivity: 0.25, dblClickZoomEnabled: false, controlIconsEnabled: false,
      });
    } else {
      this.panZoom.updateBBox();
    }
    if (fit) this.fit();
    else if (focus) this.centerOn(this.drawnKeyOf(focus)); // resolved in the new drawing
    this.applyClasses();
  }

  fit() {
    this.panZoom.resize();
    this.panZoom.updateBBox();
    this.panZoom.fit();
    this.panZoom.center();
    // a margin for the legend, and no giant nodes when the graph is small
    this.panZoom.zoom(Math.min(this.panZoom.getZoom() * 0.92, 1.6));
  }

  // Pans so that the drawn item `key` sits in the middle; zooms in to readable size if needed.
  centerOn(key) {
    const box = this.placed.boxes.get(key);
    if (!box) return;
    const sizes = this.panZoom.getSizes();
    if (sizes.realZoom < 0.6) this.panZoom.zoom(this.panZoom.getZoom() * (0.9 / sizes.realZoom));
    const z = this.panZoom.getSizes().realZoom;
    // a tall module box: show its top (where its inputs come in), not its middle
    const top = box.y - box.height / 2;
    const y = key.startsWith('c') ? top + Math.min(box.height / 2, (sizes.height / 2 - 30) / z) : box.y;
    this.panZoom.pan({ x: sizes.width / 2 - box.x * z, y: sizes.height / 2 - y * z });
  }

  drawnKeyOf(key) {
    if (key.startsWith('n')) return this.visible.rep[Number(key.slice(1))];
    if (key.startsWith('m') && !this.model.isFolded(Number(key.slice(1)))) return `c${key.slice(1)}`;
    return key;
  }

  // ---- selection and inspector --------------------------------------------------------------

  select(key, { reveal = false } = {}) {
    if (reveal) {
      this.model.reveal(key);
      this.redraw({ focus: key });
    }
    this.selected = key;
    const id = Number(key.slice(1));
    if (key.startsWith('n')) {
      const node = this.model.nodes[id];
      this.inspector.innerHTML = node.kind === 'op' ? opHtml(this.model, node) : tensorHtml(this.model, node);
    } else {
      this.inspector.innerHTML = moduleHtml(this.model, id);
    }
    this.inspector.dataset.key = key;
    this.applyClasses();
  }

  toggleModule(index) {
    this.model.toggle(index);
    this.redraw({ focus: `m${index}` });
    if (this.selected === `m${index}`) this.select(`m${index}`);
  }

  // ---- highlights ---------------------------------------------------------------------------

  applyClasses() {
    const marks = new Map(); // drawn key -> classes
    const mark = (key, cls) => {
      const drawn = this.drawnKeyOf(key);
      if (!marks.has(drawn)) marks.set(drawn, new Set());
      marks.get(drawn).add(cls);
    };
    if (this.selected) mark(this.selected, 'selected');
    for (const key of this.searchHits) mark(key, 'search-hit');
    if (this.step !== null) {
      const steps = this.model.steps;
      for (let i = 0; i < this.step; i++) mark(nodeKey(steps[i].node), 'bw-done');
      if (this.step >= 0) {
        const s = steps[this.step];
        mark(nodeKey(this.model.nodes[s.node].output), 'bw-arriving');
        for (const send of s.sends) mark(nodeKey(send.to), 'bw-receiving');
        mark(nodeKey(s.node), 'bw-current');
      }
    }
    const all = ['selected', 'search-hit', 'bw-done', 'bw-arriving', 'bw-receiving', 'bw-current'];
    for (const g of this.viewport.querySelectorAll('[data-key]')) {
      const want = marks.get(g.dataset.key);
      for (const cls of all) g.classList.toggle(cls, Boolean(want && want.has(cls)));
    }
  }

  // ---- backward stepping --------------------------------------------------------------------

  setStepping(on) {
    this.step = on ? -1 : null;
    document.getElementById('stepper').hidden = !on;
    document.getElementById('backward').classList.toggle('active', on);
    document.body.classList.toggle('stepping', on);
    if (on) this.goToStep(-1);
    else {
      this.inspector.innerHTML = '';
      this.applyClasses();
    }
  }

  goToStep(index) {
    const n = this.model.steps.length;
    this.step = Math.max(-1, Math.min(n - 1, index));
    document.getElementById('step-slider').value = String(this.step + 1);
    const label = document.getElementById('step-label');
    if (this.step < 0) label.textContent = `0 / ${n}: before backward`;
    else {
      const node = this.model.nodes[this.model.steps[this.step].node];
      label.textContent = `${this.step + 1} / ${n}: ${node.name}`;
    }
    label.dataset.node = this.step < 0 ? '' : String(this.model.steps[this.step].node);
    this.inspector.innerHTML = stepHtml(this.model, this.step);
    this.inspector.dataset.key = this.step < 0 ? '' : nodeKey(this.model.steps[this.step].node);
    if (this.step >= 0) {
      const key = nodeKey(this.model.steps[this.step].node);
      if (document.getElementById('step-follow').checked && this.drawnKeyOf(key) !== key) {
        this.model.reveal(key);
        this.redraw({ focus: key });
      } else {
        this.centerOn(this.drawnKeyOf(key));
      }
    }
    this.applyClasses();
  }

  // ---- search -------------------------------------------------------------------------------

  runSearch(query) {
    const results = this.model.search(query);
    this.searchHits = new Set(results.map((r) => r.key));
    const list = document.getElementById('results');
    list.hidden = results.length === 0 && !query.trim();
    const shown = results.slice(0, 60).map((r) => `<li data-goto="${r.key}"><b>${r.text.replace(/[<&]/g, '')}</b> <span>${r.what}</span></li>`);
    if (!results.length && query.trim()) shown.push('<li class="muted">no match</li>');
    if (results.length > 60) shown.push(`<li class="muted">and ${results.length - 60} more</li>`);
    list.innerHTML = shown.join('');
    this.applyClasses();
    return results;
  }

  wire() {
    this.svg.addEventListener('click', (e) => {
      const toggle = e.target.closest('[data-toggle]');
      if (toggle) return this.toggleModule(Number(toggle.dataset.toggle));
      const node = e.target.closest('.node[data-key]');
      if (node) return this.select(node.dataset.key);
      const cluster = e.target.closest('.cluster[data-key]');
      if (cluster) this.select(`m${cluster.dataset.key.slice(1)}`);
    });
    this.svg.addEventListener('dblclick', (e) => {
      const node = e.target.closest('.node.module[data-key]');
      if (node) this.toggleModule(Number(node.dataset.key.slice(1)));
    });
    this.inspector.addEventListener('click', (e) => {
      const goto = e.target.closest('[data-goto]');
      if (goto) {
        e.preventDefault();
        this.select(goto.dataset.goto, { reveal: true });
      }
      const toggle = e.target.closest('[data-toggle-module]');
      if (toggle) this.toggleModule(Number(toggle.dataset.toggleModule));
    });
    document.getElementById('fit').onclick = () => this.fit();
    document.getElementById('fold-all').onclick = () => {
      this.model.unfolded.clear();
      this.redraw({ fit: true });
    };
    document.getElementById('backward').onclick = () => this.setStepping(this.step === null);
    document.getElementById('step-prev').onclick = () => this.goToStep(this.step - 1);
    document.getElementById('step-next').onclick = () => this.goToStep(this.step + 1);
    document.getElementById('step-slider').oninput = (e) => this.goToStep(Number(e.target.value) - 1);

    const search = document.getElementById('search');
    const list = document.getElementById('results');
    search.addEventListener('input', () => this.runSearch(search.value));
    search.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') {
        const first = this.runSearch(search.value)[0];
        if (first) this.select(first.key, { reveal: true });
        list.hidden = true;
      } else if (e.key === 'Escape') {
        search.value = '';
        this.runSearch('');
        list.hidden = true;
        search.blur();
      }
    });
    list.addEventListener('click', (e) => {
      const item = e.target.closest('[data-goto]');
      if (!item) return;
      this.select(item.dataset.goto, { reveal: true });
      list.hidden = true;
    });

    document.addEventListener('keydown', (e) => {
      if (e.target.tagName === 'INPUT' && e.target.type !== 'checkbox' && e.target.type !== 'range') return;
      if (e.key === '/') {
        e.preventDefault();
        search.focus();
      } else if (e.key === 'f') this.fit();
      else if (e.key === 'ArrowRight' || e.key === 'ArrowLeft' || e.key === 'Home' || e.key === 'End') {
        if (!this.model.steps.length) return;
        e.preventDefault();
        if (this.step === null) this.setStepping(true);
        const n = this.model.steps.length;
        const next = { ArrowRight: this.step + 1, ArrowLeft: this.step - 1, Home: -1, End: n - 1 }[e.key];
        this.goToStep(next);
      }
    });
    window.addEventListener('resize', () => this.panZoom.resize());
  }
}

const data = JSON.parse(document.getElementById('tt-graph').textContent);
window.ttExplorer = new Explorer(data);
