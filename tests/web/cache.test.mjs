// The OPFS model cache (web/lw-cache.mjs) and open(url) through it, in headless Chromium (tests/web/chromium.mjs)
// against a server this test controls (web/serve.mjs for the package and the wasm build, with an intercept
// that serves files from memory and injects faults). Checks, with 256 KiB parts (one range request each):
//  - a download whose connection is cut mid-body and refused with 503 continues with a range request from the
//    byte it stopped at and ends complete, its bytes the file's (SHA-256 against Node's); a second call and a
//    reloaded page use the entry without any request;
//  - a connection cut on every try fails with NETWORK, the entry incomplete (never marked complete) with the
//    bytes that arrived, and the next call continues that part where it stopped;
//  - a server whose file is shorter than it says, or that sends more than asked: NETWORK, never complete;
//  - SHA-256: a wrong digest (given, or the server's Repr-Digest) fails with NETWORK and removes the entry;
//    the right one is checked in a 'verify' phase; a file changed on the server mid-download drops the entry;
//  - a server without ranges: one GET, parts written in order, a cut starts over;
//  - an aborted signal fetches nothing (ABORTED); aborting mid-download gives ABORTED and no complete entry;
//  - quota: a file larger than the free quota (navigator.storage.estimate, the real 10 GiB of a headless
//    profile, against a 20 GiB file the server announces) fails with QUOTA_EXCEEDED before any range
//    request; a write refused by the real quota system (the origin's quota lowered to 1 MiB with the DevTools
//    protocol's Storage.overrideQuotaForOrigin, which estimate() does not show) fails with QUOTA_EXCEEDED
//    and leaves nothing behind;
//  - with the wasm build and ../shared: open(url) of stories260K on WebGPU downloads it ('download' then
//    'upload' phases) and generates; the URL of any part of a split stories260K (3 parts,
//    tests/web/gguf-split.mjs) opens all parts through the cache, same tokens; an abort during the upload
//    gives ABORTED; the reloaded page opens both from OPFS with no request (CPU engine), same tokens;
//    {cache: false} reads by range requests and stores nothing.
// Then tests/web/cache-stream.mjs (open(url) streaming into the cache) and tests/web/cache-faults.mjs (storage
// faults, a killed tab, two tabs, what is on disk checked), each on its own page.
// Skips (visibly) without Chromium; the model cases without the wasm build or ../shared.
// Run: LW_WASM_DIR=... node --test tests/web/cache.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ggufSplit } from './gguf-split.mjs';
import { faultServer, bytes, sha, useTestPage, browserTestEnv, withLowQuota } from './fault-server.mjs';

const { wasmDir, stories, skip, modelSkip } = browserTestEnv();

const PART = 256 << 10;
const srvm = faultServer();
const { files, log, addFile, requests } = srvm;

// The page: the package's browser entry and the cache module, plus helpers that return plain values.
const PAGE = `<!doctype html><meta charset="utf-8"><title>cache test</title><script type="module">
import * as lw from '/llamaweb.mjs';
import * as cache from '/lw-cache.mjs';
const hex = async (blob) => { const h = new cache.Sha256(); for (let at = 0; at < blob.size; at += 1 << 20) h.update(new Uint8Array(await blob.slice(at, at + (1 << 20)).arrayBuffer())); return h.hex(); };
const failure = (e) => ({ ok: false, code: e.code, message: e.message, name: e.name });
window.lw = lw;
window.cache = cache;
window.t = {
  progress: [],
  // cacheModel(url) with small parts and short backoff; abortAt: abort once that many bytes are done
  async cache(url, opts = {}, abortAt = -1) {
    t.progress = [];
    const ac = new AbortController();
    try {
      const b = await cache.cacheModel(url, { partBytes: ${PART}, retryDelayMs: 5, signal: ac.signal, ...opts,
        onProgress: (d, n, p) => { t.progress.push([d, n, p]); if (abortAt >= 0 && d > abortAt) ac.abort(); } });
      return { ok: true, size: b.size, sha: await hex(b) };
    } catch (e) { return failure(e); }
  },
  list: () => cache.listCached(),
  entries: async () => { const out = []; try { const d = await (await navigator.storage.getDirectory()).getDirectoryHandle('llamaweb-cache'); for await (const [n] of d.entries()) out.push(n); } catch {} return out; },
  async open(url, opts = {}, abortAtPhase = null) {
    t.progress = [];
    const ac = new AbortController();
    try {
      window.L = window.L || await lw.Llamaweb.load({ wasmBase: '/wasm/' });
      const m = await L.open(url, { nCtx: 64, partBytes: ${PART}, retryDelayMs: 5, retries: 0, signal: ac.signal, ...opts,
        onProgress: (d, n, p) => { t.progress.push([d, n, p]); if (p === abortAtPhase) ac.abort(); } });
      let mem = null;
      try {
        const r = await m.generate('Once upon a time', { maxTokens: 6 });
        mem = m.memory();
        return { ok: true, text: r.text, tokens: r.tokens, download: m.download, memory: mem, info: m.info };
      } finally { m.free(); }
    } catch (e) { return failure(e); }
  },
};
window.ready = true;
</script>`;

