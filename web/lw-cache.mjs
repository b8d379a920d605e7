// The model cache: GGUF files downloaded once into the origin private file system (OPFS) and opened from
// there on later visits, with no network at all. Llamaweb.open(url) uses it by default where OPFS exists
// (web/lw-sources.mjs); cacheModel(url) fills it without opening a model.
//
// An entry is a folder llamaweb-cache/<sha-256 of the URL, 32 hex digits>/ holding meta.json and the file in
// parts p00000, p00001, ... of partBytes each (the last one shorter). Why parts:
//   - atomic: OPFS's createWritable() commits a file only on close(), so a part file is either what an
//     earlier close() left or absent, and a page closed mid-download leaves nothing half-written behind;
//   - resumable: each part is one HTTP range request; one cut mid-body is continued by a range request from
//     the byte it stopped at (into the same writable), a part that failed for good keeps its bytes (closed)
//     and the next call continues it; parts download in parallel (split GGUF shards too);
//   - readable as one file: new Blob([part files]) references the files on disk without reading them.
// meta.json: {v, url, size, etag, lastModified, sha256, partBytes, done: [part indices complete], complete,
// created, used}. `complete` is written last, after every part has its exact size and, when a SHA-256 is
// known (given by the caller, or the server's Repr-Digest / Digest header), the bytes hash to it: a cut-off
// or truncated download is never complete. A complete entry is used without asking the server (revalidate
// asks: a changed size, ETag or Last-Modified starts the download over).
//
// Faults: network errors, HTTP 5xx/408/429 and short or overlong bodies are retried with exponential backoff
// (retryDelayMs doubling up to 8 s, Retry-After honoured up to 30 s); the count of failures resets whenever a
// part makes progress, so a connection that keeps being cut still finishes. A file that changes on the server
// during a download (its size or ETag) fails the call and its entry is dropped. Errors are LlamawebErrors
// with the package's public codes (web/lw-model.mjs): NETWORK (network or HTTP, after retries; or bytes that
// do not hash to the expected SHA-256: the entry is removed), ABORTED (opts.signal; an already aborted signal
// fetches nothing), QUOTA_EXCEEDED (not enough storage: checked against navigator.storage.estimate() before
// anything is written, and a write refused on the way removes what this call wrote). Two calls for one URL
// (two tabs, or a page and its worker) take turns through the Web Locks API; the second finds the entry
// complete.
import { LlamawebError } from './lw-model.mjs';

const ROOT = 'llamaweb-cache';
const META = 'meta.json';
// partBytes: one range request and one part file; parallel: requests at once (over every URL of the call);
// retries: failures in a row without progress, per part; retryDelayMs: the first backoff (doubles).
export const CACHE_DEFAULTS = Object.freeze({ partBytes: 64 << 20, parallel: 3, retries: 5, retryDelayMs: 250 });
const MAX_DELAY_MS = 8000;

// ---------------------------------------------------------------------------------------------------------
// SHA-256 (incremental: WebCrypto's digest() wants the whole input in memory, a model does not fit there)
// ---------------------------------------------------------------------------------------------------------

// The first 32 bits of the fractional parts of the square roots (initial hash) and cube roots (round
// constants) of the first primes, as FIPS 180-4 defines them.
const PRIMES = [];
for (let n = 2; PRIMES.length < 64; n++) if (PRIMES.every((p) => n % p)) PRIMES.push(n);
const frac32 = (x) => ((x - Math.floor(x)) * 2 ** 32) >>> 0;
// (Int32Array: V8 keeps int32 values unboxed; a Uint32Array read above 2^31 makes a heap number)
const K = Int32Array.from(PRIMES, (p) => frac32(Math.cbrt(p)));
const H0 = Int32Array.from(PRIMES.slice(0, 8), (p) => frac32(Math.sqrt(p)));

