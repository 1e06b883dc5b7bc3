// Small pieces of HTML for the inspector: numbers, statistics tables, histograms.

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

// Five significant digits: the page stores six, so what is shown is what was measured.
export function num(x) {
  if (x === null || x === undefined) return '—';
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (a >= 1e-3 && a < 1e5) return String(Number(x.toPrecision(5)));
  return x.toExponential(4).replace(/\.?0+e/, 'e'); // 2.5000e+5 reads 2.5e+5
}

const STAT_ROWS = [
  ['min', 'min'], ['max', 'max'], ['mean', 'mean'], ['std', 'std'], ['norm', '‖·‖₂'],
  ['nan', 'NaN'], ['inf', 'inf'],
];

export function statsTable(stats, part) {
  const rows = STAT_ROWS.map(([key, label]) => {
    const v = stats[key];
    const bad = (key === 'nan' || key === 'inf') && v > 0 ? ' class="bad"' : '';
    return `<tr${bad}><th>${label}</th><td data-stat="${key}">${key === 'nan' || key === 'inf' ? v : num(v)}</td></tr>`;
  });
  return `<table class="stats" data-part="${part}">${rows.join('')}</table>${histogram(stats.hist)}`;
}

export function histogram(hist) {
  if (!hist) return '<p class="muted">no finite values</p>';
  const w = 240;
  const h = 56;
  const peak = Math.max(...hist.counts, 1);
  const bw = w / hist.counts.length;
  const bars = hist.counts.map((c, i) => {
    const bh = c ? Math.max(1.5, (c / peak) * (h - 2)) : 0;
    return `<rect x="${(i * bw + 0.5).toFixed(1)}" y="${(h - bh).toFixed(1)}" width="${(bw - 1).toFixed(1)}" height="${bh.toFixed(1)}"><title>${c}</title></rect>`;
  });
  return `<svg class="hist" viewBox="0 0 ${w} ${h + 12}" width="${w}" height="${h + 12}">${bars.join('')}` +
    `<text x="0" y="${h + 11}">${esc(num(hist.lo))}</text><text x="${w}" y="${h + 11}" text-anchor="end">${esc(num(hist.hi))}</text></svg>`;
}

export function briefRow(label, g) {
  return `<tr class="name"><th colspan="4">${label}</th></tr>` +
    `<tr><td>${num(g.norm)}</td><td>${num(g.min)}</td><td>${num(g.max)}</td><td>${num(g.mean)}</td></tr>`;
}