const T = useTestPage(srvm, wasmDir, 'cache.html', PAGE, skip);
const call = async (expr) => { const t0 = Date.now(); const v = await T.page.evaluate(expr); if (process.env.LW_TIME) console.log(`# ${Date.now() - t0} ms: ${expr}`); return v; };
const phases = async () => [...new Set((await call('t.progress')).map((p) => p[2]))];


test('a cut connection and a 503 are resumed from the byte reached; the entry is complete; a second call and a reloaded page make no request', { skip, timeout: 60000 }, async () => {
  const b = bytes(1500000, 1);
  addFile('a.bin', b);
  // request 1 is the probe, 2.. the parts (3 at once): part 1's first answer is cut after 100 KB, its second is a 503
  let cuts = 0, refusals = 0;
  srvm.fault = ({ from, range }) => {
    if (range && from === PART && !cuts++) return { cutAfter: 100000 };
    if (range && from > PART && from < 2 * PART && !refusals++) return { status: 503, retryAfter: 0 };
    return null;
  };
  const r = await call(`t.cache('/m/a.bin')`);
  srvm.fault = null;
  assert.ok(r.ok, JSON.stringify(r));
  assert.equal(r.size, b.length);
  assert.equal(r.sha, sha(b), 'the cached bytes are the file\'s');
  const ranges = requests('a.bin').map((x) => x.range);
  const resumed = ranges.map((x) => Number(/bytes=(\d+)-/.exec(x)[1])).filter((s) => s > PART && s < 2 * PART);
  console.log(`# a.bin: ${ranges.length} requests: ${ranges.join(', ')}`);
  assert.equal(ranges[0], 'bytes=0-0', 'a probe first');
  assert.equal(resumed.length, 2, 'the 503, then the successful continuation');
  assert.ok(resumed[0] === resumed[1] && resumed[0] === PART + 100000, `continued from the byte reached, ${resumed[0] - PART} into the part`);
  assert.equal(new Set(ranges).size, ranges.length - 1, 'no part was downloaded twice (only the resumed range repeats)');
  const prog = await call('t.progress');
  assert.deepEqual(prog[prog.length - 1], [b.length, b.length, 'download']);
  for (let i = 1; i < prog.length; i++) assert.ok(prog[i][0] >= prog[i - 1][0], 'progress only grows');
  const [e] = (await call('t.list()')).filter((x) => x.url.endsWith('/m/a.bin'));
  assert.equal(e.complete, true);
  assert.equal(e.size, b.length);
  assert.equal(e.bytes, b.length);
  assert.equal(e.etag, files.get('a.bin').etag);
  // a hit: no request at all, in this page and in the reloaded one
  const n = log.length;
  assert.equal((await call(`t.cache('/m/a.bin')`)).sha, sha(b));
  await T.page.reload();
  assert.equal((await call(`t.cache('/m/a.bin')`)).sha, sha(b));
  assert.equal(log.length, n, 'the cache was hit: nothing asked of the server');
});

