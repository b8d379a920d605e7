#!/usr/bin/env node
// The table of the `compare` step of scripts/bundle-webgpu-gpu.sh's run.sh: llamaweb on WebGPU
// (`node web/cli.mjs bench`) against llama.cpp's Vulkan build (bench/llama-bench-c --json), from the outputs
// that run.sh keeps, one file per engine and round:
//   DIR/LABEL.web.ROUND.txt     `node web/cli.mjs bench -p P -n N` (its result row: | pp | tg | dispatches | per layer |)
//   DIR/LABEL.llama.ROUND.txt   `llama-bench-c ... --json` (its JSON line: pp_median, tg_median, ...)
//
//   node bench/gpu-compare.mjs DIR [LABEL...] [--rows-only] [--json FILE]
//
// Prints one row per LABEL (default: every label in DIR, in the order its first file was written): each
// engine's median over its rounds (each round's value is already that run's median over its repetitions) of
// pp and tg tokens/s, and the ratios llamaweb / llama.cpp (> 1: llamaweb faster). A round whose output has no
// result counts as missing; its last line is printed under the table, so a failed run says why.
// --rows-only leaves out the header (run.sh prints rows as models finish, then the whole table); --json
// writes the rows as a JSON array as well.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

function usage() {
  console.error('usage: node bench/gpu-compare.mjs DIR [LABEL...] [--rows-only] [--json FILE]');
  process.exit(2);
}

const args = process.argv.slice(2);
let dir = null, rowsOnly = false, jsonOut = null;
const labels = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--rows-only') rowsOnly = true;
  else if (args[i] === '--json') jsonOut = args[++i] ?? usage();
  else if (args[i].startsWith('-')) usage();
  else if (dir === null) dir = args[i];
  else labels.push(args[i]);
}
if (dir === null) usage();

// "LABEL.ENGINE.ROUND.txt" -> parts; other files are not ours.
const NAME = /^(.+)\.(web|llama)\.(\d+)\.txt$/;
const files = readdirSync(dir).filter((f) => NAME.test(f))
  .map((f) => ({ f, m: NAME.exec(f), t: statSync(join(dir, f)).mtimeMs }))
  .sort((a, b) => a.t - b.t);
if (labels.length === 0) for (const { m } of files) if (!labels.includes(m[1])) labels.push(m[1]);

// One engine's result from one output: { pp, tg, nP, nG, extra } or { fail: last line }.
function parseWeb(text) {
  const head = /\|\s*pp(\d+) t\/s\s*\|\s*tg(\d+) t\/s\s*\|/.exec(text);
  const row = /^\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*(\d+)\s*\|/m.exec(text);
  if (!head || !row) return null;
  return { pp: Number(row[1]), tg: Number(row[2]), nP: Number(head[1]), nG: Number(head[2]), dispatches: Number(row[3]) };
}
function parseLlama(text) {
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const j = JSON.parse(line);
      if (j.engine !== 'llama.cpp') continue;
      const dev = /^devices: (.*)$/m.exec(text);
      return { pp: j.pp_median, tg: j.tg_median, nP: j.n_prompt, nG: j.n_gen, depth: j.gen_depth, ngl: j.n_gpu_layers,
        fa: j.flash_attn, devices: dev ? dev[1] : '' };
    } catch { /* not the result line */ }
  }
  return null;
}
const lastLine = (text) => text.trim().split('\n').filter((l) => l.trim()).pop() || '(no output)';

// Median (mean of the middle two for an even count), or null for none.
function median(v) {
  if (v.length === 0) return null;
  const s = [...v].sort((x, y) => x - y), h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

const notes = [], rows = [];
for (const label of labels) {
  const r = { model: label, web: [], llama: [] };
  for (const { f, m } of files) {
    if (m[1] !== label) continue;
    const text = readFileSync(join(dir, f), 'utf8');
    const res = m[2] === 'web' ? parseWeb(text) : parseLlama(text);
    if (res) r[m[2]].push(res);
    else notes.push(`${label} ${m[2] === 'web' ? 'llamaweb' : 'llama.cpp'} round ${m[3]}: no result: ${lastLine(text)}`);
  }
  const med = (eng, k) => median(r[eng].map((x) => x[k]));
  const row = {
    model: label, rounds_web: r.web.length, rounds_llama: r.llama.length,
    n_prompt: (r.web[0] || r.llama[0] || {}).nP ?? null, n_gen: (r.web[0] || r.llama[0] || {}).nG ?? null,
    web_pp: med('web', 'pp'), llama_pp: med('llama', 'pp'), web_tg: med('web', 'tg'), llama_tg: med('llama', 'tg'),
    web_dispatches: r.web.length ? r.web[0].dispatches : null, llama_gen_depth: r.llama.length ? r.llama[0].depth : null,
    llama_devices: r.llama.length ? r.llama[0].devices : null,
  };
  row.pp_ratio = row.web_pp != null && row.llama_pp ? row.web_pp / row.llama_pp : null;
  row.tg_ratio = row.web_tg != null && row.llama_tg ? row.web_tg / row.llama_tg : null;
  rows.push(row);
}

const tps = (x) => (x == null ? '-' : x.toFixed(1)).padStart(10);
const ratio = (x) => (x == null ? '-' : x.toFixed(3)).padStart(8);
if (!rowsOnly) {
  const r0 = rows.find((r) => r.n_prompt != null) || { n_prompt: '?', n_gen: '?' };
  const pp = `pp${r0.n_prompt}`, tg = `tg${r0.n_gen}`;
  console.log(`| model                 | llamaweb ${pp.padEnd(5)} | llama.cpp ${pp.padEnd(5)} | pp ratio | ` +
    `llamaweb ${tg.padEnd(5)} | llama.cpp ${tg.padEnd(5)} | tg ratio | rounds |`);
  console.log('|-----------------------|----------------|-----------------|----------|----------------|-----------------|----------|--------|');
}
for (const r of rows) {
  console.log(`| ${r.model.padEnd(21)} | ${tps(r.web_pp)}     | ${tps(r.llama_pp)}      | ${ratio(r.pp_ratio)} | ` +
    `${tps(r.web_tg)}     | ${tps(r.llama_tg)}      | ${ratio(r.tg_ratio)} | ${`${r.rounds_web}+${r.rounds_llama}`.padStart(6)} |`);
}
if (!rowsOnly && rows.some((r) => r.llama_devices)) {
  const r = rows.find((x) => x.llama_devices);
  console.log(`t/s: medians over rounds (llamaweb + llama.cpp rounds counted); llama.cpp tg after ${r.llama_gen_depth} ` +
    `prompt tokens (llamaweb's tg follows its prompt); llama.cpp devices: ${r.llama_devices}`);
}
for (const n of notes) console.log(n);
if (jsonOut) writeFileSync(jsonOut, JSON.stringify(rows, null, 1) + '\n');
