// A model server for the browser tests (cache.test.mjs, stream.test.mjs): files from memory, every request
// logged, faults chosen per request by the test. Used as web/serve.mjs's intercept for paths /m/<name>.
//   const fs = faultServer();  fs.addFile('a.bin', bytes);  fs.fault = ({name, range, from, n}) => ({...});
// A fault: {status, retryAfter} (answer with that status), cutAfter (drop the connection after that many
// body bytes), truncateAt (the file ends there: shorter answers, consistent headers), extra (bytes past the
// end), etag (another ETag), noRange (ignore Range: 200 with the whole file), delayMs (between 16 KiB pieces).
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { before, after } from 'node:test';
import { repoRoot } from '../../web/lw-node.mjs';
import { startServer } from '../../web/serve.mjs';
import { launchChromium, chromiumMissing } from './chromium.mjs';

// What a browser test of the cache needs: {wasmDir, stories (stories260K's path), skip (no Chromium),
// modelSkip (also no wasm build or no ../shared)}, the reasons printed.
export function browserTestEnv() {
  const root = repoRoot();
  const wasmDir = path.resolve(root, process.env.LW_WASM_DIR || 'build/wasm');
  const stories = path.join(process.env.LW_SHARED || path.resolve(root, '../shared'), 'models/stories260K.gguf');
  const skip = chromiumMissing() || false;
  if (skip) console.log('SKIP: ' + skip);
  const modelSkip = skip || (!existsSync(path.join(wasmDir, 'llamaweb-wasm.wasm')) ? `${wasmDir} not built (scripts/build-wasm.sh)`
    : !existsSync(stories) ? `no ${stories} (the shared test models)` : false);
  if (modelSkip && !skip) console.log('SKIP (model cases): ' + modelSkip);
  return { wasmDir, stories, skip, modelSkip };
}

export const sha = (b) => createHash('sha256').update(b).digest('hex');

// Deterministic bytes (xorshift), so a wrong offset shows as a wrong hash.
export function bytes(n, seed) {
  const b = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; b[i] = x & 255; }
  return b;
}

export function faultServer() {
  const s = {
    files: new Map(), // name -> {size, read(start, end) -> Uint8Array, etag, digest?}
    log: [],          // {name, range, sent} of every /m/ request (sent: body bytes written, once it ended)
    fault: null,      // ({name, range, from, n}) -> a fault or null
    addFile: (name, b, extra = {}) => s.files.set(name, { size: b.length, read: (a, e) => b.subarray(a, e), etag: `"${sha(b).slice(0, 16)}"`, ...extra }),
    requests: (name) => s.log.filter((r) => r.name === name),
    // web/serve.mjs's intercept: true when it answered
    intercept: (req, res, p) => {
      if (!p.startsWith('/m/')) return false;
      serve(s, req, res, decodeURIComponent(p.slice(3))).catch(() => res.destroy());
      return true;
    },
  };
  return s;
}

// A fault for s.fault: the first download request (not the one-byte probe) is cut after `first` bytes, every
// later one before any byte.
export function cutEveryTry(first) {
  let n = 0;
  return ({ range }) => (!range || range === 'bytes=0-0' ? null : { cutAfter: n++ ? 0 : first });
}

// A headless Chromium on `html`, served at /test/<name> by web/serve.mjs (the package, the wasm build of
// wasmDir) with s's files under /m/: {srv, browser, page, base, close()}. The page must set window.ready.
export async function openTestPage(s, wasmDir, name, html) {
  const srv = await startServer({ port: 0, wasmDir, intercept: (req, res, p) => {
    if (p === '/test/' + name) { res.setHeader('Content-Type', 'text/html; charset=utf-8'); res.end(html); return true; }
    return s.intercept(req, res, p);
  } });
  const base = `http://127.0.0.1:${srv.port}`;
  const browser = await launchChromium();
  const page = await browser.newPage(base + '/test/' + name);
  if (await page.evaluate('window.ready') !== true) throw new Error('the test page did not start: ' + page.logs.join('\n'));
  const close = async () => {
    await browser.close();
    srv.server.close();
    srv.server.closeAllConnections();
  };
  return { srv, browser, page, base, close };
}

