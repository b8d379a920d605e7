// The browser package under a strict Content-Security-Policy, in headless Chromium: every response of this
// file's server (the page, the package, the module worker and the pthread workers, the wasm builds) carries
//   Content-Security-Policy: script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'
// i.e. no 'unsafe-eval' (no eval, no new Function, no string timers). Emscripten 3.1.6's web output needs none
// of them (its eval is in the Node branch of the pthread worker); compiling WebAssembly needs
// 'wasm-unsafe-eval', which CSP keeps apart from 'unsafe-eval' for that reason. Checks, on the page's thread
// and in the module worker (Llamaweb.loadInWorker), not isolated (single-thread build) and cross-origin
// isolated (the threaded build, 2 threads; skipped, visibly, without wasm/mt/): stories260K's greedy ids are
// the native CLI's and the page saw no CSP violation. The control: the same page under `script-src 'self'`
// alone refuses the wasm compile, and load() rejects saying so (not a hang; the error has no code yet).
// Skips (visibly) without Chromium, the wasm build (LW_WASM_DIR or build/wasm), the native CLI or ../shared.
// Run: LW_WASM_DIR=... LW_CLI=build-NAME/llamaweb node --test tests/web/csp.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../web/lw-node.mjs';
import { launchChromium, chromiumMissing } from './chromium.mjs';
import { serveStatic } from './static-server.mjs';

const root = repoRoot();
const wasmDir = path.resolve(root, process.env.LW_WASM_DIR || 'build/wasm');
const shared = process.env.LW_SHARED || path.resolve(root, '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const cli = [process.env.LW_CLI, ...['build/release', 'build', 'build-model', 'build-demo'].map((d) => path.join(root, d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const skip = chromiumMissing() || (!existsSync(path.join(wasmDir, 'llamaweb-wasm.wasm')) ? `${path.relative(root, wasmDir)} not built (scripts/build-wasm.sh)` :
  !existsSync(stories) ? `no ${stories} (the shared test models)` : !cli ? 'no native llamaweb CLI (scripts/build.sh, or LW_CLI)' : false);
if (skip) console.log('SKIP: ' + skip);
const threaded = existsSync(path.join(wasmDir, 'mt/llamaweb-wasm.wasm'));

const STRICT = "script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'";
const NO_WASM = "script-src 'self'; worker-src 'self'";

// Serves the page, the package, the wasm builds and stories260K (with ranges), every response under csp;
// coi adds COOP/COEP/CORP (cross-origin isolation: the threaded build).
async function serve(csp, coi) {
  const dirs = [['/web/', path.join(root, 'web')], ['/wasm/', wasmDir], ['/tests/web/browser/', path.join(root, 'tests/web/browser')],
    ['/models/', path.dirname(stories)]];
  const server = createServer((req, res) => {
    res.setHeader('Content-Security-Policy', csp);
    if (coi) {
      res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
      res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
      res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
    }
    const p = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    serveStatic(req, res, p, dirs);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

// csp.html's findings (window.lwCsp) under the given policy.
async function runPage(browser, csp, coi, n) {
  const srv = await serve(csp, coi);
  const page = await browser.newPage(null);
  try {
    await page.goto(`${srv.base}/tests/web/browser/csp.html?n=${n}`);
    for (let i = 0; i < 1200; i++) {
      const r = await page.evaluate('window.lwCsp ?? null');
      if (r) return r;
      await new Promise((res) => setTimeout(res, 100));
    }
    throw new Error('no result from the page; logs:\n' + page.logs.join('\n'));
  } finally {
    await page.close();
    srv.server.close();
  }
}

const N = 16;

test('strict CSP (no unsafe-eval): the CPU engine on the page and in its worker', { skip, timeout: 300000 }, async () => {
  const run = execFileSync(cli, ['run', '-m', stories, '-p', 'Once upon a time', '-n', String(N), '--temp', '0', '-t', '1'],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const want = run.split('\n').find((l) => l.startsWith('ids: ')).split('|')[1].trim().split(/\s+/).map(Number);
  assert.equal(want.length, N);
  const browser = await launchChromium();
  try {
    for (const coi of threaded ? [false, true] : [false]) {
      const r = await runPage(browser, STRICT, coi, N);
      assert.equal(r.coi, coi);
      assert.deepEqual(r.violations, [], 'no CSP violation on the page');
      for (const where of ['page', 'worker']) {
        const s = r[where];
        assert.equal(s.error, undefined, `${where} (isolated: ${coi}): ${s.error}`);
        console.log(`# ${STRICT}${coi ? ', isolated' : ''}: ${where} on ${s.device} (${s.build}, ${s.threads} thread(s)): ${JSON.stringify(s.text)}`);
        assert.equal(s.device, 'cpu');
        assert.equal(s.build, coi ? 'threads' : 'single');
        assert.deepEqual(s.tokens, want, `${where}: the native CLI's greedy ids`);
      }
    }
    if (!threaded) console.log('# SKIP: isolated page (no wasm/mt/ build)');
    // the control: without 'wasm-unsafe-eval' the module cannot be compiled, and load() rejects saying why
    const c = await runPage(browser, NO_WASM, false, N);
    for (const where of ['page', 'worker']) {
      console.log(`# ${NO_WASM}: ${where}: ${c[where].code}: ${c[where].error}`);
      assert.match(c[where].error || '', /Content Security Policy/i, `${where}: refused by the policy`);
    }
  } finally {
    await browser.close();
  }
});
