// open(url) on a cold cache: one network pass into the OPFS cache and into the engine at once
// (web/lw-cache.mjs cacheStream), in headless Chromium against the fault-injecting server
// (tests/web/fault-server.mjs). Checks:
//  - a reader that reads the way the GPU glue does (ascending chunks, 4 at once, slower than the network) gets
//    the file's bytes (SHA-256 against Node's) from ONE range request: every byte crossed the network once,
//    none was read back from OPFS, the bytes held for the reader stayed under the bound (streamBytes and the
//    reads in flight), and the entry is complete (a second stream: no request, the same bytes);
//  - a cut mid-stream continues from the byte reached; a connection cut on every try fails every read with
//    NETWORK (a message that says the bytes are kept), the entry incomplete with what arrived; healed, the
//    next stream asks only for the rest (the part written when it failed continues at its byte) and reads
//    the whole file right;
//  - a SHA-256 is checked on the bytes as they stream (no re-read: no 'verify' phase); a wrong one fails and
//    removes the entry; a server without ranges streams too; abort mid-stream: ABORTED, entry incomplete;
//    a write the quota refuses mid-stream: QUOTA_EXCEEDED, nothing left behind;
//  - with the wasm build and ../shared: open(url) of stories260K on the CPU engine downloads once
//    (model.download: network = the file, nothing read back), progress has every phase with its state,
//    a fault midway fails open() with NETWORK and the next open() resumes; in a Worker
//    (Llamaweb.loadInWorker): the phases reach the page, a split GGUF's parts given as an array of Files
//    open (same tokens), model.memory() answers.
// Skips (visibly) without Chromium; the model cases without the wasm build or ../shared.
// Run by tests/web/cache.test.mjs (which imports it: the Chromium tests are the ones scripts/test-webgpu.sh
// names), or alone: LW_WASM_DIR=... node --test tests/web/cache-stream.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ggufSplit } from './gguf-split.mjs';
import { faultServer, bytes, sha, useTestPage, cutEveryTry, browserTestEnv, withLowQuota } from './fault-server.mjs';

const { wasmDir, stories, skip, modelSkip } = browserTestEnv();

const PART = 256 << 10;   // cache parts
const WINDOW = 256 << 10; // streamBytes
const READ = 64 << 10;    // the reader's chunk
const srvm = faultServer();
const { log, addFile, requests } = srvm;

const PAGE = `<!doctype html><meta charset="utf-8"><title>stream test</title><script type="module">
import * as lw from '/llamaweb.mjs';
import * as cache from '/lw-cache.mjs';
const failure = (e) => ({ ok: false, code: e.code, message: e.message });
window.lw = lw;
window.cache = cache;
window.t = {
  progress: [],
  // cacheStream(url) read the way the GPU glue reads: ascending chunks, 'parallel' at once, each taking
  // delayMs after it arrived; hashed in order. abortAt: abort once a read past that byte was served.
  async stream(url, opts = {}, { parallel = 4, delayMs = 2, abortAt = -1 } = {}) {
    t.progress = [];
    const ac = new AbortController();
    let h;
    try {
      h = await cache.cacheStream([url], { partBytes: ${PART}, streamBytes: ${WINDOW}, retryDelayMs: 5, signal: ac.signal, ...opts,
        onProgress: (d, n, p) => t.progress.push([d, n, p]) });
    } catch (e) { return failure(e); }
    const src = h.sources[0], hash = new cache.Sha256(), n = Math.ceil(src.size / ${READ}), got = new Map();
    let next = 0, hashed = 0;
    const reader = async () => {
      while (next < n) {
        const i = next++;
        const b = await src.read(i * ${READ}, Math.min(${READ}, src.size - i * ${READ}));
        if (abortAt >= 0 && i * ${READ} > abortAt) ac.abort();
        got.set(i, b.slice());
        while (got.has(hashed)) { hash.update(got.get(hashed)); got.delete(hashed++); }
        await new Promise((r) => setTimeout(r, delayMs));
      }
    };
    try {
      await Promise.all(Array.from({ length: parallel }, reader));
    } catch (e) {
      h.stop(e);
      await h.done.catch(() => {});
      return { ...failure(h.error || e), stats: h.stats() };
    }
    h.release();
    try { await h.done; } catch (e) { return { ...failure(e), stats: h.stats() }; }
    return { ok: true, size: src.size, sha: hash.hex(), stats: h.stats(), cached: !!src.cached };
  },
  list: () => cache.listCached(),
  entries: async () => { const out = []; try { const d = await (await navigator.storage.getDirectory()).getDirectoryHandle('llamaweb-cache'); for await (const [n] of d.entries()) out.push(n); } catch {} return out; },
  // open(url) on the CPU engine; the model's download stats, memory and first tokens
  async open(what, opts = {}) {
    t.progress = [];
    try {
      window.L = window.L || await lw.Llamaweb.load({ wasmBase: '/wasm/', device: 'cpu' });
      const m = await L.open(what, { nCtx: 64, partBytes: ${PART}, streamBytes: ${WINDOW}, retryDelayMs: 5, ...opts,
        onProgress: (d, n, p, s) => t.progress.push([d, n, p, s]) });
      try {
        const r = await m.generate('Once upon a time', { maxTokens: 6 });
        return { ok: true, tokens: r.tokens, download: m.download, memory: m.memory(), info: m.info };
      } finally { m.free(); }
    } catch (e) { return failure(e); }
  },
  // the same in a Worker; what: a URL, or names of /m/ files fetched here and given as an array of Files
  async worker(what, opts = {}) {
    const progress = [];
    try {
      window.W = window.W || await lw.Llamaweb.loadInWorker({ wasmBase: '/wasm/', device: 'cpu' });
      if (Array.isArray(what)) what = await Promise.all(what.map(async (n) => new File([await (await fetch('/m/' + n)).blob()], n)));
      const m = await W.open(what, { nCtx: 64, partBytes: ${PART}, retryDelayMs: 5, ...opts, onProgress: (d, n, p, s) => progress.push([d, n, p, s]) });
      try {
        const r = await m.generate('Once upon a time', { maxTokens: 6 });
        return { ok: true, tokens: r.tokens, progress, memory: await m.memory(), download: m.download };
      } finally { await m.free(); }
    } catch (e) { return { ...failure(e), progress }; }
  },
};
window.ready = true;
</script>`;