export class Sha256 {
  constructor() {
    this.h = H0.slice();             // the running hash
    this.w = new Int32Array(64);     // message schedule of the block being mixed
    this.tail = new Uint8Array(64);  // bytes of an incomplete block
    this.nTail = 0;
    this.bytes = 0;                  // input length so far
  }

  update(data) {
    let at = 0;
    this.bytes += data.length;
    if (this.nTail) {
      at = Math.min(64 - this.nTail, data.length);
      this.tail.set(data.subarray(0, at), this.nTail);
      this.nTail += at;
      if (this.nTail < 64) return this;
      this.blocks(this.tail, 0, 64);
      this.nTail = 0;
    }
    const whole = at + ((data.length - at) & ~63);
    this.blocks(data, at, whole);
    this.tail.set(data.subarray(whole), 0);
    this.nTail = data.length - whole;
    return this;
  }

  // Mixes the 64-byte blocks of b[from, to).
  blocks(b, from, to) {
    const w = this.w, h = this.h;
    for (let p = from; p < to; p += 64) {
      for (let i = 0; i < 16; i++) {
        const q = p + 4 * i;
        w[i] = (b[q] << 24) | (b[q + 1] << 16) | (b[q + 2] << 8) | b[q + 3];
      }
      for (let i = 16; i < 64; i++) {
        const x = w[i - 15], y = w[i - 2];
        const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
        const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
      }
      let a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
      for (let i = 0; i < 64; i++) {
        const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
        const t1 = (hh + S1 + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
        const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
        const t2 = (S0 + ((a & bb) ^ (a & c) ^ (bb & c))) | 0;
        hh = g; g = f; f = e; e = (d + t1) | 0; d = c; c = bb; bb = a; a = (t1 + t2) | 0;
      }
      h[0] += a; h[1] += bb; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
    }
  }

  // The digest as 64 lowercase hex digits (the object is spent afterwards).
  hex() {
    const bits = this.bytes * 8;
    const pad = new Uint8Array(this.nTail < 56 ? 64 - this.nTail : 128 - this.nTail);
    pad[0] = 0x80;
    const dv = new DataView(pad.buffer);
    dv.setUint32(pad.length - 8, Math.floor(bits / 2 ** 32));
    dv.setUint32(pad.length - 4, bits >>> 0);
    const n = this.bytes;
    this.update(pad);
    this.bytes = n;
    return Array.from(this.h, (x) => (x >>> 0).toString(16).padStart(8, '0')).join('');
  }
}

const sha256Text = (s) => new Sha256().update(new TextEncoder().encode(s)).hex();

// ---------------------------------------------------------------------------------------------------------
// Errors, waiting
// ---------------------------------------------------------------------------------------------------------

export function abortError(signal) {
  const why = signal && signal.reason;
  const detail = why && why.message && why.name !== 'AbortError' ? ': ' + why.message : '';
  return new LlamawebError('ABORTED', 'aborted' + detail, why ? { cause: why } : undefined);
}

export function throwIfAborted(signal) {
  if (signal && signal.aborted) throw abortError(signal);
}

const isQuota = (e) => !!e && (e.name === 'QuotaExceededError' || e.code === 'QUOTA_EXCEEDED');
const mib = (n) => (n / 1048576).toFixed(1) + ' MiB';

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) { reject(abortError(signal)); return; }
    const done = () => { if (signal) signal.removeEventListener('abort', stop); resolve(); };
    const t = setTimeout(done, ms);
    const stop = () => { clearTimeout(t); reject(abortError(signal)); };
    if (signal) signal.addEventListener('abort', stop, { once: true });
  });
}

// A failure worth another try (the network, the server's bad moment, a body cut short).
function fault(message, retryAfterMs) {
  const e = new Error(message);
  e.retry = true;
  e.retryAfterMs = retryAfterMs;
  return e;
}

