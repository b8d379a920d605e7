// The wasm module and its WebGPU glue in a real browser: serves the repository on 127.0.0.1, opens
// tests/web/browser/matvec.html in headless Chromium (Debian's chromium, with --enable-unsafe-webgpu; its
// adapter is SwiftShader), and checks the results the page POSTs back. Skips when chromium or the wasm
// build is missing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../web/lw-node.mjs';
import { BOUND } from './matvec-check.mjs';

const root = repoRoot();
const chromium = process.env.LW_CHROMIUM || '/usr/bin/chromium';
const built = existsSync(path.join(root, 'build/wasm/llamaweb-wasm.wasm'));
const skip = !existsSync(chromium) ? `no ${chromium} (scripts/setup-webgpu.sh)` :
  !built ? 'build/wasm not built (scripts/build-wasm.sh)' : false;
if (skip) console.log('SKIP: ' + skip);

const TYPES_MIME = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };

test('matvec in headless Chromium (WebGPU from the browser, same wasm + glue)', { skip, timeout: 240000 }, async () => {
  let resolveResult;
  const result = new Promise((r) => { resolveResult = r; });
  const server = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/result') {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => { res.end('ok'); resolveResult(JSON.parse(body)); });
      return;
    }
    // only the files the page needs, from inside the repository
    const rel = decodeURIComponent(new URL(req.url, 'http://x').pathname).replace(/^\/+/, '');
    const file = path.resolve(root, rel);
    const allowed = ['build/wasm/', 'tests/web/', 'web/'].some((d) => file.startsWith(path.join(root, d)));
    if (!allowed || !existsSync(file)) { res.statusCode = 404; res.end(); return; }
    res.setHeader('Content-Type', TYPES_MIME[path.extname(file)] || 'application/octet-stream');
    res.end(readFileSync(file));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/tests/web/browser/matvec.html`;
  const profile = mkdtempSync(path.join(tmpdir(), 'lw-chromium-'));
  const browser = spawn(chromium, ['--headless', '--no-sandbox', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
    '--enable-unsafe-webgpu', `--user-data-dir=${profile}`, '--remote-debugging-port=0', url],
  // its own process group, so teardown can stop the renderer and GPU processes too, not just the parent
  { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  browser.stderr.on('data', (c) => { stderr = (stderr + c).slice(-4000); });
  const exited = new Promise((r) => browser.on('exit', (code) => r({ exited: code })));
  try {
    let timer;
    const timeout = new Promise((res) => { timer = setTimeout(() => res({ timeout: true }), 200000); });
    const r = await Promise.race([result, exited, timeout]);
    clearTimeout(timer);
    assert.ok(!r.exited && !r.timeout, `no result from the page (${JSON.stringify(r)}); chromium stderr:\n${stderr}`);
    console.log(`# browser adapter: ${JSON.stringify(r.adapter)}`);
    for (const c of r.cases) console.log(`# browser ${c.type} f16=${c.f16} sg=${c.sg}${c.viaHost ? ' streamed' : ''}: nmse ${c.nmse.toExponential(3)}`);
    assert.equal(r.error, null, r.error);
    assert.ok(r.ok);
    assert.ok(r.cases.length >= 5);
    for (const c of r.cases) assert.ok(c.nmse < BOUND[c.f16 ? 'f16' : 'f32'], JSON.stringify(c));
  } finally {
    try { process.kill(-browser.pid, 'SIGKILL'); } catch { browser.kill('SIGKILL'); }
    await exited;
    server.close();
    // Chromium's helpers may still be flushing the profile for a moment: retry, and never fail the test on it.
    try {
      rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
    } catch (e) {
      console.log(`# note: could not remove ${profile}: ${e.code}`);
    }
  }
});
