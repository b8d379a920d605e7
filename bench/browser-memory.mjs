#!/usr/bin/env node
// Memory of a model load in a real browser (a benchmark, not a test; issue "big models in a tab"): headless
// Chromium on its SwiftShader WebGPU adapter (which keeps GPU buffers in CPU memory, so the processes' memory
// is the whole footprint), the package opening synthesized models from a File (the page's <input type=file>,
// a file on disk) and/or from a URL (through the OPFS model cache), and @wllama/wllama 3.13 on the same files
// where it is installed. Per run, a fresh browser; the driver sums the proportional set size (PSS,
// /proc/PID/smaps_rollup) of every process of the browser's process group every 200 ms: idle (the page open,
// nothing loaded), peak during the load, after the load, and steady (after the first tokens). Prints one row per
// run: loads?, load s, wasm heap, GPU bytes, PSS idle / peak / after load / steady, (PSS - idle) / file size at
// peak and steady, and whether the first tokens are the native CPU engine's (build/release/llamaweb run,
// greedy) on the same file. --verify: open's verifyUpload (every weight byte read back from the GPU and compared
// with the file; the last column says how many bytes, and how many past 4 GiB; its read-back counts in the PSS).
//
//   node bench/browser-memory.mjs [--models llama-3.2-1b:q4_0,llama-3.1-8b:q5_0,llama-3.1-8b:q4_k_m:52]
//        [--sources file,url] [--engines llamaweb,wllama] [--where worker|page] [--gen 2] [--json out.json] [--verify]
//        (--gen 0: the load alone; LW_BENCH_DEBUG=1: each sample, and PSS per process type idle / peak / loaded)
//
// A model is PRESET:TYPE[:LAYERS] (llamaweb synth, 32000-token builtin vocabulary), kept in
// LW_BENCH_MODELS (default /tmp/lw-bench-models). Needs Chromium (LW_CHROMIUM or /usr/bin/chromium), the
// wasm build (LW_WASM_DIR or build/wasm), the native CLI (LW_CLI or build/release/llamaweb) and, for wllama,
// node_modules/@wllama/wllama or LW_WLLAMA (`npm install --no-save @wllama/wllama@3.13.0`). A software
// adapter decodes an 8B slowly (minutes a token on 2 cores): --gen 2 is the default.
import { createServer } from 'node:http';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium, chromiumMissing } from '../tests/web/chromium.mjs';
import { serveStatic } from '../tests/web/static-server.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf('--' + k); return i >= 0 ? args[i + 1] : d; };
const models = opt('models', 'llama-3.2-1b:q4_0').split(',');
const sources = opt('sources', 'file').split(',');
const engines = opt('engines', 'llamaweb,wllama').split(',');
const where = opt('where', 'worker');
const gen = Number(opt('gen', '2'));
const jsonOut = opt('json', null);
const verify = args.includes('--verify');
const prompt = 'Once upon a time';

const wasmDir = path.resolve(root, process.env.LW_WASM_DIR || 'build/wasm');
const cli = [process.env.LW_CLI, path.join(root, 'build/release/llamaweb')].find((p) => p && existsSync(p));
const wllamaDir = [process.env.LW_WLLAMA, path.join(root, 'node_modules/@wllama/wllama')].find((p) => p && existsSync(path.join(p, 'esm/index.js')));
const missing = chromiumMissing() || (!existsSync(path.join(wasmDir, 'llamaweb-wasm.wasm')) ? `no wasm build in ${wasmDir}` : null) ||
  (!cli ? 'no native llamaweb CLI (scripts/build.sh release, or LW_CLI)' : null);
if (missing) { console.error('browser-memory: ' + missing); process.exit(2); }
if (engines.includes('wllama') && !wllamaDir) console.error('browser-memory: no @wllama/wllama (LW_WLLAMA or node_modules): its rows are left out');