function httpFault(url, r, what) {
  if (r.body) r.body.cancel().catch(() => {});
  const s = r.status, msg = `${url}: ${what}: HTTP ${s} ${r.statusText || ''}`.trim();
  if (s >= 500 || s === 408 || s === 429) {
    const ra = Number(r.headers.get('Retry-After'));
    return fault(msg, ra >= 0 && ra <= 30 ? ra * 1000 : undefined);
  }
  return new LlamawebError('NETWORK', msg);
}

const backoff = (o, failures, e) => (e && e.retryAfterMs !== undefined ? e.retryAfterMs
  : Math.min(MAX_DELAY_MS, o.retryDelayMs * 2 ** (failures - 1)));

// fetch() with the call's signal; network errors become faults.
async function get(url, headers, range, signal) {
  try {
    return await fetch(url, { headers: range ? { ...headers, Range: range } : headers, signal, cache: 'no-store' });
  } catch (e) {
    if (signal && signal.aborted) throw e;
    throw fault(`${url}: ${e && e.message || e}`);
  }
}

// ---------------------------------------------------------------------------------------------------------
// OPFS helpers
// ---------------------------------------------------------------------------------------------------------

// Whether this browser has what the cache writes with: OPFS and its writable streams (Safari before 18.4
// has OPFS without createWritable).
export function cacheAvailable() {
  return typeof navigator !== 'undefined' && !!navigator.storage && typeof navigator.storage.getDirectory === 'function' &&
    typeof FileSystemFileHandle !== 'undefined' && typeof FileSystemFileHandle.prototype.createWritable === 'function';
}

// cacheAvailable() and OPFS opens here (it may refuse: some private browsing modes), asked once.
let usable = null;
export function cacheUsable() {
  if (!usable) usable = cacheAvailable() ? navigator.storage.getDirectory().then(() => true, () => false) : Promise.resolve(false);
  return usable;
}

async function cacheRoot() {
  if (!cacheAvailable()) throw new Error('the model cache needs the origin private file system (navigator.storage.getDirectory)');
  return (await navigator.storage.getDirectory()).getDirectoryHandle(ROOT, { create: true });
}

async function readMeta(dir) {
  try {
    const m = JSON.parse(await (await (await dir.getFileHandle(META)).getFile()).text());
    return m && m.v === 1 ? m : null;
  } catch {
    return null;
  }
}

async function writeFile(dir, name, data) {
  const w = await (await dir.getFileHandle(name, { create: true })).createWritable();
  try {
    await w.write(data);
    await w.close();
  } catch (e) {
    await w.abort().catch(() => {});
    throw e;
  }
}

const partName = (i) => 'p' + String(i).padStart(5, '0');
const nParts = (m) => Math.max(1, Math.ceil(m.size / m.partBytes));
const partLen = (m, i) => Math.min(m.partBytes, m.size - i * m.partBytes);

async function partFile(dir, i) {
  try {
    return await (await dir.getFileHandle(partName(i))).getFile();
  } catch {
    return null;
  }
}

// The entry's part files when every one is there with its exact size, else null.
async function wholeParts(dir, m) {
  const files = await Promise.all(Array.from({ length: nParts(m) }, (_, i) => partFile(dir, i)));
  return files.every((f, i) => f && f.size === partLen(m, i)) ? files : null;
}

// Web Locks (across tabs and workers) where the browser has them, else one queue per page.
const pageLocks = new Map();
async function withLock(name, signal, fn) {
  if (typeof navigator !== 'undefined' && navigator.locks && navigator.locks.request) {
    try {
      return await navigator.locks.request('llamaweb-cache/' + name, signal ? { signal } : {}, fn);
    } catch (e) {
      if (signal && signal.aborted) throw abortError(signal);
      throw e;
    }
  }
  const before = pageLocks.get(name) || Promise.resolve();
  let release;
  const mine = new Promise((r) => { release = r; });
  pageLocks.set(name, before.then(() => mine));
  await before;
  try {
    return await fn();
  } finally {
    release();
  }
}