test('a connection cut on every try: NETWORK, the entry never complete, and the next call continues the part where it stopped', { skip, timeout: 60000 }, async () => {
  const b = bytes(1200000, 2);
  addFile('b.bin', b);
  // part 3: its first answer is cut after 40 KB, every later one before any byte (a cut that makes progress
  // resets the count of tries, so a connection that keeps breaking after some bytes still finishes)
  const part = 3 * PART;
  let first = true;
  srvm.fault = ({ from, range }) => {
    if (!range || from < part || from >= part + PART) return null;
    const a = { cutAfter: first ? 40000 : 0 };
    first = false;
    return a;
  };
  const r = await call(`t.cache('/m/b.bin', { retries: 2 })`);
  assert.equal(r.ok, false);
  assert.equal(r.code, 'NETWORK', r.message);
  assert.match(r.message, /gave up after 3 tries/);
  const [e] = (await call('t.list()')).filter((x) => x.url.endsWith('/m/b.bin'));
  assert.equal(e.complete, false);
  const tries = requests('b.bin').filter((x) => x.range && Number(/=(\d+)/.exec(x.range)[1]) >= part && Number(/=(\d+)/.exec(x.range)[1]) < part + PART);
  console.log(`# b.bin: part 3 tried ${tries.length} times (${tries.map((x) => x.range).join(', ')}); ${e.bytes} of ${e.size} bytes kept`);
  assert.equal(tries.length, 3, 'the first try and 2 retries');
  assert.ok(e.bytes >= part + 40000 && e.bytes < b.length, `what arrived is kept (${e.bytes})`);
  // the server heals: the part is continued where the last cut left it, from a range request past its start
  srvm.fault = null;
  const n = log.length;
  const r2 = await call(`t.cache('/m/b.bin')`);
  assert.ok(r2.ok, JSON.stringify(r2));
  assert.equal(r2.sha, sha(b));
  const after = log.slice(n).filter((x) => x.name === 'b.bin').map((x) => x.range);
  console.log(`# b.bin resumed: ${after.join(', ')}`);
  assert.equal(after[0], 'bytes=0-0');
  const starts = after.slice(1).map((x) => Number(/=(\d+)/.exec(x)[1]));
  assert.ok(starts.every((x) => x >= part), 'complete parts were not asked for again');
  assert.ok(starts.includes(part + 40000), 'part 3 continued at the byte its first try reached');
  assert.equal((await call('t.list()')).find((x) => x.url.endsWith('/m/b.bin')).complete, true);
});

test('a server whose file is shorter than it says, or that sends more than asked: NETWORK, never complete', { skip, timeout: 60000 }, async () => {
  const b = bytes(700000, 3);
  addFile('c.bin', b);
  srvm.fault = ({ range }) => (range ? { truncateAt: 600000 } : null);
  let r = await call(`t.cache('/m/c.bin', { retries: 2 })`);
  assert.equal(r.code, 'NETWORK', JSON.stringify(r));
  assert.match(r.message, /the body ended at byte 600000/);
  let [e] = (await call('t.list()')).filter((x) => x.url.endsWith('/m/c.bin'));
  assert.equal(e.complete, false);
  assert.equal(e.bytes, 600000);
  srvm.fault = ({ range, from }) => (range && from >= 2 * PART ? { extra: 7 } : null);
  r = await call(`t.cache('/m/c.bin', { retries: 1 })`);
  assert.equal(r.code, 'NETWORK', JSON.stringify(r));
  assert.match(r.message, /sent more than asked/);
  [e] = (await call('t.list()')).filter((x) => x.url.endsWith('/m/c.bin'));
  assert.equal(e.complete, false);
  srvm.fault = null;
  assert.equal((await call(`t.cache('/m/c.bin')`)).sha, sha(b));
});

test('SHA-256: a wrong digest (given, or the server\'s Repr-Digest) removes the entry; the right one is checked in a verify phase', { skip, timeout: 60000 }, async () => {
  const b = bytes(600000, 4);
  addFile('d.bin', b);
  let r = await call(`t.cache('/m/d.bin', { sha256: '${'0'.repeat(64)}' })`);
  assert.equal(r.code, 'NETWORK', JSON.stringify(r));
  assert.match(r.message, /SHA-256 [0-9a-f]{64}, expected 0{64}: the download is corrupt/);
  assert.equal((await call('t.list()')).some((x) => x.url.endsWith('/m/d.bin')), false, 'removed');
  r = await call(`t.cache('/m/d.bin', { sha256: '${sha(b).toUpperCase()}' })`);
  assert.ok(r.ok, JSON.stringify(r));
  assert.deepEqual(await phases(), ['download', 'verify']);
  const prog = await call('t.progress');
  assert.deepEqual(prog[prog.length - 1], [b.length, b.length, 'verify']);
  assert.equal((await call('t.list()')).find((x) => x.url.endsWith('/m/d.bin')).sha256, sha(b));
  // the server states a digest: a wrong one fails the download, the right one is recorded
  const e2 = bytes(300000, 5);
  addFile('e.bin', e2, { digest: sha(bytes(300000, 6)) });
  r = await call(`t.cache('/m/e.bin')`);
  assert.equal(r.code, 'NETWORK', JSON.stringify(r));
  assert.match(r.message, /SHA-256/);
  files.get('e.bin').digest = sha(e2);
  assert.ok((await call(`t.cache('/m/e.bin')`)).ok);
  assert.equal((await call('t.list()')).find((x) => x.url.endsWith('/m/e.bin')).sha256, sha(e2));
  // a file that changes on the server during the download: the call fails, the entry is dropped
  addFile('f.bin', bytes(900000, 7));
  srvm.fault = ({ range, from }) => (range && from >= 2 * PART ? { etag: '"changed"' } : null);
  r = await call(`t.cache('/m/f.bin', { parallel: 1 })`);
  srvm.fault = null;
  assert.equal(r.code, 'NETWORK', JSON.stringify(r));
  assert.match(r.message, /changed on the server during the download/);
  assert.equal((await call('t.list()')).some((x) => x.url.endsWith('/m/f.bin')), false);
});