const T = useTestPage(srvm, wasmDir, 'stream.html', PAGE, skip);
const call = (expr) => T.page.evaluate(expr);
const entry = async (name) => (await call('t.list()')).find((x) => x.url.endsWith('/m/' + name));
const starts = (name) => requests(name).filter((x) => x.range && x.range !== 'bytes=0-0').map((x) => Number(/=(\d+)/.exec(x.range)[1]));


test('one pass: a reader slower than the network gets the file from one range request, memory bounded, nothing read back; the entry is complete', { skip, timeout: 60000 }, async () => {
  const b = bytes(3 << 20, 21);
  addFile('s1.bin', b);
  const r = await call(`t.stream('/m/s1.bin')`);
  assert.ok(r.ok, JSON.stringify(r));
  assert.equal(r.sha, sha(b), 'the reader got the file\'s bytes');
  const ranges = requests('s1.bin').map((x) => x.range);
  console.log(`# s1.bin ${b.length} B: requests ${ranges.join(', ')}; stats ${JSON.stringify(r.stats)}`);
  assert.deepEqual(ranges, ['bytes=0-0', `bytes=0-${b.length - 1}`], 'the probe and one range request for the whole file');
  assert.equal(r.stats.network, b.length, 'every byte crossed the network once');
  assert.equal(r.stats.cache, 0, 'nothing was read back from OPFS');
  assert.equal(r.stats.memory, b.length, 'every read was served from the bytes as they arrived');
  // the window: streamBytes ahead of the reader, half of it behind, the reads in flight, and at each end a
  // whole network chunk (the window moves by the pieces Chromium hands over: up to ~1 MB)
  const bound = 1.5 * WINDOW + 4 * READ + 2 * r.stats.maxChunk;
  assert.ok(r.stats.peakHeld <= bound, `bytes held for the reader ${r.stats.peakHeld} <= ${bound}`);
  assert.ok(r.stats.peakHeld < b.length / 3, 'the download did not run ahead of the reader');
  const e = await entry('s1.bin');
  assert.equal(e.complete, true);
  assert.equal(e.bytes, b.length);
  const phases = [...new Set((await call('t.progress')).map((p) => p[2]))];
  assert.deepEqual(phases, ['download', 'cache-write'], 'parts committed as they filled');
  // complete: read from OPFS, no request
  const n = log.length;
  const r2 = await call(`t.stream('/m/s1.bin')`);
  assert.equal(r2.sha, sha(b));
  assert.equal(r2.cached, true);
  assert.equal(log.length, n, 'nothing asked of the server');
});