let persistAsked = false;
function askPersist() { // best effort, never awaited (a browser may ask the user)
  if (persistAsked || !navigator.storage.persist) return;
  persistAsked = true;
  navigator.storage.persisted().then((p) => p || navigator.storage.persist()).catch(() => {});
}

// ---------------------------------------------------------------------------------------------------------
// The server's view of a file
// ---------------------------------------------------------------------------------------------------------

// A SHA-256 the server states for the whole file: Repr-Digest (RFC 9530) or Digest (RFC 3230), as hex.
function serverSha256(h) {
  const m = /sha-256=:?([A-Za-z0-9+/=]{44}):?/i.exec(h.get('Repr-Digest') || h.get('Digest') || '');
  if (!m) return null;
  return Array.from(atob(m[1]), (c) => c.charCodeAt(0).toString(16).padStart(2, '0')).join('');
}

// Size, validators and whether ranges work, from a one-byte range request (retried). A server without
// ranges answers 200: its response is kept, it becomes the download.
async function probe(url, o, signal) {
  for (let failures = 0; ;) {
    try {
      const r = await get(url, o.headers, 'bytes=0-0', signal);
      const info = { etag: r.headers.get('ETag'), lastModified: r.headers.get('Last-Modified'), sha256: serverSha256(r.headers) };
      if (r.status === 206) {
        const m = /\/(\d+)\s*$/.exec(r.headers.get('Content-Range') || '');
        await r.arrayBuffer();
        let size = m ? Number(m[1]) : NaN;
        if (!m) { // a cross-origin server that does not expose Content-Range
          const head = await fetch(url, { method: 'HEAD', headers: o.headers, signal, cache: 'no-store' });
          size = head.ok ? Number(head.headers.get('Content-Length')) : NaN;
        }
        if (!(size > 0)) throw new LlamawebError('NETWORK', `${url}: the file size is unknown (no Content-Range nor Content-Length)`);
        return { ...info, size, ranges: true };
      }
      if (r.status === 200) {
        const size = Number(r.headers.get('Content-Length'));
        if (!(size > 0)) {
          if (r.body) r.body.cancel().catch(() => {});
          throw new LlamawebError('NETWORK', `${url}: the server sends neither ranges nor a Content-Length: ` +
            'a download could not be checked for completeness');
        }
        return { ...info, size, ranges: false, response: r };
      }
      throw httpFault(url, r, 'probe');
    } catch (e) {
      failures = await failed(e, url, o, signal, failures);
    }
  }
}

// After a failed try: the next failure count (after the backoff), or the error to give up with.
async function failed(e, url, o, signal, failures) {
  if (signal && signal.aborted) throw abortError(signal);
  if (!e || !e.retry) throw e;
  if (++failures > o.retries) {
    throw new LlamawebError('NETWORK', `${e.message} (gave up after ${failures} tries)`, { cause: e });
  }
  await sleep(backoff(o, failures, e), signal);
  return failures;
}

// Whether a cached entry is the file the server has now.
const sameFile = (m, p) => m.url && m.size === p.size && (p.etag && m.etag ? p.etag === m.etag
  : p.lastModified && m.lastModified ? p.lastModified === m.lastModified : true);

// ---------------------------------------------------------------------------------------------------------
// Downloads
// ---------------------------------------------------------------------------------------------------------

// The file is not the one the entry holds parts of: the call fails and the entry goes.
function changed(e, detail) {
  return Object.assign(new LlamawebError('NETWORK', `${e.meta.url} changed on the server during the download (${detail}): ` +
    'try again'), { entry: e });
}

// A part being written: its writable from the byte it holds, or afresh.
async function openPart(dir, i, have) {
  const w = await (await dir.getFileHandle(partName(i), { create: true })).createWritable({ keepExistingData: have > 0 });
  if (have > 0) await w.seek(have);
  return w;
}

// Ends a part's writable: commits it (complete, or the bytes so far for a later resume) or drops it.
async function closePart(w, keep) {
  if (!w) return;
  if (keep) {
    try {
      await w.close();
      return;
    } catch { /* the stream failed: nothing to keep */ }
  }
  await w.abort().catch(() => {});
}

