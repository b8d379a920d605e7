#!/usr/bin/env node
// Side by side in headless Chromium (a benchmark, not a test): the browser package's wasm CPU engine at 1 and
// 2 threads (its threaded build, wasm/mt/, on a cross-origin isolated page) against wllama 3.13's CPU build,
// on the same synthesized files (llamaweb synth: llama-3.2-1b shape, Q4_0 and Q8_0, the llama-spm vocabulary
// when ../shared has it), prefill and decode tokens/s, medians over rounds with the engines alternating, and
// the ratio. --webgpu adds the package on the browser's own adapter (Chromium's SwiftShader here: where a
// software adapter loses to the CPU engine, the reason device 'auto' avoids it). --where picks where the
// package runs: on the page's main thread (page, the default) and/or in a module Worker (worker, as wllama
// always computes): the engine's first thread sleeps at its barriers only in a worker (the main thread may
// not block, so there it spins).
//
//   node bench/wasm-cpu-compare.mjs [--types q4_0,q8_0] [--preset llama-3.2-1b] [--layers N] [--threads 1,2]
//        [--rounds 2] [--prompt 64] [--gen 32] [--where page,worker] [--webgpu] [--json out.json]
//
// Needs Chromium (/usr/bin/chromium or LW_CHROMIUM), the wasm builds (LW_WASM_DIR or build/wasm, with mt/),
// the native CLI (LW_CLI or build/release/llamaweb) to write the models (kept in LW_BENCH_MODELS or
// /tmp/lw-bench-models), and @wllama/wllama 3.13 (node_modules/@wllama/wllama or LW_WLLAMA; not a
// dependency of the package: `npm install --no-save @wllama/wllama@3.13.0`, or into another prefix).
// Machines shared with other work give noisy numbers: quote medians and ratios, and the load.
import { createServer } from 'node:http';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync, createReadStream } from 'node:fs';
import { tmpdir, loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf('--' + k); return i >= 0 ? args[i + 1] : d; };
const types = opt('types', 'q4_0,q8_0').split(',');
const preset = opt('preset', 'llama-3.2-1b');
const layers = opt('layers', null);
const threadList = opt('threads', '1,2').split(',').map(Number);
const rounds = Number(opt('rounds', '2'));
const promptTokens = Number(opt('prompt', '64'));
const gen = Number(opt('gen', '32'));
const wheres = opt('where', 'page').split(',');
if (wheres.some((w) => w !== 'page' && w !== 'worker')) { console.error('wasm-cpu-compare: --where takes page and/or worker'); process.exit(2); }
const withGpu = args.includes('--webgpu');
const jsonOut = opt('json', null);

const chromium = process.env.LW_CHROMIUM || '/usr/bin/chromium';
const wasmDir = path.resolve(root, process.env.LW_WASM_DIR || 'build/wasm');
const cli = [process.env.LW_CLI, ...['build/release', 'build'].map((d) => path.join(root, d, 'llamaweb'))].find((p) => p && existsSync(p));
const wllamaDir = [process.env.LW_WLLAMA, path.join(root, 'node_modules/@wllama/wllama')].find((p) => p && existsSync(path.join(p, 'esm/index.js')));
const vocab = path.resolve(root, process.env.LW_SHARED || '../shared', 'vocab/ggml-vocab-llama-spm.gguf');
const missing = !existsSync(chromium) ? `no ${chromium}` : !existsSync(path.join(wasmDir, 'llamaweb-wasm.wasm')) ? `no wasm build in ${wasmDir}` :
  !cli ? 'no native llamaweb CLI (scripts/build.sh release, or LW_CLI)' : !wllamaDir ? 'no @wllama/wllama (LW_WLLAMA or node_modules)' : null;
if (missing) { console.error('wasm-cpu-compare: ' + missing); process.exit(2); }
if (!existsSync(path.join(wasmDir, 'mt/llamaweb-wasm.wasm')) && threadList.some((t) => t > 1)) console.error('wasm-cpu-compare: no wasm/mt/: llamaweb runs 1 thread');

// The models, written once.
const modelDir = process.env.LW_BENCH_MODELS || path.join(tmpdir(), 'lw-bench-models');
mkdirSync(modelDir, { recursive: true });
const models = types.map((t) => {
  const name = `${preset}${layers ? '-l' + layers : ''}-${t}.gguf`, file = path.join(modelDir, name);
  if (!existsSync(file)) {
    console.error(`wasm-cpu-compare: writing ${file}`);
    execFileSync(cli, ['synth', '--preset', preset, '--type', t, ...(layers ? ['--layers', layers] : []),
      ...(existsSync(vocab) ? ['--vocab', vocab] : []), '-o', file], { stdio: 'ignore' });
  }
  return { type: t, name, file, bytes: statSync(file).size };
});
// a prompt of about promptTokens tokens (words the llama-spm vocabulary keeps whole)
const words = 'the cat sat on a mat and the dog ran to the park with a red ball in its mouth'.split(' ');
const prompt = Array.from({ length: promptTokens - 1 }, (_, i) => words[i % words.length]).join(' ');

