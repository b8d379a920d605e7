// Storage faults of the OPFS model cache (web/lw-cache.mjs) in headless Chromium, against the fault-injecting
// server (tests/web/fault-server.mjs). Each ends in a typed error or in a download that makes the entry right
// again, never in a cached file with other bytes. Checks, with 256 KiB parts:
//  - a write, or a part's commit, that the storage refuses with something other than the quota (injected on
//    the page: FileSystemWritableFileStream's write / close reject with InvalidStateError; Chromium has no way
//    to make its disk fail) fails the call at once with NETWORK naming the model cache, with no range asked
//    twice (a storage fault is not retried as a network one); the entry is not complete, and the next call
//    downloads exactly the bytes that are not on disk; the same through the one-pass stream (cacheStream);
//  - a tab whose renderer is killed mid-download (DevTools Page.crash) leaves an incomplete entry and no lock:
//    the next call (another tab) downloads exactly what is not on disk and gets the file;
//  - two tabs caching one file at once: one download (every byte sent once, one probe), both get the file;
//  - what is on disk is checked before use: a part cut short or removed under a complete entry is downloaded
//    again (that part only) and the file's SHA-256 (the server's Repr-Digest) checked again ('verify'); a
//    meta.json that is not JSON, or holds impossible sizes, starts the entry over; a part committed whole that
//    meta.json does not list counts as done (no range request); bytes changed on disk with the sizes kept are
//    found by {verify: true} and downloaded again.
// Run by tests/web/cache.test.mjs (which imports it), or alone: node --test tests/web/cache-faults.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { faultServer, bytes, sha, useTestPage, browserTestEnv } from './fault-server.mjs';

const { wasmDir, skip } = browserTestEnv();

const PART = 256 << 10;
const srvm = faultServer();
const { addFile, requests } = srvm;

const PAGE = `<!doctype html><meta charset="utf-8"><title>cache faults</title><script type="module">
import * as cache from '/lw-cache.mjs';
const hex = async (blob) => { const h = new cache.Sha256(); for (let at = 0; at < blob.size; at += 1 << 20) h.update(new Uint8Array(await blob.slice(at, at + (1 << 20)).arrayBuffer())); return h.hex(); };
const failure = (e) => ({ ok: false, code: e.code, message: e.message, name: e.name });
const W = FileSystemWritableFileStream.prototype, H = FileSystemFileHandle.prototype;
const orig = { write: W.write, close: W.close, createWritable: H.createWritable };
const entryDir = async (url) => {
  const key = new cache.Sha256().update(new TextEncoder().encode(new URL(url, location.href).href)).hex().slice(0, 32);
  return (await (await navigator.storage.getDirectory()).getDirectoryHandle('llamaweb-cache')).getDirectoryHandle(key);
};
window.cache = cache;
window.t = {
  progress: [],
  // cacheModel(url) with small parts and short backoff, given up after 20 s (a lock never released)
  async cache(url, opts = {}) {
    t.progress = [];
    try {
      const b = await Promise.race([
        cache.cacheModel(url, { partBytes: ${PART}, retryDelayMs: 5, ...opts, onProgress: (d, n, p) => t.progress.push(p) }),
        new Promise((_, reject) => setTimeout(() => reject(new Error('no answer in 20 s')), 20000))]);
      return { ok: true, size: b.size, sha: await hex(b) };
    } catch (e) { return failure(e); }
  },
  // cacheStream([url]) read front to back in 64 KiB reads, as an engine would
  async stream(url) {
    try {
      const h = await cache.cacheStream([url], { partBytes: ${PART}, streamBytes: ${PART}, retryDelayMs: 5 });
      const s = h.sources[0], sh = new cache.Sha256();
      try {
        for (let at = 0; at < s.size; at += 65536) sh.update(await s.read(at, Math.min(65536, s.size - at)));
      } catch (e) { h.stop(e); }
      await h.done;
      return { ok: true, sha: sh.hex() };
    } catch (e) { return failure(e); }
  },
  start(url) { t.pending = t.cache(url); return true; },
  list: () => cache.listCached(),
  // part writes (bytes, not meta.json's text) fail once n bytes were written into parts; or part commits fail
  failWrites(n) {
    let k = 0;
    H.createWritable = async function (o) { const s = await orig.createWritable.call(this, o); s.lwName = this.name; return s; };
    W.write = function (d) { return this.lwName && this.lwName[0] === 'p' && (k += d.byteLength || 0) > n ? Promise.reject(new DOMException('injected write failure', 'InvalidStateError')) : orig.write.call(this, d); };
  },
  failCommits() {
    H.createWritable = async function (o) { const s = await orig.createWritable.call(this, o); s.lwName = this.name; return s; };
    W.close = function () { return this.lwName && this.lwName[0] === 'p' ? Promise.reject(new DOMException('injected commit failure', 'InvalidStateError')) : orig.close.call(this); };
  },
  heal() { Object.assign(W, { write: orig.write, close: orig.close }); H.createWritable = orig.createWritable; },
  // surgery on an entry's files, as something outside the cache might do it
  async truncate(url, name, n) { const w = await (await (await entryDir(url)).getFileHandle(name)).createWritable({ keepExistingData: true }); await w.truncate(n); await w.close(); },
  async remove(url, name) { await (await entryDir(url)).removeEntry(name); },
  async flip(url, name, at, n) {
    const fh = await (await entryDir(url)).getFileHandle(name);
    const b = new Uint8Array(await (await fh.getFile()).slice(at, at + n).arrayBuffer()).map((x) => x ^ 0xff);
    const w = await fh.createWritable({ keepExistingData: true }); await w.seek(at); await w.write(b); await w.close();
  },
  async meta(url) { return JSON.parse(await (await (await (await entryDir(url)).getFileHandle('meta.json')).getFile()).text()); },
  async setMeta(url, text) { const w = await (await (await entryDir(url)).getFileHandle('meta.json')).createWritable(); await w.write(text); await w.close(); },
};
window.ready = true;
</script>`;

