// The browser package's CPU engine in headless Chromium (Debian's chromium, launched WITHOUT
// --enable-unsafe-webgpu, so WebGPU has no adapter), through tests/web/browser/cpu.html, served from a local
// server of this file's own (the package at /web/, the wasm builds at /wasm/, models at /models/, the page's
// POST at /result). Checks:
//  - WebGPU failing (no adapter) and WebGPU absent (navigator.gpu hidden): Llamaweb.load() and
//    loadInWorker() with the default device 'auto' fall back to the CPU engine, and stories260K's greedy
//    tokens (read by HTTP range requests straight into the heap) are the native CLI's (`llamaweb run --temp 0`),
//    on the page's thread and in the worker, and so are tokenize's ids (detokenize gives the text back);
//  - threads asked for on a page that is not cross-origin isolated (no COOP/COEP) run the single-thread
//    build with one thread, and say why; on an isolated page the threaded build (wasm/mt/) runs 2 threads
//    with the same tokens (skipped, visibly, when wasm/mt/ is not built);
//  - the OpenAI-shaped chat completion on a synthetic ChatML model (written by the native CLI) streams the
//    chunks of the non-streaming result, and both are the native C chat session's reply (`llamaweb chat`);
//  - errors have codes, on the page and across the worker boundary: GPU_UNAVAILABLE, UNSUPPORTED_MODEL,
//    NETWORK, BAD_INPUT, ABORTED (already aborted; an open and a stream aborted under way), CONTEXT_FULL.
// Skips (visibly) without Chromium, the wasm build (LW_WASM_DIR or build/wasm), the native CLI or ../shared.
// Run: LW_WASM_DIR=... LW_CLI=build-NAME/llamaweb node --test tests/web/cpu-fallback.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../web/lw-node.mjs';
import { serveStatic } from './static-server.mjs';