// openTestPage in the file's before() (unless skip), closed in after(): the returned object gets its
// fields (page, base, ...) once the page is open.
export function useTestPage(s, wasmDir, name, html, skip) {
  const t = {};
  before(async () => { if (!skip) Object.assign(t, await openTestPage(s, wasmDir, name, html)); });
  after(async () => { if (t.close) await t.close(); });
  return t;
}

// `expr` evaluated on t's page with the origin's real quota 1 MiB above what it stores now (DevTools
// Storage.overrideQuotaForOrigin: OPFS refuses a write past it, estimate() does not show it), restored after.
export async function withLowQuota(t, expr) {
  const used = (await t.page.evaluate('navigator.storage.estimate()')).usage;
  await t.page.send('Storage.overrideQuotaForOrigin', { origin: t.base, quotaSize: used + (1 << 20) });
  try {
    return await t.page.evaluate(expr);
  } finally {
    await t.page.send('Storage.overrideQuotaForOrigin', { origin: t.base });
  }
}

async function serve(s, req, res, name) {
  const f = s.files.get(name);
  if (!f) { res.statusCode = 404; res.end(); return; }
  const range = req.headers.range || null;
  const m = /^bytes=(\d+)-(\d*)$/.exec(range || '');
  const n = s.requests(name).length;
  const entry = { name, range, sent: 0 };
  s.log.push(entry);
  const a = (s.fault && s.fault({ name, range, from: m ? Number(m[1]) : 0, n })) || {};
  if (a.status) {
    if (a.retryAfter !== undefined) res.setHeader('Retry-After', String(a.retryAfter));
    res.statusCode = a.status;
    res.end();
    return;
  }
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('ETag', a.etag || f.etag);
  res.setHeader('Last-Modified', 'Tue, 01 Dec 2026 00:00:00 GMT');
  if (f.digest) res.setHeader('Repr-Digest', `sha-256=:${Buffer.from(f.digest, 'hex').toString('base64')}:`);
  let start = 0, end = f.size - 1;
  if (m && !a.noRange) {
    start = Number(m[1]);
    if (m[2] !== '') end = Math.min(end, Number(m[2]));
    if (start > end) { res.statusCode = 416; res.setHeader('Content-Range', `bytes */${f.size}`); res.end(); return; }
    res.statusCode = 206;
  }
  // a server whose file is cut off at truncateAt: shorter answers, consistent headers
  const last = a.truncateAt !== undefined ? Math.min(end, a.truncateAt - 1) : end;
  if (res.statusCode === 206) res.setHeader('Content-Range', `bytes ${start}-${Math.max(start, last)}/${f.size}`);
  const body = last >= start ? f.read(start, last + 1) : new Uint8Array(0);
  const tail = a.extra ? new Uint8Array(a.extra) : new Uint8Array(0);
  res.setHeader('Content-Length', body.length + tail.length);
  for (let at = 0; at < body.length; at += 16 << 10) {
    const c = body.subarray(at, Math.min(body.length, at + (16 << 10)));
    if (a.cutAfter !== undefined && entry.sent + c.length > a.cutAfter) {
      res.write(c.subarray(0, a.cutAfter - entry.sent));
      entry.sent = a.cutAfter;
      // let the page read those bytes, then drop the connection (a fetch body that errors drops what the page
      // had not read yet: it would resume from an earlier byte, correctly, but the tests want the byte sent)
      await new Promise((r) => setTimeout(r, 300));
      res.destroy();
      return;
    }
    if (!res.write(c)) await new Promise((r) => res.once('drain', r));
    entry.sent += c.length;
    if (a.delayMs) await new Promise((r) => setTimeout(r, a.delayMs));
    if (res.destroyed) return;
  }
  res.end(tail);
}