const T = useTestPage(srvm, wasmDir, 'cache-faults.html', PAGE, skip);
const call = (expr, page = T.page) => page.evaluate(expr);
const entry = async (name) => (await call('t.list()')).find((x) => x.url.endsWith('/m/' + name));
const ranges = (name) => requests(name).filter((x) => x.range && x.range !== 'bytes=0-0');
const probes = (name) => requests(name).filter((x) => x.range === 'bytes=0-0').length;
const sent = (name) => ranges(name).reduce((s, x) => s + x.sent, 0);
// the request log of one file from now on
const fresh = (name) => { srvm.log = srvm.log.filter((x) => x.name !== name); };
const secondTab = async () => {
  const p = await T.browser.newPage(T.base + '/test/cache-faults.html');
  assert.equal(await p.evaluate('window.ready'), true);
  return p;
};

test('a write or a commit the storage refuses: NETWORK at once, no range asked twice; the next call downloads exactly what is not on disk', { skip, timeout: 90000 }, async () => {
  for (const [name, inject] of [['w.bin', `t.failWrites(${3 * PART})`], ['c.bin', 't.failCommits()']]) {
    const b = bytes(8 * PART + 5000, name.length + name.charCodeAt(0));
    addFile(name, b);
    await call(inject);
    const r = await call(`t.cache('/m/${name}')`);
    await call('t.heal()');
    assert.equal(r.code, 'NETWORK', JSON.stringify(r));
    assert.match(r.message, /the model cache could not (write|commit) part \d+: InvalidStateError: injected/);
    const starts = ranges(name).map((x) => x.range);
    assert.equal(new Set(starts).size, starts.length, `retried: ${starts.join(', ')}`);
    const e = await entry(name);
    assert.equal(e.complete, false);
    console.log(`# ${name}: ${r.message}; ${starts.length} ranges asked, ${e.bytes} of ${e.size} bytes on disk`);
    fresh(name);
    const r2 = await call(`t.cache('/m/${name}')`);
    assert.equal(r2.sha, sha(b), JSON.stringify(r2));
    assert.equal(sent(name), b.length - e.bytes, 'only the bytes not on disk');
  }
  // the one-pass stream: a write refused mid-stream fails every read and the call with the same error
  const b = bytes(6 * PART, 77);
  addFile('s.bin', b);
  await call(`t.failWrites(${PART + 100000})`);
  const r = await call(`t.stream('/m/s.bin')`);
  await call('t.heal()');
  assert.equal(r.code, 'NETWORK', JSON.stringify(r));
  assert.match(r.message, /the model cache could not write part \d+/);
  assert.equal(ranges('s.bin').length, 1, 'not retried');
  const e = await entry('s.bin');
  assert.equal(e.complete, false);
  fresh('s.bin');
  assert.equal((await call(`t.stream('/m/s.bin')`)).sha, sha(b));
  assert.equal(sent('s.bin'), b.length - e.bytes, 'the stream continues from what is on disk');
});