const root = repoRoot();
const chromium = process.env.LW_CHROMIUM || '/usr/bin/chromium';
const wasmDir = path.resolve(root, process.env.LW_WASM_DIR || 'build/wasm');
const shared = process.env.LW_SHARED || path.resolve(root, '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const spmVocab = path.join(shared, 'vocab/ggml-vocab-llama-spm.gguf');
const cli = [process.env.LW_CLI, ...['build/release', 'build', 'build-model', 'build-demo'].map((d) => path.join(root, d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const skip = !existsSync(chromium) ? `no ${chromium} (Debian package chromium; scripts/setup-webgpu.sh)` :
  !existsSync(path.join(wasmDir, 'llamaweb-wasm.wasm')) ? `${path.relative(root, wasmDir)} not built (scripts/build-wasm.sh)` :
  !existsSync(stories) ? `no ${stories} (the shared test models)` : !cli ? 'no native llamaweb CLI (scripts/build.sh, or LW_CLI)' : false;
if (skip) console.log('SKIP: ' + skip);
const threaded = existsSync(path.join(wasmDir, 'mt/llamaweb-wasm.wasm'));


// Serves the page, the package, the wasm builds and the models (with ranges); coi: COOP/COEP/CORP headers.
async function serve(modelsDir, coi) {
  let resolveResult;
  const result = new Promise((r) => { resolveResult = r; });
  const requests = [];
  const server = createServer((req, res) => {
    if (coi) {
      res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
      res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
      res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
    }
    const p = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    requests.push(`${req.method} ${p}${req.headers.range ? ' ' + req.headers.range : ''}`);
    if (req.method === 'POST' && p === '/result') {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => { res.end('ok'); resolveResult(JSON.parse(body)); });
      return;
    }
    const dirs = [['/web/', path.join(root, 'web')], ['/wasm/', wasmDir], ['/tests/web/browser/', path.join(root, 'tests/web/browser')], ['/models/', modelsDir]];
    serveStatic(req, res, p, dirs);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, result, requests, base: `http://127.0.0.1:${server.address().port}` };
}

// Opens url in a fresh headless Chromium (no WebGPU adapter) and waits for the page's POST.
async function runPage(srv, query) {
  const profile = mkdtempSync(path.join(tmpdir(), 'lw-chromium-cpu-'));
  const browser = spawn(chromium, ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
    `--user-data-dir=${profile}`, '--remote-debugging-port=0', `${srv.base}/tests/web/browser/cpu.html?${query}`],
  { stdio: ['ignore', 'ignore', 'pipe'], detached: true }); // own process group: teardown stops its helpers too
  let stderr = '';
  browser.stderr.on('data', (c) => { stderr = (stderr + c).slice(-4000); });
  const exited = new Promise((r) => browser.on('exit', (code) => r({ exited: code })));
  try {
    let timer;
    const timeout = new Promise((r) => { timer = setTimeout(() => r({ timeout: true }), 150000); });
    const r = await Promise.race([srv.result, exited, timeout]);
    clearTimeout(timer);
    assert.ok(!r.exited && !r.timeout, `no result from the page (${JSON.stringify(r)}); chromium stderr:\n${stderr}`);
    assert.equal(r.error, null, r.error);
    return r;
  } finally {
    try { process.kill(-browser.pid, 'SIGKILL'); } catch { browser.kill('SIGKILL'); }
    await exited;
    try {
      rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
    } catch (e) {
      console.log(`# note: could not remove ${profile}: ${e.code}`);
    }
  }
}

const N = 32, SYS = 'Be brief.', USER = 'Hello there';

test('CPU engine in headless Chromium: fallback without WebGPU, threads, OpenAI stream, error codes', { skip, timeout: 400000 }, async () => {
  const tmp = mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-cpu-web-'));
  try {
    copyFileSync(stories, path.join(tmp, 'stories260K.gguf'));
    // the synthetic ChatML model: llama-spm's vocabulary where ../shared has it (replies are words)
    const tmpl = path.join(tmp, 'chatml.jinja'), chat = 'chatml.gguf';
    writeFileSync(tmpl, "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
    execFileSync(cli, ['synth', '--preset', 'tiny', '--type', 'f32', '--vocab', existsSync(spmVocab) ? spmVocab : 'builtin',
      '--chat-template', tmpl, '-o', path.join(tmp, chat)], { stdio: 'ignore' });
    // the native engine's answers
    const run = execFileSync(cli, ['run', '-m', stories, '-p', 'Once upon a time', '-n', String(N), '--temp', '0', '-t', '1'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const want = run.split('\n').find((l) => l.startsWith('ids: ')).split('|')[1].trim().split(/\s+/).map(Number);
    assert.equal(want.length, N);
    const reply = execFileSync(cli, ['chat', '-m', path.join(tmp, chat), '--system', SYS, '-n', '12', '--temp', '0', '--ctx', '256', '-t', '1'],
      { input: USER + '\n', encoding: 'utf8', stdio: ['pipe', 'pipe', 'ignore'] }).replace(/\n$/, '');

    // 1. not cross-origin isolated; WebGPU exposed without an adapter
    const plain = await serve(tmp, false);
    let r;
    try {
      r = await runPage(plain, `n=${N}&chat=${chat}&errors=1&system=${encodeURIComponent(SYS)}&user=${encodeURIComponent(USER)}`);
    } finally {
      plain.server.close();
    }
    console.log(`# not isolated: page ${JSON.stringify({ ...r.page, stories: undefined, openai: undefined, errors: undefined })}`);
    for (const [where, s] of [['page', r.page], ['worker', r.worker]]) {
      assert.equal(r.coi, false);
      assert.equal(s.preference, 'auto');
      assert.equal(s.gpu, false, `${where}: no WebGPU device`);
      assert.match(s.gpuError, /adapter/);
      const st = s.stories;
      console.log(`# ${where}: stories260K on ${st.device} (${st.build}, ${st.threads} thread): ${JSON.stringify(st.text)}, ` +
        `${st.tokensPerSecond.toFixed(0)} tokens/s, load ${st.loadMs.toFixed(0)} ms`);
      assert.equal(st.device, 'cpu');
      assert.deepEqual(st.tokens, want, `${where}: the native CLI's greedy ids`);
      assert.ok(st.text.startsWith(', there was a little girl named Lily'), st.text);
      const promptIds = run.split('\n').find((l) => l.startsWith('ids: ')).slice(5).split('|')[0].trim().split(/\s+/).map(Number);
      assert.deepEqual(st.promptIds, promptIds, `${where}: tokenize = the native tokenizer`);
      assert.equal(st.detokenized, st.text);
      assert.equal(st.build, 'single', 'no cross-origin isolation: the single-thread build');
      assert.equal(st.threads, 1);
      assert.match(st.threadsError, /cross-origin isolated/);
      const o = s.openai;
      console.log(`# ${where}: chat completion ${JSON.stringify(o.content)} (${o.finish}), usage ${JSON.stringify(o.usage)}`);
      assert.equal(o.device, 'cpu');
      assert.equal(o.object, 'chat.completion');
      assert.equal(o.content, reply, `${where}: the C chat session's reply`);
      assert.equal(o.streamed, o.content, `${where}: stream = result`);
      assert.equal(o.firstRole, 'assistant');
      assert.equal(o.lastFinish, o.finish);
      // the streamed request repeats the prompt: the cache keeps all of it but the two ids decoded again
      assert.deepEqual({ ...o.lastUsage, prompt_tokens_details: null }, { ...o.usage, prompt_tokens_details: null });
      assert.equal(o.lastUsage.prompt_tokens_details.cached_tokens, o.usage.prompt_tokens - 2);
      assert.deepEqual(o.chunkObjects, ['chat.completion.chunk']);
      assert.deepEqual(s.errors, {
        gpuUnavailable: 'GPU_UNAVAILABLE', corrupt: 'UNSUPPORTED_MODEL', missing: 'NETWORK', abortedOpenBefore: 'ABORTED', abortedOpen: 'ABORTED',
        badInput: 'BAD_INPUT', badDevice: 'BAD_INPUT',
        abortedBefore: 'ABORTED', abortedGenerate: 'ABORTED', contextFull: 'CONTEXT_FULL', abortedStream: 'ABORTED', afterwards: 2,
      }, `${where}: error codes`);
    }
    const ranged = plain.requests.filter((l) => l.includes('/models/stories260K.gguf') && l.includes('bytes='));
    assert.ok(ranged.length >= 2, 'the model was read by range requests');

    // 2. cross-origin isolated; navigator.gpu hidden: the threaded build where it is built
    const coi = await serve(tmp, true);
    try {
      r = await runPage(coi, `n=${N}&nogpu=1`);
    } finally {
      coi.server.close();
    }
    assert.equal(r.coi, true);
    assert.equal(r.gpuExposed, false);
    for (const [where, s] of [['page', r.page], ['worker', r.worker]]) {
      assert.match(s.gpuError, /navigator\.gpu is missing/);
      const st = s.stories;
      console.log(`# isolated, ${where}: stories260K on ${st.device} (${st.build}, ${st.threads} threads), ${st.tokensPerSecond.toFixed(0)} tokens/s` +
        (st.threadsError ? ` (${st.threadsError})` : ''));
      assert.equal(st.device, 'cpu');
      assert.deepEqual(st.tokens, want, `${where}: the native CLI's greedy ids`);
      if (threaded) {
        assert.equal(st.build, 'threads', st.threadsError);
        assert.equal(st.threads, 2);
      } else {
        console.log(`# SKIP (threads): ${path.relative(root, wasmDir)}/mt not built (scripts/build-wasm.sh with LW_WASM_THREADS=1)`);
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