const modelDir = process.env.LW_BENCH_MODELS || '/tmp/lw-bench-models';
mkdirSync(modelDir, { recursive: true });
function synth(spec) {
  const [preset, type, layers] = spec.split(':');
  const f = path.join(modelDir, `${preset}-${type}${layers ? '-l' + layers : ''}.gguf`);
  if (!existsSync(f)) {
    const t0 = Date.now();
    execFileSync(cli, ['synth', '--preset', preset, '--type', type, '--vocab', 'builtin', '--vocab-size', '32000',
      ...(layers ? ['--layers', layers] : []), '-o', f + '.tmp'], { stdio: ['ignore', 'ignore', 'inherit'] });
    execFileSync('mv', [f + '.tmp', f]);
    console.error(`browser-memory: synth ${spec}: ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  }
  return f;
}

// The native CPU engine's greedy text for the prompt (the reference for the first tokens).
function nativeText(f) {
  const out = execFileSync(cli, ['run', '-m', f, '-p', prompt, '-n', String(gen), '--temp', '0', '--ctx', '512'],
    { stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 1 << 20 }).toString();
  return out;
}

// Summed PSS (KiB) of the processes in process group pgid; by (optional object): KiB per process type (the
// --type= of its command line: renderer, gpu-process, utility; browser for the main process).
function groupPss(pgid, by) {
  let kib = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // state ppid pgrp ...
      if (Number(f[2]) !== pgid) continue;
      const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${d}/smaps_rollup`, 'utf8'));
      if (!m) continue;
      kib += Number(m[1]);
      if (by) {
        const t = /--type=([a-z-]+)/.exec(readFileSync(`/proc/${d}/cmdline`, 'utf8').replace(/\0/g, ' '));
        const k = t ? t[1] : 'browser';
        by[k] = (by[k] || 0) + Number(m[1]);
      }
    } catch { /* the process ended meanwhile */ }
  }
  return kib;
}
// "type MiB, ..." of a groupPss breakdown.
const byText = (by) => Object.entries(by).map(([k, v]) => `${k} ${(v / 1024).toFixed(0)}`).join(', ');