// One missing part by range requests, continued from its last byte after every cut.
async function rangePart(e, i, run) {
  const m = e.meta, start = i * m.partBytes, len = partLen(m, i), url = m.url;
  let got = e.partial.get(i) || 0, w = null, keep = true;
  try {
    w = await openPart(e.dir, i, got);
    for (let failures = 0, atFailure = got; got < len;) {
      try {
        const from = start + got, to = start + len - 1;
        const r = await get(url, run.o.headers, `bytes=${from}-${to}`, run.signal);
        if (r.status === 200) {
          r.body.cancel().catch(() => {});
          throw fault(`${url}: range ${from}-${to}: the server answered with the whole file (200) this time`);
        }
        if (r.status !== 206) throw httpFault(url, r, `range ${from}-${to}`);
        const cr = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec((r.headers.get('Content-Range') || '').trim());
        const tag = r.headers.get('ETag');
        if ((cr && cr[3] !== '*' && Number(cr[3]) !== m.size) || (tag && m.etag && tag !== m.etag)) {
          if (r.body) r.body.cancel().catch(() => {});
          throw changed(e, `size ${cr ? cr[3] : '?'} for ${m.size}, ETag ${tag} for ${m.etag}`);
        }
        if (cr && Number(cr[1]) !== from) {
          if (r.body) r.body.cancel().catch(() => {});
          throw fault(`${url}: asked for bytes ${from}-${to}, the server sent ${cr[1]}-${cr[2]}`);
        }
        const reader = r.body.getReader();
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            if (got + value.length > len) throw fault(`${url}: range ${from}-${to}: the server sent more than asked`);
            await w.write(value);
            got += value.length;
            run.progress(value.length);
          }
        } catch (err) {
          reader.cancel().catch(() => {});
          if (err && (err.retry || isQuota(err) || run.signal.aborted)) throw err;
          throw fault(`${url}: range ${from}-${to} cut at byte ${start + got}: ${err && err.message || err}`);
        }
        if (got < len) throw fault(`${url}: range ${from}-${to}: the body ended at byte ${start + got}`);
      } catch (err) {
        if (isQuota(err)) { keep = false; throw err; }
        if (got > atFailure) failures = 0; // progress since the last failure: a new series of tries
        atFailure = got;
        run.stats.retries++;
        failures = await failed(err, url, run.o, run.signal, failures);
      }
    }
    const done = w;
    w = null;
    await done.close();
  } finally {
    await closePart(w, keep);
  }
  await e.markDone(i);
}

// A server without ranges: one GET streams the whole file, part after part; complete parts of an earlier
// try are skipped by reading past them, a cut starts the GET over (the part it was writing too).
async function sequential(e, run, first) {
  const m = e.meta, url = m.url, n = nParts(m);
  for (let failures = 0, best = 0, r = first; ;) {
    let w = null, i = -1, at = 0, got = 0;
    try {
      if (!r) r = await get(url, run.o.headers, null, run.signal);
      if (r.status !== 200) throw httpFault(url, r, 'download');
      if (Number(r.headers.get('Content-Length')) !== m.size) {
        if (r.body) r.body.cancel().catch(() => {});
        throw changed(e, `a Content-Length of ${r.headers.get('Content-Length')} for ${m.size}`);
      }
      const reader = r.body.getReader();
      r = null;
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (let p = 0; p < value.length;) {
            const part = Math.floor(at / m.partBytes), off = at - part * m.partBytes;
            const take = Math.min(value.length - p, partLen(m, part) - off);
            if (!e.done.has(part)) {
              if (part !== i) { w = await openPart(e.dir, part, 0); i = part; }
              await w.write(value.subarray(p, p + take));
              got += take;
              run.progress(take);
              if (off + take === partLen(m, part)) {
                const whole = w;
                w = null;
                await whole.close();
                await e.markDone(part);
              }
            }
            p += take;
            at += take;
          }
        }
      } catch (err) {
        reader.cancel().catch(() => {});
        if (err && (isQuota(err) || run.signal.aborted)) throw err;
        throw fault(`${url}: the download was cut at byte ${at}: ${err && err.message || err}`);
      }
      if (e.done.size < n) throw fault(`${url}: the body ended at byte ${at} of ${m.size}`);
      return;
    } catch (err) {
      await closePart(w, false);
      if (i >= 0 && !e.done.has(i)) run.progress(i * m.partBytes - at); // that part starts over
      if (isQuota(err)) throw err;
      if (got > best) { failures = 0; best = got; }
      run.stats.retries++;
      failures = await failed(err, url, run.o, run.signal, failures);
    }
  }
}

