// Bundles the explorer's browser code into ../tinytensor/explore/static (committed: users and CI
// need no npm). Writes explorer.js (one IIFE, minified), explorer.css, and THIRD_PARTY_LICENSES.txt
// with the licence of every npm package the bundle contains (found from esbuild's metafile).
// The first line of explorer.js records a hash of the sources, which a Python test checks, so a
// source edit without a rebuild fails CI.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'tinytensor', 'explore', 'static');

export function sourceHash() {
  const hash = createHash('sha256');
  const files = ['package-lock.json', ...readdirSync(join(here, 'src')).sort().map((f) => `src/${f}`)];
  for (const f of files) hash.update(`${f}\n`).update(readFileSync(join(here, f)));
  return hash.digest('hex');
}

const result = await esbuild.build({
  entryPoints: [join(here, 'src', 'main.js')],
  bundle: true, minify: true, format: 'iife', target: ['es2020'], metafile: true, write: false,
  legalComments: 'none', // the licences go, whole, into THIRD_PARTY_LICENSES.txt
});
const banner = `/* tinytensor explorer bundle; sources sha256 ${sourceHash()}; licences: THIRD_PARTY_LICENSES.txt */\n`;
writeFileSync(join(out, 'explorer.js'), banner + result.outputFiles[0].text);

const css = await esbuild.build({ entryPoints: [join(here, 'src', 'explorer.css')], minify: true, write: false });
writeFileSync(join(out, 'explorer.css'), css.outputFiles[0].text);

const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (m) packages.add(m[1]);
}
// A package's dist may inline its own dependencies (dagre's carries graphlib): list those too.
for (const name of [...packages]) {
  const meta = JSON.parse(readFileSync(join(here, 'node_modules', name, 'package.json'), 'utf8'));
  Object.keys(meta.dependencies || {}).forEach((dep) => packages.add(dep));
}
const sections = [...packages].sort().map((name) => {
  const dir = join(here, 'node_modules', name);
  const meta = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const file = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  if (!file) throw new Error(`${name} has no licence file: add its licence text by hand`);
  return `${name} ${meta.version} (${meta.license})\n${'='.repeat(60)}\n${readFileSync(join(dir, file), 'utf8').trim()}\n`;
});
writeFileSync(join(out, 'THIRD_PARTY_LICENSES.txt'),
  'The explorer page bundles these npm packages (explorer/package-lock.json pins them).\n\n' + sections.join('\n\n'));
console.log(`bundled (with licences) ${[...packages].sort().join(', ')}: explorer.js ${result.outputFiles[0].text.length} bytes`);