const server = createServer((req, res) => {
  const p = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  if (p === '/mem.html') {
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><meta charset="utf-8"><input type="file"><script type="module" src="/bench/browser-memory-page.mjs"></script>');
    return;
  }
  const dirs = [['/web/', path.join(root, 'web')], ['/wasm/', wasmDir], ['/bench/', path.join(root, 'bench')], ['/models/', modelDir],
    ...(wllamaDir ? [['/wllama/', path.join(wllamaDir, 'esm')]] : [])];
  serveStatic(req, res, p, dirs);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One run in a fresh browser: the page's own report and the PSS samples (MiB).
async function runOnce(engine, f, source) {
  const browser = await launchChromium();
  const pgid = browser.pid;
  try {
    const page = await browser.newPage(`${base}/mem.html`);
    await page.evaluate('new Promise((r) => { const t = () => globalThis.benchRun ? r() : setTimeout(t, 50); t(); })');
    await sleep(1500);
    const idle = [];
    for (let i = 0; i < 5; i++) { idle.push(groupPss(pgid)); await sleep(200); }
    if (source === 'file') {
      const { result } = await page.send('Runtime.evaluate', { expression: 'document.querySelector("input")' });
      await page.send('DOM.setFileInputFiles', { files: [f], objectId: result.objectId });
    }
    const spec = { engine, source, url: `${base}/models/${path.basename(f)}`, where, prompt, gen, verify };
    let done = false, peak = 0, afterLoad = null, peakBy = {}, idleBy = {};
    groupPss(pgid, idleBy);
    const run = page.evaluate(`benchRun(${JSON.stringify(spec)})`).finally(() => { done = true; });
    // samples until the page reports the loaded state (or fails), then once more and resumes it
    for (;;) {
      const by = {}, kib = groupPss(pgid, by);
      if (kib > peak) peakBy = by;
      peak = Math.max(peak, kib);
      if (done) break;
      const phase = await page.evaluate('benchState.phase');
      if (process.env.LW_BENCH_DEBUG) console.error(`browser-memory: ${phase}, PSS ${(kib / 1024).toFixed(0)} MiB`, page.logs.slice(-2));
      if (phase === 'loaded') {
        await sleep(1000);
        const by = {};
        afterLoad = groupPss(pgid, by);
        if (process.env.LW_BENCH_DEBUG) console.error(`browser-memory: PSS MiB idle ${byText(idleBy)}; peak ${byText(peakBy)}; loaded ${byText(by)}`);
        peak = Math.max(peak, afterLoad);
        await page.evaluate('benchState.resume()');
        break;
      }
      await sleep(200);
    }
    let steady = null;
    if (process.env.LW_BENCH_DEBUG) console.error('browser-memory: resumed');
    const r = await run;
    if (process.env.LW_BENCH_DEBUG) console.error('browser-memory: run done', r.error, r.text);
    if (!r.error) {
      await sleep(1000);
      const s = [];
      for (let i = 0; i < 5; i++) { s.push(groupPss(pgid)); await sleep(200); }
      steady = Math.min(...s);
    }
    const mib = (k) => (k == null ? null : k / 1024);
    return { ...r, pss: { idle: mib(Math.min(...idle)), peak: mib(peak), afterLoad: mib(afterLoad), steady: mib(steady) }, logs: page.logs.slice(-5) };
  } finally {
    await browser.close();
  }
}

const fmt = (x, d = 0) => (x == null ? '—' : x.toFixed(d));
const rows = [];
console.log(`browser-memory: headless Chromium (SwiftShader), ${where}, n_ctx 512, ${gen} greedy tokens; load ${loadavg()[0].toFixed(2)}`);
console.log('| engine | model (file MiB) | source | loads? | load s | gen s | wasm heap MiB | GPU MiB | PSS idle / peak / loaded / steady MiB | (PSS - idle) ÷ file peak / steady | first tokens = CPU engine |' + (verify ? ' upload read back |' : ''));
console.log('|---|---|---|---|---|---|---|---|---|---|---|' + (verify ? '---|' : ''));
for (const spec of models) {
  const f = synth(spec);
  const fileMiB = statSync(f).size / 2 ** 20;
  let ref = null;
  for (const engine of engines) {
    if (engine === 'wllama' && !wllamaDir) continue;
    for (const source of sources) {
      const r = await runOnce(engine, f, source);
      let same = '—';
      if (!r.error && engine === 'llamaweb') {
        ref ??= nativeText(f);
        same = ref.includes(r.text) && r.text.length > 0 ? 'yes' : `no (${JSON.stringify(r.text)} vs ${JSON.stringify(ref.slice(0, 80))})`;
      }
      const mem = r.memory || r.memoryAfterLoad || {};
      const p = r.pss;
      const row = { engine, model: spec, fileMiB, source, ...r };
      rows.push(row);
      console.log(`| ${engine} | ${spec} (${fmt(fileMiB)}) | ${source} | ${r.error ? 'no: ' + r.error.slice(0, 120) : 'yes'} | ${fmt(r.loadMs / 1000, 1)} | ${fmt(r.genMs / 1000, 1)} | ` +
        `${fmt(mem.wasmHeap != null ? mem.wasmHeap / 2 ** 20 : null)} | ${fmt(mem.gpu ? mem.gpu.total / 2 ** 20 : null)} | ` +
        `${fmt(p.idle)} / ${fmt(p.peak)} / ${fmt(p.afterLoad)} / ${fmt(p.steady)} | ` +
        `${fmt((p.peak - p.idle) / fileMiB, 2)} / ${p.steady == null ? '—' : fmt((p.steady - p.idle) / fileMiB, 2)} | ${same} |`);
    }
  }
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify(rows, null, 1));
server.close();
process.exit(0);