// Runs jobs, at most `parallel` at once; the first failure stops the rest (through run.stop).
async function pool(jobs, parallel, run) {
  let next = 0, first = null;
  const worker = async () => {
    while (next < jobs.length && !first) {
      const job = jobs[next++];
      try {
        await job();
      } catch (e) {
        if (!first) first = e;
        run.stop();
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(parallel, jobs.length)) }, worker));
  if (first) throw first;
}

// Hashes an entry's parts in order ('verify' progress).
async function hashParts(files, run) {
  const h = new Sha256(), step = 8 << 20;
  for (const f of files) {
    for (let at = 0; at < f.size; at += step) {
      throwIfAborted(run.signal);
      const b = new Uint8Array(await f.slice(at, Math.min(f.size, at + step)).arrayBuffer());
      h.update(b);
      run.verified(b.length);
    }
  }
  return h.hex();
}

// ---------------------------------------------------------------------------------------------------------
// The API
// ---------------------------------------------------------------------------------------------------------

const absolute = (u) => String(new URL(u, globalThis.location ? globalThis.location.href : undefined));

// Makes sure every URL of urls is in the cache, downloading what is missing (parallel over all of them),
// and resolves to one Blob per URL (the cached file, read from OPFS). opts: sha256 (hex digest, or an array
// of one per URL: checked before the entry is complete; given for an entry completed without one, the
// entry is hashed then), signal, onProgress(done, total, phase: 'download' | 'verify'), headers (e.g.
// Authorization), revalidate (ask the server whether a complete entry is still current), partBytes,
// parallel, retries, retryDelayMs (see CACHE_DEFAULTS). A resolved call has every entry complete.
export async function cacheFiles(urls, opts = {}) {
  throwIfAborted(opts.signal);
  const hrefs = urls.map(absolute);
  const keys = hrefs.map((u) => sha256Text(u).slice(0, 32));
  const o = { ...CACHE_DEFAULTS, headers: opts.headers || {} };
  for (const k of ['partBytes', 'parallel', 'retries', 'retryDelayMs']) if (opts[k] !== undefined) o[k] = Number(opts[k]);
  if (!(o.partBytes >= 4096)) throw new RangeError('cache partBytes must be at least 4096');
  const locked = [...new Set(keys)].sort();
  const under = (j) => (j === locked.length ? fill(hrefs, keys, o, opts) : withLock(locked[j], opts.signal, () => under(j + 1)));
  return under(0);
}