test('a cut mid-stream continues from the byte reached; cut on every try: NETWORK, what arrived kept, and the next stream asks only for the rest', { skip, timeout: 60000 }, async () => {
  const b = bytes(2 << 20, 22);
  addFile('s2.bin', b);
  let cuts = 0;
  srvm.fault = ({ range }) => (range && range !== 'bytes=0-0' && !cuts++ ? { cutAfter: 700000 } : null);
  const r = await call(`t.stream('/m/s2.bin')`);
  srvm.fault = null;
  assert.ok(r.ok, JSON.stringify(r));
  assert.equal(r.sha, sha(b));
  console.log(`# s2.bin cut once: ranges from ${starts('s2.bin').join(', ')}`);
  // bytes the browser had buffered past what the paused stream took are lost with the connection: it
  // continues at the byte it wrote, never before, never twice
  const [s0, s1] = starts('s2.bin');
  assert.equal(s0, 0);
  assert.ok(s1 > 0 && s1 <= 700000, `continued at the byte reached (${s1})`);
  assert.equal(starts('s2.bin').length, 2);
  assert.equal(r.stats.network, b.length, 'no byte twice');
  assert.equal(r.stats.retries, 1);

  const c = bytes(2 << 20, 23);
  addFile('s3.bin', c);
  srvm.fault = cutEveryTry(900000);
  const f = await call(`t.stream('/m/s3.bin', { retries: 2 })`);
  srvm.fault = null;
  assert.equal(f.ok, false);
  assert.equal(f.code, 'NETWORK', JSON.stringify(f));
  assert.match(f.message, /gave up after 3 tries/);
  assert.match(f.message, /stay in the model cache/);
  const e = await entry('s3.bin');
  assert.equal(e.complete, false);
  console.log(`# s3.bin failed: ${f.message}; ${e.bytes} of ${e.size} bytes kept`);
  assert.ok(e.bytes > 2 * PART && e.bytes <= 900000, `what arrived is kept (complete parts and the part being written: ${e.bytes})`);
  const n = requests('s3.bin').length;
  const r2 = await call(`t.stream('/m/s3.bin')`);
  assert.ok(r2.ok, JSON.stringify(r2));
  assert.equal(r2.sha, sha(c), 'the resumed file reads right (kept parts from OPFS, the partial part replayed, the rest streamed)');
  const again = requests('s3.bin').slice(n).map((x) => x.range);
  assert.deepEqual(again, ['bytes=0-0', `bytes=${e.bytes}-${c.length - 1}`], 'only the rest was asked for');
  assert.equal(r2.stats.network, c.length - e.bytes);
  assert.equal((await entry('s3.bin')).complete, true);
});

test('SHA-256 checked on the stream (no verify pass); a wrong one removes the entry; no ranges; abort; quota', { skip, timeout: 60000 }, async () => {
  const b = bytes(1 << 20, 24);
  addFile('s4.bin', b);
  const bad = await call(`t.stream('/m/s4.bin', { sha256: '${'0'.repeat(64)}' })`);
  assert.equal(bad.code, 'NETWORK', JSON.stringify(bad));
  assert.match(bad.message, /SHA-256 [0-9a-f]{64}, expected 0{64}/);
  assert.equal(await entry('s4.bin'), undefined, 'removed');
  const good = await call(`t.stream('/m/s4.bin', { sha256: '${sha(b)}' })`);
  assert.ok(good.ok, JSON.stringify(good));
  assert.equal((await entry('s4.bin')).sha256, sha(b));
  assert.ok(!(await call('t.progress')).some((p) => p[2] === 'verify'), 'hashed as it streamed: no verify pass');

  const g = bytes(1 << 20, 25);
  addFile('s5.bin', g);
  let gets = 0;
  srvm.fault = () => (gets++ === 1 ? { noRange: true, cutAfter: 400000 } : { noRange: true });
  const nr = await call(`t.stream('/m/s5.bin')`);
  srvm.fault = null;
  assert.ok(nr.ok, JSON.stringify(nr));
  assert.equal(nr.sha, sha(g), 'a server without ranges: the GET again, bytes below the one reached skipped');

  const h = bytes(2 << 20, 26);
  addFile('s6.bin', h);
  srvm.fault = () => ({ delayMs: 20 });
  const ab = await call(`t.stream('/m/s6.bin', {}, { abortAt: 300000 })`);
  srvm.fault = null;
  assert.equal(ab.code, 'ABORTED', JSON.stringify(ab));
  assert.equal((await entry('s6.bin')).complete, false);

  const before = await call('t.entries()');
  addFile('s7.bin', bytes(3 << 20, 27));
  const q = await withLowQuota(T, `t.stream('/m/s7.bin')`);
  assert.equal(q.code, 'QUOTA_EXCEEDED', JSON.stringify(q));
  assert.deepEqual(await call('t.entries()'), before, 'nothing left behind');
});