test('a tab killed mid-download: no lock left, an incomplete entry; another tab downloads exactly what is not on disk', { skip, timeout: 90000 }, async () => {
  const b = bytes(16 * PART, 21);
  addFile('k.bin', b);
  const p2 = await secondTab();
  srvm.fault = () => ({ delayMs: 20 });
  await call(`t.start('/m/k.bin')`, p2);
  // the server's sent counts grow as it writes (requests in flight included)
  for (let i = 0; i < 400 && sent('k.bin') < 6 * PART; i++) await new Promise((r) => setTimeout(r, 50));
  p2.send('Page.crash').catch(() => {}); // the renderer dies (no answer comes): no close(), abort() or unload
  await new Promise((r) => setTimeout(r, 1000));
  await p2.close();
  srvm.fault = null;
  await new Promise((r) => setTimeout(r, 500));
  const e = await entry('k.bin');
  assert.ok(e && !e.complete, JSON.stringify(e));
  console.log(`# k.bin: the tab was killed with ${sent('k.bin')} bytes sent, ${e.bytes} of ${e.size} on disk`);
  fresh('k.bin');
  const r = await call(`t.cache('/m/k.bin')`);
  assert.equal(r.sha, sha(b), JSON.stringify(r));
  assert.equal(sent('k.bin'), b.length - e.bytes, 'only the bytes not on disk');
});

test('two tabs caching one file at once: one download, both get the file', { skip, timeout: 90000 }, async () => {
  const b = bytes(12 * PART + 77, 33);
  addFile('two.bin', b);
  const p2 = await secondTab();
  srvm.fault = () => ({ delayMs: 5 });
  try {
    const [r1, r2] = await Promise.all([call(`t.cache('/m/two.bin')`), call(`t.cache('/m/two.bin')`, p2)]);
    assert.equal(r1.sha, sha(b), JSON.stringify(r1));
    assert.equal(r2.sha, sha(b), JSON.stringify(r2));
  } finally {
    srvm.fault = null;
    await p2.close();
  }
  assert.equal(sent('two.bin'), b.length, 'every byte sent once');
  assert.equal(probes('two.bin'), 1, 'the second call found the entry complete');
});

test('what is on disk is checked: parts cut short or removed, a bad meta.json, a part not listed, changed bytes with verify', { skip, timeout: 90000 }, async () => {
  const b = bytes(4 * PART + 1000, 55);
  addFile('d.bin', b, { digest: sha(b) }); // the server sends Repr-Digest: the entry knows its SHA-256
  const url = `'/m/d.bin'`;
  assert.equal((await call(`t.cache(${url})`)).sha, sha(b));
  assert.equal((await entry('d.bin')).sha256, sha(b));
  // a part cut short, another removed: those two downloaded again, the whole file hashed again
  await call(`t.truncate(${url}, 'p00001', 1000)`);
  await call(`t.remove(${url}, 'p00003')`);
  fresh('d.bin');
  let r = await call(`t.cache(${url})`);
  assert.equal(r.sha, sha(b), JSON.stringify(r));
  assert.deepEqual(ranges('d.bin').map((x) => x.range).sort(), [`bytes=${PART}-${2 * PART - 1}`, `bytes=${3 * PART}-${4 * PART - 1}`]);
  assert.ok((await call('t.progress')).includes('verify'), 'the SHA-256 checked again');
  assert.equal((await entry('d.bin')).sha256, sha(b));
  // meta.json not JSON, or with impossible sizes: the entry starts over
  for (const bad of ['{"v":1,"url":', JSON.stringify({ ...(await call(`t.meta(${url})`)), partBytes: 0 }),
    JSON.stringify({ ...(await call(`t.meta(${url})`)), size: -5 }), JSON.stringify({ ...(await call(`t.meta(${url})`)), done: [0, 1e9] })]) {
    await call(`t.setMeta(${url}, ${JSON.stringify(bad)})`);
    fresh('d.bin');
    r = await call(`t.cache(${url})`);
    assert.equal(r.sha, sha(b), `${bad}: ${JSON.stringify(r)}`);
    assert.equal(sent('d.bin'), b.length, `${bad}: downloaded again`);
  }
  // every part committed, meta.json listing one less and not complete (the tab went between the two writes)
  const m = await call(`t.meta(${url})`);
  await call(`t.setMeta(${url}, ${JSON.stringify(JSON.stringify({ ...m, done: m.done.filter((i) => i !== 2), complete: false }))})`);
  fresh('d.bin');
  assert.equal((await call(`t.cache(${url})`)).sha, sha(b));
  assert.equal(ranges('d.bin').length, 0, 'no part asked for');
  // bytes changed on disk, sizes kept: verify hashes the entry and downloads it again
  await call(`t.flip(${url}, 'p00002', 100, 16)`);
  fresh('d.bin');
  r = await call(`t.cache(${url}, { verify: true })`);
  assert.equal(r.sha, sha(b), JSON.stringify(r));
  assert.equal(sent('d.bin'), b.length, 'downloaded again');
  const ph = await call('t.progress');
  assert.ok(ph.indexOf('verify') < ph.indexOf('download'), `phases ${[...new Set(ph)]}: verified first`);
  // verify on an entry that is right: hashed, no download
  fresh('d.bin');
  assert.equal((await call(`t.cache(${url}, { verify: true })`)).sha, sha(b));
  assert.equal(requests('d.bin').length, 0);
});