// Serves the package, the wasm builds, wllama, the models and the page, cross-origin isolated.
let resolveResult = null;
const MIME = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };
const server = createServer((req, res) => {
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
  res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
  res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
  const p = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  if (req.method === 'POST' && p === '/result') {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => { res.end('ok'); if (resolveResult) resolveResult(JSON.parse(body)); });
    return;
  }
  if (p === '/bench.html') {
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><meta charset="utf-8"><script type="module" src="/bench/wasm-cpu-page.mjs"></script>');
    return;
  }
  const dirs = [['/web/', path.join(root, 'web')], ['/wasm/', wasmDir], ['/bench/', path.join(root, 'bench')],
    ['/wllama/', path.join(wllamaDir, 'esm')], ['/models/', modelDir]];
  const hit = dirs.find(([pre]) => p.startsWith(pre));
  const file = hit && path.resolve(hit[1], '.' + path.posix.normalize('/' + p.slice(hit[0].length)));
  if (!file || !file.startsWith(hit[1]) || !existsSync(file) || !statSync(file).isFile()) { res.statusCode = 404; res.end(); return; }
  res.setHeader('Content-Type', MIME[path.extname(file)] || 'application/octet-stream');
  res.setHeader('Content-Length', statSync(file).size);
  createReadStream(file).pipe(res);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}`;

// One page run in a fresh browser: {engine, threads, promptTokens, prefillMs, genTokens, decodeMs, ...}.
async function runOnce(query) {
  const profile = mkdtempSync(path.join(tmpdir(), 'lw-bench-chromium-'));
  const result = new Promise((r) => { resolveResult = r; });
  const browser = spawn(chromium, ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', '--enable-unsafe-webgpu', `--user-data-dir=${profile}`,
    '--remote-debugging-port=0', `${base}/bench.html?${new URLSearchParams(query)}`], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  browser.stderr.on('data', (c) => { stderr = (stderr + c).slice(-3000); });
  const exited = new Promise((r) => browser.on('exit', (code) => r({ exited: code })));
  let timer; // cleared below: a pending 20-minute timer would keep this process alive after the last run
  const timeout = new Promise((r) => { timer = setTimeout(() => r({ timeout: true }), 1200000); });
  try {
    const r = await Promise.race([result, exited, timeout]);
    if (r.exited !== undefined || r.timeout) throw new Error(`no result (${JSON.stringify(r)}): ${stderr}`);
    if (r.error) throw new Error(`${query.engine}: ${r.error}`);
    return r;
  } finally {
    clearTimeout(timer);
    try { process.kill(-browser.pid, 'SIGKILL'); } catch { browser.kill('SIGKILL'); }
    await exited;
    rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  }
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
const rows = [];
for (const m of models) {
  for (const threads of threadList) {
    // llamaweb@page / llamaweb@worker, wllama, webgpu (on the first --where)
    const engines = [...wheres.map((w) => 'llamaweb@' + w), 'wllama', ...(withGpu && threads === threadList[0] ? ['webgpu@' + wheres[0]] : [])];
    const runs = Object.fromEntries(engines.map((e) => [e, []]));
    for (let round = 0; round < rounds; round++) {
      for (const engine of round % 2 ? [...engines].reverse() : engines) { // alternate which goes first
        const [name, where = 'page'] = engine.split('@');
        const r = await runOnce({ engine: name, where, model: '/models/' + m.name, threads, gen, prompt });
        const pp = r.promptTokens / r.prefillMs * 1000, tg = r.genTokens / r.decodeMs * 1000;
        console.error(`  ${m.type} ${engine} t${threads}${r.build ? ' ' + r.build + ' (' + r.threadsRun + ')' : ''}: ` +
          `pp${r.promptTokens} ${pp.toFixed(2)} t/s, tg${r.genTokens} ${tg.toFixed(2)} t/s, load ${r.loadMs.toFixed(0)} ms; load avg ${loadavg()[0].toFixed(1)}`);
        runs[engine].push({ pp, tg, load: r.loadMs });
      }
    }
    const s = (e, k) => median(runs[e].map((x) => x[k]));
    const gpu = engines.find((e) => e.startsWith('webgpu'));
    for (const where of wheres) {
      rows.push({ model: m.type, mib: m.bytes / 1048576, threads, where, ours: { pp: s('llamaweb@' + where, 'pp'), tg: s('llamaweb@' + where, 'tg') },
        wllama: { pp: s('wllama', 'pp'), tg: s('wllama', 'tg') }, webgpu: gpu && where === wheres[0] ? { pp: s(gpu, 'pp'), tg: s(gpu, 'tg') } : null });
    }
  }
}
server.close();

console.log(`\n${preset}${layers ? ` (${layers} layers)` : ''}, prompt ${promptTokens} tokens, ${gen} generated, median of ${rounds} rounds, headless Chromium:`);
console.log('| model | threads | llamaweb on | llamaweb pp | wllama pp | pp ratio | llamaweb tg | wllama tg | tg ratio |' + (withGpu ? ' webgpu pp / tg |' : ''));
console.log('|---|---|---|---|---|---|---|---|---|' + (withGpu ? '---|' : ''));
for (const r of rows) {
  console.log(`| ${r.model} (${r.mib.toFixed(0)} MiB) | ${r.threads} | ${r.where} | ${r.ours.pp.toFixed(2)} | ${r.wllama.pp.toFixed(2)} | ${(r.ours.pp / r.wllama.pp).toFixed(2)} | ` +
    `${r.ours.tg.toFixed(2)} | ${r.wllama.tg.toFixed(2)} | ${(r.ours.tg / r.wllama.tg).toFixed(2)} |` +
    (withGpu ? (r.webgpu ? ` ${r.webgpu.pp.toFixed(2)} / ${r.webgpu.tg.toFixed(2)} |` : ' |') : ''));
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ preset, layers, promptTokens, gen, rounds, rows }, null, 1));