test('open(url): stories260K downloaded once into the cache and the engine; every phase with its state; a fault midway fails with NETWORK and the next open resumes; in a worker: phases, an array of Files, memory()', { skip: modelSkip, timeout: 120000 }, async () => {
  const file = new Uint8Array(readFileSync(stories));
  addFile('st.gguf', file);
  addFile('st2.gguf', file);
  const r = await call(`t.open('/m/st.gguf')`);
  assert.ok(r.ok, JSON.stringify(r) + T.page.logs.slice(-10).join('\n'));
  const ranges = requests('st.gguf').map((x) => x.range);
  console.log(`# open(url) cold: requests ${ranges.join(', ')}; download ${JSON.stringify(r.download)}`);
  assert.deepEqual(ranges, ['bytes=0-0', `bytes=0-${file.length - 1}`], 'one pass over the network');
  assert.equal(r.download.network, file.length);
  assert.equal(r.download.cache, 0, 'nothing read back from OPFS');
  const prog = await call('t.progress');
  const phases = [...new Set(prog.map((p) => p[2]))];
  for (const p of ['download', 'cache-write', 'upload', 'ready']) assert.ok(phases.includes(p), `phase ${p} in ${phases}`);
  const last = prog[prog.length - 1];
  assert.equal(last[2], 'ready');
  assert.deepEqual(last[3].download, { done: file.length, total: file.length });
  assert.deepEqual(last[3].cacheWrite, { done: file.length, total: file.length });
  assert.equal(last[3].upload.total, file.length);
  const firstUpload = prog.findIndex((p) => p[2] === 'upload');
  const lastDownload = prog.map((p) => p[2]).lastIndexOf('download');
  assert.ok(firstUpload < lastDownload, 'the upload started before the download ended (one stream, not download-then-read)');
  assert.equal((await entry('st.gguf')).complete, true);
  assert.equal(r.memory.device, 'cpu');
  assert.ok(r.memory.cpu.weights > 0 && r.memory.wasmHeap > r.memory.cpu.weights, JSON.stringify(r.memory));
  // from the cache now: same tokens, no request
  const n = log.length;
  const hit = await call(`t.open('/m/st.gguf')`);
  assert.deepEqual(hit.tokens, r.tokens);
  assert.equal(log.length, n);
  assert.equal(hit.download, null, 'nothing downloaded');

  // a fault midway: cut after 300 KB, then every try cut at once
  srvm.fault = cutEveryTry(300000);
  const f = await call(`t.open('/m/st2.gguf', { retries: 1 })`);
  srvm.fault = null;
  assert.equal(f.code, 'NETWORK', JSON.stringify(f));
  assert.match(f.message, /st2\.gguf.*gave up after 2 tries.*stay in the model cache/);
  console.log(`# a fault midway: ${f.message}`);
  const kept = (await entry('st2.gguf')).bytes;
  assert.ok(kept > 0 && kept <= 300000, `what arrived is kept (${kept})`);
  const k = requests('st2.gguf').length;
  const again = await call(`t.open('/m/st2.gguf')`);
  assert.ok(again.ok, JSON.stringify(again));
  assert.deepEqual(again.tokens, r.tokens, 'the resumed download decodes as the whole file');
  assert.deepEqual(requests('st2.gguf').slice(k).map((x) => x.range), ['bytes=0-0', `bytes=${kept}-${file.length - 1}`]);
  assert.equal(again.download.network, file.length - kept);

  // the worker: progress phases with state reach the page; a split GGUF as an array of Files
  addFile('st3.gguf', file);
  const w = await call(`t.worker('/m/st3.gguf')`);
  assert.ok(w.ok, JSON.stringify(w));
  assert.deepEqual(w.tokens, r.tokens);
  const wp = [...new Set(w.progress.map((p) => p[2]))];
  for (const p of ['download', 'cache-write', 'upload', 'ready']) assert.ok(wp.includes(p), `worker phase ${p} in ${wp}`);
  assert.deepEqual(w.progress[w.progress.length - 1][3].download, { done: file.length, total: file.length });
  assert.equal(w.download.network, file.length);
  assert.ok(w.memory.cpu.weights > 0, JSON.stringify(w.memory));
  const parts = ggufSplit(file, 16, 'stw');
  for (const p of parts) addFile(p.name, p.bytes);
  const ws = await call(`t.worker(${JSON.stringify(parts.map((p) => p.name).reverse())})`);
  assert.ok(ws.ok, JSON.stringify(ws));
  assert.deepEqual(ws.tokens, r.tokens, 'the parts as Files in the worker decode as the whole file');
  assert.equal(ws.download, null);
  console.log(`# worker: phases ${wp.join(', ')}; split GGUF as ${parts.length} Files: same tokens`);
});