test('a server without ranges: one GET written part by part; a cut starts the GET over', { skip, timeout: 60000 }, async () => {
  const b = bytes(1100000, 8);
  addFile('g.bin', b);
  let gets = 0;
  srvm.fault = () => (gets++ === 0 ? { noRange: true, cutAfter: 600000 } : { noRange: true });
  const r = await call(`t.cache('/m/g.bin')`);
  srvm.fault = null;
  assert.ok(r.ok, JSON.stringify(r));
  assert.equal(r.sha, sha(b));
  assert.equal(requests('g.bin').length, 2, 'the probe (answered with the whole file, cut) and one more GET');
  const prog = await call('t.progress');
  assert.deepEqual(prog[prog.length - 1], [b.length, b.length, 'download']);
});

test('abort: an aborted signal asks nothing; aborting mid-download gives ABORTED and no complete entry', { skip, timeout: 60000 }, async () => {
  const b = bytes(1000000, 9);
  addFile('h.bin', b);
  const r0 = await T.page.evaluate(`(async () => { try { await cache.cacheModel('/m/h.bin', { signal: AbortSignal.abort() }); return 'resolved'; }
    catch (e) { return e.code; } })()`);
  assert.equal(r0, 'ABORTED');
  assert.equal(requests('h.bin').length, 0);
  srvm.fault = () => ({ delayMs: 30 });
  const r = await call(`t.cache('/m/h.bin', {}, 100000)`);
  srvm.fault = null;
  assert.equal(r.code, 'ABORTED', JSON.stringify(r));
  const [e] = (await call('t.list()')).filter((x) => x.url.endsWith('/m/h.bin'));
  assert.equal(e.complete, false);
  console.log(`# h.bin aborted with ${e.bytes} of ${e.size} bytes kept`);
  assert.equal((await call(`t.cache('/m/h.bin')`)).sha, sha(b), 'the next call finishes it');
});

test('quota: a file over the free quota fails before any download; a write the quota refuses leaves nothing behind', { skip, timeout: 60000 }, async () => {
  const est = await call('navigator.storage.estimate()');
  const huge = 2 * est.quota;
  files.set('huge.bin', { size: huge, read: (s, e) => new Uint8Array(e - s), etag: '"huge"' });
  const r = await call(`t.cache('/m/huge.bin')`);
  assert.equal(r.code, 'QUOTA_EXCEEDED', JSON.stringify(r));
  console.log(`# ${(huge / 2 ** 30).toFixed(0)} GiB against a quota of ${(est.quota / 2 ** 30).toFixed(0)} GiB: ${r.message}`);
  assert.deepEqual(requests('huge.bin').map((x) => x.range), ['bytes=0-0'], 'only the probe');
  assert.equal((await call('t.list()')).some((x) => x.url.endsWith('/m/huge.bin')), false);
  // the origin's real quota lowered below what is stored plus the file: OPFS refuses a write on the way
  const before = await call('t.entries()');
  addFile('q.bin', bytes(3 << 20, 10));
  const r2 = await withLowQuota(T, `t.cache('/m/q.bin')`);
  assert.equal(r2.code, 'QUOTA_EXCEEDED', JSON.stringify(r2));
  console.log(`# write refused by the quota: ${r2.message}`);
  assert.ok(requests('q.bin').length > 1, 'the download had started');
  assert.deepEqual(await call('t.entries()'), before, 'nothing left behind');
  assert.ok((await call(`t.cache('/m/q.bin')`)).ok, 'with the quota back, it downloads');
});