async function fill(hrefs, keys, o, opts) {
  const ctl = new AbortController(), userSignal = opts.signal;
  const onAbort = () => ctl.abort(userSignal.reason);
  if (userSignal) userSignal.addEventListener('abort', onAbort, { once: true });
  const want = (Array.isArray(opts.sha256) ? opts.sha256 : [opts.sha256]).map((s) => (s ? String(s).toLowerCase() : null));
  const root = await cacheRoot();
  const entries = await Promise.all(hrefs.map(async (url, k) => {
    let dir = null;
    try { dir = await root.getDirectoryHandle(keys[k]); } catch { /* not cached */ }
    const meta = dir ? await readMeta(dir) : null;
    return { url, key: keys[k], dir, meta, want: want[k] || null, files: null };
  }));
  const run = {
    o, signal: ctl.signal, stats: { retries: 0 }, done: 0, total: 0, shown: -1, vDone: 0, vTotal: 0,
    stop: () => ctl.abort(new Error('another part failed')),
    progress(n) {
      run.done += n;
      // reported every 1 % of the total (1 MiB at most) and at the end
      if (opts.onProgress && (run.done - run.shown >= Math.min(1 << 20, run.total / 100) || run.done === run.total)) {
        run.shown = run.done;
        opts.onProgress(run.done, run.total, 'download');
      }
    },
    verified(n) {
      run.vDone += n;
      if (opts.onProgress) opts.onProgress(run.vDone, run.vTotal, 'verify');
    },
  };
  try {
    // 1. complete entries: used as they are (revalidate: if the server still has that file)
    await Promise.all(entries.map(async (e) => {
      const m = e.meta;
      if (!m || !m.complete || m.url !== e.url) return;
      const files = await wholeParts(e.dir, m);
      if (!files) { m.complete = false; return; } // a part went missing: download it again
      if (opts.revalidate && !sameFile(m, await probe(e.url, o, ctl.signal))) { e.meta = null; return; }
      e.files = files;
    }));
    // 2. what is missing: the server's view, an old entry kept if it is the same file, the quota
    const todo = entries.filter((e) => !e.files);
    const probes = await Promise.all(todo.map((e) => probe(e.url, o, ctl.signal)));
    let need = 0;
    for (const [k, e] of todo.entries()) {
      const p = probes[k];
      e.probe = p;
      if (e.meta && !sameFile(e.meta, p)) e.meta = null;
      if (!e.meta) {
        if (e.dir) await root.removeEntry(e.key, { recursive: true }).catch(() => {});
        e.meta = { v: 1, url: e.url, size: p.size, etag: p.etag, lastModified: p.lastModified, sha256: null,
          partBytes: o.partBytes, done: [], complete: false, created: Date.now(), used: Date.now() };
        e.dir = null;
      }
      e.want = e.want || p.sha256 || e.meta.sha256 || null;
      e.done = new Set(e.meta.done);
      e.partial = new Map();
      for (let i = 0; i < nParts(e.meta); i++) {
        if (e.done.has(i)) continue;
        const f = e.dir && p.ranges ? await partFile(e.dir, i) : null; // bytes of an earlier try
        if (f && f.size <= partLen(e.meta, i)) e.partial.set(i, f.size);
        need += partLen(e.meta, i) - (e.partial.get(i) || 0);
      }
    }
    if (need > 0 && navigator.storage.estimate) {
      const est = await navigator.storage.estimate();
      if (est.quota !== undefined && est.quota - (est.usage || 0) < need) {
        throw new LlamawebError('QUOTA_EXCEEDED', `not enough browser storage for the model: ${mib(need)} to download, ` +
          `${mib(Math.max(0, est.quota - (est.usage || 0)))} free of a ${mib(est.quota)} quota`);
      }
    }
    // 3. download (every URL's parts in one pool), then check and mark complete
    for (const e of todo) {
      if (!e.dir) e.dir = await root.getDirectoryHandle(e.key, { create: true });
      let saving = Promise.resolve();
      e.save = () => (saving = saving.then(() => writeFile(e.dir, META, JSON.stringify(e.meta))));
      e.markDone = (i) => { e.done.add(i); e.meta.done = [...e.done].sort((a, b) => a - b); return e.save(); };
      await e.save();
    }
    for (const e of entries) {
      run.total += e.meta.size;
      run.done += e.files ? e.meta.size : [...e.done].reduce((s, i) => s + partLen(e.meta, i), 0) +
        [...(e.partial || new Map()).values()].reduce((s, n) => s + n, 0);
    }
    const jobs = [];
    for (const e of todo) {
      if (!e.probe.ranges) { jobs.push(() => sequential(e, run, e.probe.response)); continue; }
      for (let i = 0; i < nParts(e.meta); i++) if (!e.done.has(i)) jobs.push(() => rangePart(e, i, run));
    }
    if (jobs.length) {
      askPersist();
      if (opts.onProgress) { run.shown = run.done; opts.onProgress(run.done, run.total, 'download'); }
      await pool(jobs, o.parallel, run);
    }
    for (const e of todo) {
      e.files = await wholeParts(e.dir, e.meta);
      if (!e.files) throw new LlamawebError('NETWORK', `${e.url}: a part is missing or has the wrong size after the download`);
    }
    const hashing = entries.filter((e) => e.want && e.meta.sha256 !== e.want);
    run.vTotal = hashing.reduce((s, e) => s + e.meta.size, 0);
    for (const e of hashing) {
      const got = await hashParts(e.files, run);
      if (got !== e.want) {
        await root.removeEntry(e.key, { recursive: true }).catch(() => {});
        throw new LlamawebError('NETWORK', `${e.url}: SHA-256 ${got}, expected ${e.want}: the download is corrupt ` +
          '(the cache entry was removed)');
      }
      e.meta.sha256 = got;
    }
    for (const e of entries) {
      e.meta.complete = true;
      e.meta.used = Date.now();
      if (e.save) await e.save();
      else await writeFile(e.dir, META, JSON.stringify(e.meta)).catch(() => {}); // a hit: 'used' is best effort
    }
    return entries.map((e) => new Blob(e.files));
  } catch (err) {
    // nothing of this call's downloads is left behind when storage ran out; a changed file loses its entry
    const quota = isQuota(err);
    for (const e of quota ? entries.filter((x) => x.save) : err && err.entry ? [err.entry] : []) {
      await root.removeEntry(e.key, { recursive: true }).catch(() => {});
    }
    if (userSignal && userSignal.aborted) throw abortError(userSignal);
    if (quota && err.code !== 'QUOTA_EXCEEDED') throw new LlamawebError('QUOTA_EXCEEDED', `browser storage is full: ${err.message}`, { cause: err });
    if (err instanceof LlamawebError) throw err;
    throw new LlamawebError('NETWORK', err && err.message || String(err), { cause: err });
  } finally {
    if (userSignal) userSignal.removeEventListener('abort', onAbort);
  }
}

