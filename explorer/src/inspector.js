// The inspector panel: what a clicked op, tensor or module is, and what a backward step did.
// Links carry data-goto="<key>"; main.js reveals and selects what they point to.

import { briefRow, esc, num, statsTable } from './format.js';
import { moduleKey, nodeKey } from './model.js';

const ROLE_TEXT = {
  parameter: 'parameter (a leaf the optimizer updates)',
  input: 'input / constant (no gradient)',
  leaf: 'leaf that requires grad',
  intermediate: 'intermediate (made by an op)',
  output: 'output',
};

function link(model, key) {
  const id = Number(key.slice(1));
  let label;
  if (key.startsWith('m')) label = model.moduleLabel(id);
  else {
    const n = model.nodes[id];
    if (n.kind === 'op') label = n.name;
    else if (n.role === 'intermediate') label = `${model.shapeText(n.shape)} from ${model.nodes[n.producer].name}`;
    else label = `${model.tensorLabel(n)} ${model.shapeText(n.shape)}`;
  }
  return `<a href="#" data-goto="${key}">${esc(label)}</a>`;
}

function moduleRow(model, index) {
  return index === null ? '<td>(top level)</td>' : `<td>${link(model, moduleKey(index))}</td>`;
}

export function tensorHtml(model, node) {
  const rows = [
    `<tr><th>role</th><td data-field="role">${esc(ROLE_TEXT[node.role] || node.role)}</td></tr>`,
    `<tr><th>shape</th><td data-field="shape">${esc(model.shapeText(node.shape))}</td></tr>`,
    `<tr><th>dtype</th><td data-field="dtype">${esc(node.dtype)}</td></tr>`,
    `<tr><th>module</th>${moduleRow(model, node.module)}</tr>`,
  ];
  if (node.producer !== null) rows.push(`<tr><th>made by</th><td>${link(model, nodeKey(node.producer))}</td></tr>`);
  if (node.used_by.length) {
    rows.push(`<tr><th>used by</th><td>${node.used_by.map((i) => link(model, nodeKey(i))).join(', ')}</td></tr>`);
  }
  const flags = node.flags.length
    ? `<p class="flags" data-field="flags">${node.flags.map((f) => `<span class="flag flag-${f}">${f}</span>`).join(' ')}</p>`
    : '';
  let grad;
  if (node.grad) grad = statsTable(node.grad, 'grad');
  else if (!node.requires_grad) grad = '<p class="muted">none: this tensor does not require grad</p>';
  else grad = `<p class="muted">none recorded (${esc(model.data.backward_note)})</p>`;
  const title = node.role === 'intermediate' && !node.name
    ? `${model.shapeText(node.shape)} from ${model.nodes[node.producer].name}`
    : model.tensorLabel(node);
  return `<h2 data-field="title">${esc(title)}</h2><p class="kind">tensor</p>${flags}` +
    `<table class="fields">${rows.join('')}</table>` +
    `<h3>value</h3>${statsTable(node.value, 'value')}<h3>gradient dL/d(this)</h3>${grad}`;
}