test('open(url): stories260K through the cache (download, then upload); a split GGUF by any part\'s URL; abort during the upload; from OPFS after a reload', { skip: modelSkip, timeout: 240000 }, async () => {
  const file = new Uint8Array(readFileSync(stories));
  addFile('stories260K.gguf', file);
  const r1 = await call(`t.open('/m/stories260K.gguf')`);
  assert.ok(r1.ok, JSON.stringify(r1) + T.page.logs.slice(-10).join('\n'));
  console.log(`# open(url): ${JSON.stringify(r1.text)}; phases ${(await phases()).join(', ')}`);
  assert.ok(r1.text.startsWith(', there was a little'), r1.text);
  // one stream: the download goes to OPFS and to the engine at once (tests/web/cache-stream.mjs)
  assert.deepEqual((await phases()).sort(), ['cache-write', 'download', 'ready', 'upload']);
  assert.equal(r1.download.network, file.length, 'downloaded once');
  assert.equal(r1.download.cache, 0, 'nothing read back from OPFS');
  // memory: device 'auto' puts it on the CPU engine here (a software adapter); GPU kinds: split.test
  const mem = r1.memory;
  console.log(`# model.memory(): ${JSON.stringify(mem)}`);
  assert.equal(mem.device, 'cpu');
  assert.equal(mem.cpu.weights, r1.info.weightBytes);
  assert.ok(mem.wasmHeap > mem.cpu.weights && mem.load.bytes > 0, JSON.stringify(mem));
  assert.equal(await call('lw.cacheModel === cache.cacheModel && lw.listCached === cache.listCached'), true, 'the package re-exports the cache');
  // split: 3 parts, opened by the URL of the second
  const parts = ggufSplit(file, 16, 'stories260K');
  for (const p of parts) addFile(p.name, p.bytes);
  const r3 = await call(`t.open('/m/${parts[1].name}')`);
  assert.ok(r3.ok, JSON.stringify(r3));
  assert.deepEqual(r3.tokens, r1.tokens, 'the split model decodes as the whole file');
  const list = (await call('t.list()')).filter((x) => /stories260K-0000\d-of-00003/.test(x.url));
  assert.equal(list.length, 3);
  assert.ok(list.every((x) => x.complete));
  console.log(`# split GGUF by URL: ${parts.map((p) => `${p.name} ${p.bytes.length} B`).join(', ')}; same tokens`);
  // abort during the upload: ABORTED, and the page opens the next model as before
  const r4 = await call(`t.open('/m/stories260K.gguf', {}, 'upload')`);
  assert.equal(r4.code, 'ABORTED', JSON.stringify(r4));
  assert.deepEqual((await call(`t.open('/m/stories260K.gguf')`)).tokens, r1.tokens);
  // the reloaded page: both models from OPFS, no request (on the CPU engine: a second SwiftShader pipeline
  // compile would cost ~45 s here, and the engines read the same source)
  const n = log.length;
  await T.page.reload();
  for (const url of ['/m/stories260K.gguf', `/m/${parts[2].name}`]) {
    const r2 = await call(`t.open('${url}', { device: 'cpu' })`);
    assert.ok(r2.ok, JSON.stringify(r2));
    assert.deepEqual(r2.tokens, r1.tokens);
    assert.deepEqual(await phases(), ['upload', 'ready']);
  }
  assert.equal(log.length, n, 'the reloaded page read the models from OPFS only');
  // opted out: range requests, and no new entry
  const r6 = await call(`t.open('/m/stories260K.gguf?direct', { device: 'cpu', cache: false })`);
  assert.deepEqual(r6.tokens, r1.tokens);
  const direct = log.slice(n).map((x) => x.range);
  assert.ok(direct.length >= 2 && direct.every((x) => /^bytes=\d+-\d+$/.test(x)), `range requests: ${direct.join(', ')}`);
  assert.equal((await call('t.list()')).some((x) => x.url.includes('?direct')), false);
});

// open(url) streaming into the cache and the engine at once (its own page and browser)
await import('./cache-stream.mjs');

// storage faults: refused writes and commits, a killed tab, two tabs, what is on disk checked (its own page)
await import('./cache-faults.mjs');