// cacheFiles for one URL: its Blob.
export async function cacheModel(url, opts = {}) {
  return (await cacheFiles([url], opts))[0];
}

// The entries: [{url, size, bytes (on disk now), complete, etag, lastModified, sha256, created, used}].
export async function listCached() {
  if (!cacheAvailable()) return [];
  const out = [];
  for await (const [, h] of (await cacheRoot()).entries()) {
    if (h.kind !== 'directory') continue;
    const m = await readMeta(h);
    if (!m) continue;
    let bytes = 0;
    for (let i = 0; i < nParts(m); i++) bytes += ((await partFile(h, i)) || { size: 0 }).size;
    out.push({ url: m.url, size: m.size, bytes, complete: !!m.complete, etag: m.etag, lastModified: m.lastModified,
      sha256: m.sha256, created: m.created, used: m.used });
  }
  return out.sort((a, b) => (a.url < b.url ? -1 : 1));
}

// Removes url's entry (after a download of it in progress here or in another tab ends); resolves to whether
// there was one.
export async function deleteCached(url) {
  if (!cacheAvailable()) return false;
  const key = sha256Text(absolute(url)).slice(0, 32);
  return withLock(key, null, async () => {
    try {
      await (await cacheRoot()).removeEntry(key, { recursive: true });
      return true;
    } catch {
      return false;
    }
  });
}

// Removes every entry.
export async function clearCache() {
  if (!cacheAvailable()) return;
  await (await navigator.storage.getDirectory()).removeEntry(ROOT, { recursive: true }).catch(() => {});
}