export function opHtml(model, node) {
  const args = Object.entries(node.args);
  const argRows = args.length
    ? args.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(JSON.stringify(v))}</td></tr>`).join('')
    : '<tr><td class="muted">none kept by the op</td></tr>';
  const inputs = node.inputs.map((i, k) => {
    const t = model.nodes[i];
    const needs = node.needs_input_grad[k] ? '' : ' <span class="muted">(no grad)</span>';
    return `<tr><th>${k}</th><td>${link(model, nodeKey(i))} ${esc(t.dtype)}${needs}</td></tr>`;
  }).join('');
  const out = model.nodes[node.output];
  const step = model.stepOfNode.get(node.id);
  const stepText = step === undefined ? 'not run (no gradient reached it)' : `step ${step + 1} of ${model.steps.length}`;
  return `<h2 data-field="title">${esc(node.name)}</h2><p class="kind">op</p>` +
    `<table class="fields"><tr><th>module</th>${moduleRow(model, node.module)}</tr>` +
    `<tr><th>backward</th><td>${stepText}</td></tr></table>` +
    `<h3>VJP</h3><p class="math" data-field="math">${esc(node.math || '(no docstring)')}</p>` +
    `<h3>arguments</h3><table class="fields">${argRows}</table>` +
    `<h3>inputs</h3><table class="fields">${inputs}</table>` +
    `<h3>output</h3><p>${link(model, nodeKey(out.id))} ${esc(out.dtype)}</p>`;
}

export function moduleHtml(model, index) {
  const m = model.modules[index];
  const params = model.nodes.filter((n) => n.kind === 'tensor' && n.role === 'parameter' && n.module !== null && model.ancestors[n.module].includes(index));
  const repeat = m.repeat
    ? `<p data-field="repeat">${m.repeat.index + 1} of ${m.repeat.count} alike: same class, ops and submodules as ${link(model, moduleKey(m.repeat.first))}</p>`
    : '';
  const flags = [...model.flaggedModules[index]];
  const flagText = flags.length ? `<p class="flags">inside: ${flags.map((f) => `<span class="flag flag-${f}">${f}</span>`).join(' ')}</p>` : '';
  const list = params.slice(0, 40).map((p) => `<li>${link(model, nodeKey(p.id))}</li>`).join('');
  const more = params.length > 40 ? `<li class="muted">and ${params.length - 40} more</li>` : '';
  return `<h2 data-field="title">${esc(m.name)}</h2><p class="kind">module ${esc(m.cls)}</p>${repeat}${flagText}` +
    `<p>${m.ops} ops inside · <button data-toggle-module="${index}">${model.isFolded(index) ? 'unfold' : 'fold'}</button></p>` +
    `<h3>parameters (${params.length})</h3><ul>${list}${more}</ul>`;
}

const HEAD = '<tr><th>‖g‖</th><th>min</th><th>max</th><th>mean</th></tr>';

export function stepHtml(model, index) {
  if (index < 0) {
    const root = model.nodes[model.nodes[model.steps[0].node].output];
    return `<h2 data-field="title">before backward</h2><p class="kind">step 0 of ${model.steps.length}</p>` +
      `<p>backward seeds dL/d${esc(model.tensorLabel(root))} = 1 and then runs one VJP per op, ` +
      'outputs before inputs. Press → to run the first.</p>';
  }
  const step = model.steps[index];
  const node = model.nodes[step.node];
  const out = model.nodes[node.output];
  const sends = step.sends.map((s) => {
    const acc = s.of > 1 ? `<span class="acc" data-field="accumulates">adds ${s.k} of ${s.of}</span>` : '';
    return `<tr class="name"><th colspan="4">input ${s.input}: ${link(model, nodeKey(s.to))} ${acc}</th></tr>` +
      `<tr><td>${num(s.grad.norm)}</td><td>${num(s.grad.min)}</td><td>${num(s.grad.max)}</td><td>${num(s.grad.mean)}</td></tr>`;
  }).join('');
  const where = node.module === null ? 'top level' : model.modules[node.module].name;
  return `<h2 data-field="title">${esc(node.name)}</h2><p class="kind" data-field="step">step ${index + 1} of ${model.steps.length} · ${esc(where)}</p>` +
    `<p class="math">${esc(node.math)}</p>` +
    `<h3>gradient arriving at the output</h3><table class="brief" data-part="arriving">${HEAD}` +
    `${briefRow(link(model, nodeKey(out.id)), step.grad)}</table>` +
    `<h3>gradients sent to the inputs</h3><table class="brief" data-part="sent">${HEAD}${sends || '<tr><td>none</td></tr>'}</table>` +
    '<p class="muted">"adds k of n": the input is used n times; its gradient is the sum of n contributions.</p>';
}
