// The model cache: GGUF files downloaded once into the origin private file system (OPFS) and opened from
// there on later visits, with no network at all. Llamaweb.open(url) uses it by default where OPFS exists
// (web/lw-sources.mjs); cacheModel(url) fills it without opening a model.
//
// Two ways to fill it: cacheFiles / cacheModel download every missing part (range requests, `parallel` at
// once) and resolve when the entry is complete; cacheStream (what open(url) uses) downloads each file in one
// pass in file order while an engine reads it: each network chunk goes into its part file and, from memory,
// to the engine's reads (at most streamBytes held), so a cold open reads the network once and OPFS never.
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
// anything is written, and a write refused on the way removes what this call wrote). Other storage failures
// (a write or a commit refused, a file gone under the cache) fail the call at once with NETWORK ("the model
// cache could not ..."), not retried, keeping what was committed. Two calls for one URL (two tabs, or a page
// and its worker) take turns through the Web Locks API (a closed tab releases its lock); the second finds the
// entry complete.
// What is on disk is checked before it is used: a meta.json that does not parse or holds impossible sizes
// starts the entry over; a part listed as done whose file is missing or has another size (cut short) is
// downloaded again, with the SHA-256, when one is known, checked again; a part file committed whole that
// meta.json does not list yet (the tab closed between the two) counts as done. Bytes changed on disk with the
// sizes kept can only be seen by hashing: opts.verify hashes a complete entry whose SHA-256 is known
// ('verify' progress) and downloads it again when it differs (open(url, {verify: true}) too).
import { LlamawebError } from './lw-model.mjs';

const ROOT = 'llamaweb-cache';
const META = 'meta.json';
// partBytes: one range request and one part file; parallel: requests at once (over every URL of the call);
// retries: failures in a row without progress, per part; retryDelayMs: the first backoff (doubles);
// streamBytes (open(url) streaming the download into the engine, cacheStream): bytes held in memory ahead of
// the engine's reads, at most, over every file of the call.
export const CACHE_DEFAULTS = Object.freeze({ partBytes: 64 << 20, parallel: 3, retries: 5, retryDelayMs: 250, streamBytes: 32 << 20 });
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

// meta.json, or null when it is missing, not JSON, or not a meta.json this code wrote (the entry then
// starts over): sizes and part indices are checked, since everything else trusts them.
async function readMeta(dir) {
  try {
    const m = JSON.parse(await (await (await dir.getFileHandle(META)).getFile()).text());
    return validMeta(m) ? m : null;
  } catch {
    return null;
  }
}

function validMeta(m) {
  if (!m || m.v !== 1 || typeof m.url !== 'string' || !Number.isSafeInteger(m.size) || !(m.size > 0) ||
      !Number.isSafeInteger(m.partBytes) || !(m.partBytes >= 4096) || !Array.isArray(m.done)) return false;
  const n = Math.ceil(m.size / m.partBytes);
  return m.done.every((i) => Number.isSafeInteger(i) && i >= 0 && i < n) &&
    (m.sha256 === null || m.sha256 === undefined || /^[0-9a-f]{64}$/.test(m.sha256));
}

// A storage failure other than the quota (a write, a commit, a file that went away under the cache: another
// tab's clearCache(), the disk): the call's error at once, not retried like the network's faults (another
// try would write into the same broken stream). What the entry had committed stays; the next call continues.
function storageFault(what, e) {
  if (isQuota(e) || (e && e.storage)) return e;
  return Object.assign(new LlamawebError('NETWORK', `the model cache could not ${what}: ${e && e.name || 'Error'}: ` +
    `${e && e.message || e}`, { cause: e }), { storage: true });
}

async function writeFile(dir, name, data) {
  let w;
  try {
    w = await (await dir.getFileHandle(name, { create: true })).createWritable();
  } catch (e) {
    throw storageFault(`write ${name}`, e);
  }
  try {
    await w.write(data);
    await w.close();
  } catch (e) {
    await w.abort().catch(() => {});
    throw storageFault(`write ${name}`, e);
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

// A part being written: its writable from the byte it holds, or afresh; write / close / abort, with the
// storage's failures as storageFault.
async function openPart(dir, i, have) {
  let w;
  try {
    w = await (await dir.getFileHandle(partName(i), { create: true })).createWritable({ keepExistingData: have > 0 });
    if (have > 0) await w.seek(have);
  } catch (e) {
    if (w) await w.abort().catch(() => {});
    throw storageFault(`open part ${i} for writing`, e);
  }
  return {
    write: (b) => w.write(b).catch((e) => { throw storageFault(`write part ${i}`, e); }),
    close: () => w.close().catch((e) => { throw storageFault(`commit part ${i}`, e); }),
    abort: () => w.abort(),
  };
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
          if (err && (err.retry || err.storage || isQuota(err) || run.signal.aborted)) throw err;
          throw fault(`${url}: range ${from}-${to} cut at byte ${start + got}: ${err && err.message || err}`);
        }
        if (got < len) throw fault(`${url}: range ${from}-${to}: the body ended at byte ${start + got}`);
      } catch (err) {
        if (isQuota(err) || (err && err.storage)) { keep = false; throw err; }
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
        if (err && (isQuota(err) || err.storage || run.signal.aborted)) throw err;
        throw fault(`${url}: the download was cut at byte ${at}: ${err && err.message || err}`);
      }
      if (e.done.size < n) throw fault(`${url}: the body ended at byte ${at} of ${m.size}`);
      return;
    } catch (err) {
      await closePart(w, false);
      if (i >= 0 && !e.done.has(i)) run.progress(i * m.partBytes - at); // that part starts over
      if (isQuota(err) || (err && err.storage)) throw err;
      if (got > best) { failures = 0; best = got; }
      run.stats.retries++;
      failures = await failed(err, url, run.o, run.signal, failures);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Streaming: one network pass into the cache and into the engine (open(url) on a cold cache)
// ---------------------------------------------------------------------------------------------------------

// A file being downloaded into its cache entry while an engine reads it: a byte source {size, name, read}
// whose reads are served from the bytes as they arrive. One GET (a range request from the first missing byte
// of a run of missing parts; a server without ranges: the whole file, bytes below the one reached skipped)
// writes each network chunk to the part file being written and keeps it in a window in memory; a read is
// served from that window, from committed part files (parts an earlier call left complete, or bytes that
// left the window before a read came: re-read from OPFS once the part is committed), or waits for the
// bytes. Memory is bounded: the download pauses when it runs `lead` bytes ahead of the furthest read while
// no read waits, and the window keeps at most `lead` / 2 bytes behind where the reader is. Faults as the whole-file download's: a cut or a 5xx continues
// from the byte reached (retries, backoff), giving up fails every read with the call's error and keeps what
// arrived (the part being written is committed with its bytes so far: the next call resumes it).
class Tee {
  constructor(e, run, lead) {
    this.e = e;
    this.run = run;
    this.m = e.meta;
    this.size = e.meta.size;
    this.lead = lead;
    this.chunks = [];                  // the window: [{start, bytes}], contiguous over [winStart, winEnd)
    this.winStart = 0;
    this.winEnd = 0;
    this.held = 0;                     // bytes in the window
    this.mark = 0;                     // furthest end of a read served so far (how far ahead the download is)
    this.pos = 0;                      // start of the read served last (where the reader is: bytes below go)
    this.waiting = [];                 // reads not servable yet: {off, end, resolve, reject}
    this.files = new Map();            // committed part -> its File (read back for bytes out of the window)
    this.committed = new Set(e.done);  // parts whose files are complete
    this.at = 0;                       // next byte the download writes
    this.w = null;                     // the writable of the part being written (index wi)
    this.wi = -1;
    this.lastWrite = null;             // its write in flight (one overlaps the next network read)
    // network pieces are copied into write buffers of wbytes (OPFS writes cost per call: 8 MiB ones go ~1.8x
    // as fast as 1 MiB ones); two alternate, one filling while the other is written
    this.wbytes = Math.max(65536, Math.min(8 << 20, lead >> 2));
    this.bufs = [null, null];
    this.wb = null;
    this.wlen = 0;
    this.which = 0;
    this.commits = [];                 // parts being committed (close() copies the part into place: the
                                       // download goes on meanwhile)
    this.commitError = null;
    this.wake = null;                  // resolves a paused download
    this.failed = null;                // the error every read fails with, once the download gave up
    this.finished = false;             // every part committed
    this.hash = e.want ? new Sha256() : null; // SHA-256 of bytes [0, hashAt) as they stream (complete: a digest)
    this.hashAt = 0;
    // network: bytes received; memory / cache: bytes served from the window / from part files;
    // peakHeld: window high-water; waits: reads that waited for the download; maxChunk: the largest piece the
    // network handed over (the window moves by whole pieces)
    this.stats = { network: 0, memory: 0, cache: 0, peakHeld: 0, waits: 0, maxChunk: 0 };
  }

  partOf(pos) { return Math.floor(pos / this.m.partBytes); }
  partEnd(i) { return i * this.m.partBytes + partLen(this.m, i); }

  // Whether [a, b) is in the window or in committed parts.
  servable(a, b) {
    for (let pos = a; pos < b;) {
      if (pos >= this.winStart && pos < this.winEnd) { pos = Math.min(b, this.winEnd); continue; }
      const i = this.partOf(pos);
      if (!this.committed.has(i)) return false;
      pos = this.pieceEnd(pos, b, i);
    }
    return true;
  }

  // Where a piece from committed part i starting at pos (outside the window) ends: at b, the part's end, or
  // where the window starts (the window is preferred: no disk read).
  pieceEnd(pos, b, i) {
    return Math.min(b, this.partEnd(i), pos < this.winStart ? this.winStart : Infinity);
  }

  read(off, len) {
    if (this.failed) return Promise.reject(this.failed);
    if (off < 0 || len < 0 || off + len > this.size) return Promise.reject(new RangeError(`${this.m.url}: bytes ${off}+${len} of ${this.size}`));
    if (this.servable(off, off + len)) return this.serve(off, off + len);
    this.stats.waits++;
    return new Promise((resolve, reject) => {
      this.waiting.push({ off, end: off + len, resolve, reject });
      this.poke();
    });
  }

  // [a, b) (servable): the window's bytes copied now (the window may move on), part files' read after.
  serve(a, b) {
    this.mark = Math.max(this.mark, b);
    this.pos = a;
    if (a >= this.winStart && b <= this.winEnd) { // the common case: from memory only
      this.stats.memory += b - a;
      const out = this.copy(a, b);
      this.trim();
      return Promise.resolve(out);
    }
    const out = new Uint8Array(b - a), later = [];
    for (let pos = a; pos < b;) {
      if (pos >= this.winStart && pos < this.winEnd) {
        const q = Math.min(b, this.winEnd);
        out.set(this.copy(pos, q), pos - a);
        this.stats.memory += q - pos;
        pos = q;
        continue;
      }
      const i = this.partOf(pos);
      const q = this.pieceEnd(pos, b, i);
      const from = pos - i * this.m.partBytes, at = pos - a, n = q - pos;
      later.push(this.partFile(i).then((f) => f.slice(from, from + n).arrayBuffer()).then((buf) => { out.set(new Uint8Array(buf), at); }));
      this.stats.cache += n;
      pos = q;
    }
    this.trim();
    return Promise.all(later).then(() => out);
  }

  async partFile(i) {
    if (!this.files.has(i)) this.files.set(i, partFile(this.e.dir, i));
    const f = await this.files.get(i);
    if (!f) throw new Error(`${this.m.url}: part ${i} of the cache entry is gone`);
    return f;
  }

  // Window bytes [a, b): a view of one network chunk, or a copy over several.
  copy(a, b) {
    let lo = 0, hi = this.chunks.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (this.chunks[mid].start <= a) lo = mid; else hi = mid - 1; }
    const c = this.chunks[lo];
    if (b <= c.start + c.bytes.length) return c.bytes.subarray(a - c.start, b - c.start);
    const out = new Uint8Array(b - a);
    for (let i = lo, pos = a; pos < b; i++) {
      const d = this.chunks[i], q = Math.min(b, d.start + d.bytes.length);
      out.set(d.bytes.subarray(pos - d.start, q - d.start), pos - a);
      pos = q;
    }
    return out;
  }

  // Drops window bytes no read wants: below the lowest waiting read and the start of the last read served
  // (not its end: the header prefetch reads past the first tensors, which are read again), beyond the
  // lead / 2 kept behind (whole network chunks: it may be less), and all of them over 2 leads (reads
  // waiting for a part's commit keep the download going). Bytes at or past where the reader is stay.
  trim() {
    let low = this.pos;
    for (const r of this.waiting) if (r.end > this.winStart && r.off < low) low = r.off;
    const behind = this.lead >> 1;
    while (this.chunks.length) {
      const c = this.chunks[0], end = c.start + c.bytes.length;
      const old = end <= low && low - this.winStart > behind;
      const over = this.held > 2 * this.lead && end <= low;
      if (!old && !over) break;
      this.chunks.shift();
      this.held -= c.bytes.length;
      this.winStart = end;
    }
    if (!this.chunks.length) this.winStart = this.winEnd;
  }

  // Bytes [at, at + n) arrived (or were read back from a partial part): into the window, reads served.
  append(at, bytes) {
    if (at > this.winEnd || !this.chunks.length) { // a jump (parts complete in between) or an empty window
      this.chunks = [];
      this.held = 0;
      this.winStart = this.winEnd = Math.max(at, this.winEnd > at ? this.winEnd : at);
    }
    if (at + bytes.length <= this.winEnd) return;
    if (at < this.winEnd) { bytes = bytes.subarray(this.winEnd - at); at = this.winEnd; }
    this.chunks.push({ start: at, bytes });
    this.winEnd = at + bytes.length;
    this.held += bytes.length;
    if (this.held > this.stats.peakHeld) this.stats.peakHeld = this.held;
    this.serveWaiting();
    this.trim();
  }

  serveWaiting() {
    if (!this.waiting.length) return;
    const still = [];
    for (const r of this.waiting) {
      if (this.servable(r.off, r.end)) r.resolve(this.serve(r.off, r.end));
      else still.push(r);
    }
    this.waiting = still;
  }

  poke() {
    const w = this.wake;
    this.wake = null;
    if (w) w();
  }

  // Waits while the download is `lead` bytes ahead of every read and no read waits for it.
  async room() {
    while (!this.run.signal.aborted && !this.waiting.length && this.winEnd - Math.max(this.mark, this.winStart) >= this.lead) {
      await new Promise((r) => { this.wake = r; });
    }
    if (this.run.signal.aborted) throw abortError(this.run.signal);
  }

  feedHash(at, bytes) {
    if (!this.hash || at > this.hashAt || at + bytes.length <= this.hashAt) return;
    this.hash.update(bytes.subarray(this.hashAt - at));
    this.hashAt = at + bytes.length;
  }

  // Bytes for the part being written: into the write buffer, written when it is full.
  async put(piece) {
    for (let p = 0; p < piece.length;) {
      if (!this.wb) {
        this.wb = this.bufs[this.which] || (this.bufs[this.which] = new Uint8Array(this.wbytes));
        this.wlen = 0;
      }
      const k = Math.min(piece.length - p, this.wb.length - this.wlen);
      this.wb.set(piece.subarray(p, p + k), this.wlen);
      this.wlen += k;
      p += k;
      if (this.wlen === this.wb.length) await this.flush();
    }
  }

  // The write buffer's bytes into the part (the other buffer's write done first: it can be refilled).
  async flush() {
    if (!this.wb || !this.wlen) return;
    const b = this.wb.subarray(0, this.wlen);
    this.wb = null;
    this.which ^= 1;
    await this.write(b);
  }

  // Every byte of the part being written handed to OPFS and written.
  async drain() {
    await this.flush();
    const last = this.lastWrite;
    this.lastWrite = null;
    if (last) await last;
  }

  // The part being written reached its length (drained): committed (OPFS makes the file on close), meta
  // updated, in the background (a failure fails the download at its next write or its end).
  commit(i) {
    const w = this.w;
    this.w = null;
    this.wi = -1;
    const c = (async () => {
      await w.close();
      await this.e.markDone(i);
      this.files.delete(i);
      this.committed.add(i);
      this.run.committed(partLen(this.m, i));
      this.serveWaiting();
    })();
    c.catch((err) => { if (!this.commitError) this.commitError = err; this.poke(); });
    this.commits.push(c);
  }

  // A write into the part being written; the one before it is awaited (at most two queued).
  async write(piece) {
    if (this.commitError) throw this.commitError;
    const p = this.w.write(piece);
    p.catch(() => {}); // awaited below or by the commit / the failure path
    const prev = this.lastWrite;
    this.lastWrite = p;
    if (prev) await prev;
  }

  // Network bytes at this.at: written to their parts (a part done before is skipped: a server without
  // ranges sends everything), kept in the window.
  async take(value) {
    for (let p = 0; p < value.length;) {
      const i = this.partOf(this.at), off = this.at - i * this.m.partBytes;
      const k = Math.min(value.length - p, partLen(this.m, i) - off);
      const piece = value.subarray(p, p + k);
      if (!this.e.done.has(i)) {
        if (this.wi !== i) { this.w = await openPart(this.e.dir, i, off); this.wi = i; }
        await this.put(piece);
        this.run.progress(k);
        this.feedHash(this.at, piece);
        this.append(this.at, piece);
        this.at += k;
        if (off + k === partLen(this.m, i)) {
          await this.drain();
          this.commit(i);
        }
      } else {
        this.at += k;
      }
      p += k;
    }
  }

  // The bytes an earlier call left in part i (have of them): read back into the window (they are not
  // downloaded again), before the part's writable opens (the file is then rewritten on commit).
  async replay(i, have) {
    const f = await partFile(this.e.dir, i), start = i * this.m.partBytes, step = 8 << 20;
    for (let at = 0; at < have; at += step) {
      await this.room();
      const b = new Uint8Array(await f.slice(at, Math.min(have, at + step)).arrayBuffer());
      this.feedHash(start + at, b);
      this.append(start + at, b);
    }
  }

  // Downloads every part not complete, in file order; resolves when all are committed.
  async download() {
    const m = this.m, n = nParts(m), url = m.url, ranges = this.e.probe.ranges;
    let first = this.e.probe.response || null; // a server without ranges: the probe's answer is the download
    this.e.probe.response = null;
    try {
      for (let i = 0; i < n; i++) {
        if (this.e.done.has(i)) continue;
        let j = i; // the run of missing parts i..j
        while (ranges && j + 1 < n && !this.e.done.has(j + 1)) j++;
        if (!ranges) j = n - 1;
        const regionEnd = this.partEnd(j);
        const have = ranges ? this.e.partial.get(i) || 0 : 0;
        this.at = i * m.partBytes;
        if (have) {
          await this.replay(i, have);
          this.w = await openPart(this.e.dir, i, have);
          this.wi = i;
          this.at += have;
        }
        for (let failures = 0, best = this.at; this.at < regionEnd;) {
          let reader = null;
          try {
            const r = first || await get(url, this.run.o.headers, ranges ? `bytes=${this.at}-${regionEnd - 1}` : null, this.run.signal);
            first = null;
            this.check(r, ranges);
            reader = r.body.getReader();
            // a server without ranges starts at byte 0 every time: bytes below this.at are skipped
            let pos = ranges ? this.at : 0;
            for (;;) {
              await this.room();
              const { value, done } = await reader.read();
              if (done) break;
              this.stats.network += value.length;
              if (value.length > this.stats.maxChunk) this.stats.maxChunk = value.length;
              if (pos + value.length > regionEnd) throw fault(`${url}: the server sent more than asked (past byte ${regionEnd})`);
              const skip = Math.max(0, this.at - pos);
              if (skip < value.length) await this.take(skip ? value.subarray(skip) : value);
              pos += value.length;
            }
            reader = null;
            if (this.at < regionEnd) throw fault(`${url}: the body ended at byte ${this.at} of ${regionEnd}`);
          } catch (err) {
            if (reader) reader.cancel().catch(() => {});
            if (isQuota(err) || this.run.signal.aborted || (err && (err.entry || err.storage))) throw err;
            const e = err && (err.retry || err instanceof LlamawebError) ? err : fault(`${url}: the download was cut at byte ${this.at}: ${err && err.message || err}`);
            if (this.at > best) { failures = 0; best = this.at; }
            this.run.stats.retries++;
            failures = await failed(e, url, this.run.o, this.run.signal, failures);
          }
        }
        i = j;
      }
      await Promise.all(this.commits);
      this.finished = true;
      this.serveWaiting();
    } catch (err) {
      // keep what arrived (a quota refusal: nothing; the call removes the entry)
      await Promise.allSettled(this.commits);
      const keep = !isQuota(err) && !isQuota(this.commitError);
      if (this.w && keep) await this.drain().catch(() => {}); // the bytes still in the write buffer
      else if (this.lastWrite) await this.lastWrite.catch(() => {});
      await closePart(this.w, keep);
      this.w = null;
      throw isQuota(this.commitError) ? this.commitError : err;
    }
  }

  // A response for the download: the status, size and validators it must have.
  check(r, ranges) {
    const m = this.m, url = m.url;
    if (ranges) {
      if (r.status === 200) { r.body.cancel().catch(() => {}); throw fault(`${url}: the server answered with the whole file (200) to a range request`); }
      if (r.status !== 206) throw httpFault(url, r, `range from ${this.at}`);
      const cr = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec((r.headers.get('Content-Range') || '').trim());
      const tag = r.headers.get('ETag');
      if ((cr && cr[3] !== '*' && Number(cr[3]) !== m.size) || (tag && m.etag && tag !== m.etag)) {
        if (r.body) r.body.cancel().catch(() => {});
        throw changed(this.e, `size ${cr ? cr[3] : '?'} for ${m.size}, ETag ${tag} for ${m.etag}`);
      }
      if (cr && Number(cr[1]) !== this.at) {
        if (r.body) r.body.cancel().catch(() => {});
        throw fault(`${url}: asked for bytes from ${this.at}, the server sent ${cr[1]}-${cr[2]}`);
      }
    } else {
      if (r.status !== 200) throw httpFault(url, r, 'download');
      if (Number(r.headers.get('Content-Length')) !== m.size) {
        if (r.body) r.body.cancel().catch(() => {});
        throw changed(this.e, `a Content-Length of ${r.headers.get('Content-Length')} for ${m.size}`);
      }
    }
  }

  // Every read fails with err from now on (the download gave up, or the call was stopped).
  fail(err) {
    if (!this.failed) this.failed = err;
    for (const r of this.waiting) r.reject(err);
    this.waiting = [];
    this.poke();
  }

  // The load is over: the window goes (reads after this come from the part files).
  release() {
    this.chunks = [];
    this.held = 0;
    this.winStart = this.winEnd;
    this.mark = this.pos = Infinity;
    this.poke();
  }
}

// Opens urls for reading while they download: resolves (once each file is probed and its entry made, under
// the cache's locks) to {sources, done, stop(reason), stats()}: one byte source {size, name, read} per URL
// (a complete entry: its part files; otherwise a Tee), `done` a promise that settles when every download has
// ended and its entry is checked and complete (or with the call's error; the locks are held until then),
// stop() ends the downloads (ABORTED; what arrived is kept), stats() {network, memory, cache, peakHeld, maxChunk,
// waits, retries} summed. opts as cacheFiles' and streamBytes (memory held ahead of the engine's reads, over
// every file). The engine must read its source to the end or the caller stop() (the download of a file
// pauses while no read wants its bytes); release() after the load frees the windows.
export function cacheStream(urls, opts = {}) {
  throwIfAborted(opts.signal);
  const c = callSetup(urls, opts);
  return new Promise((resolve, reject) => {
    let handed = false;
    withLocks(c.keys, opts.signal, async () => {
      const h = await startStream(c.hrefs, c.keys, c.o, opts);
      handed = true;
      resolve(h);
      await h.done.catch(() => {});
    }).catch((e) => { if (!handed) reject(e); });
  });
}

async function startStream(hrefs, keys, o, opts) {
  const ctl = follow(opts.signal);
  const root = await cacheRoot();
  const entries = await readEntries(root, hrefs, keys, opts);
  const run = makeRun(o, ctl, opts);
  let todo;
  try {
    todo = await prepare(root, entries, run, opts);
  } catch (err) {
    ctl.off();
    throw await failure(root, entries, err, opts.signal);
  }
  const lead = Math.max(65536, Math.floor(o.streamBytes / Math.max(1, todo.length))); // per file
  const tees = new Map(todo.map((e) => [e, new Tee(e, run, lead)]));
  const sources = entries.map((e) => {
    const t = tees.get(e);
    if (t) return { size: t.size, read: (off, len) => t.read(off, len), tee: t };
    const blob = new Blob(e.files);
    return { size: blob.size, read: async (off, len) => new Uint8Array(await blob.slice(off, off + len).arrayBuffer()), cached: true };
  });
  const all = [...tees.values()];
  const h = { sources, done: null, error: null, stop: (why) => ctl.abort(why), stats: null, release: () => { for (const t of all) t.release(); } };
  ctl.signal.addEventListener('abort', () => { for (const t of all) t.poke(); }, { once: true });
  const done = (async () => {
    try {
      if (all.length) {
        askPersist();
        if (opts.onProgress) { run.shown = run.done; opts.onProgress(run.done, run.total, 'download'); }
        await Promise.all(all.map((t) => t.download().catch((err) => { run.stop(); throw err; })));
      }
      const digests = new Map();
      for (const t of all) if (t.hash && t.hashAt === t.size) digests.set(t.e.url, t.hash.hex());
      await finish(root, entries, todo, run, digests);
    } catch (err0) {
      // stopped (stop(), the caller's signal): ABORTED, whatever the fetch or the pause threw
      const stopped = ctl.signal.aborted && !isQuota(err0) && !(err0 && (err0.retry || err0.entry || err0.code === 'NETWORK'));
      const err = stopped ? abortError(ctl.signal) : err0;
      const e = await failure(root, entries, err, opts.signal);
      // a download that gave up keeps its bytes (not a changed file, a wrong digest or a quota refusal)
      if (e.code === 'NETWORK' && !(err && err.entry) && !/SHA-256/.test(e.message)) {
        e.message += ' (the bytes that arrived stay in the model cache: opening this URL again continues from there)';
      }
      h.error = e;
      for (const t of all) t.fail(e);
      throw e;
    } finally {
      ctl.off();
    }
  })();
  done.catch(() => {});
  h.done = done;
  h.stats = () => {
    const s = { network: 0, memory: 0, cache: 0, peakHeld: 0, waits: 0, maxChunk: 0, retries: run.stats.retries, streamed: all.length > 0 };
    for (const t of all) {
      for (const k of ['network', 'memory', 'cache', 'peakHeld', 'waits']) s[k] += t.stats[k];
      s.maxChunk = Math.max(s.maxChunk, t.stats.maxChunk);
    }
    return s;
  };
  return h;
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
// Authorization), revalidate (ask the server whether a complete entry is still current), verify (hash a
// complete entry against its known SHA-256; a corrupt one is downloaded again), partBytes,
// parallel, retries, retryDelayMs (see CACHE_DEFAULTS). A resolved call has every entry complete.
export async function cacheFiles(urls, opts = {}) {
  throwIfAborted(opts.signal);
  const c = callSetup(urls, opts);
  return withLocks(c.keys, opts.signal, () => fill(c.hrefs, c.keys, c.o, opts));
}

// URLs made absolute, their entries' keys, the options with their defaults.
function callSetup(urls, opts) {
  const hrefs = urls.map(absolute);
  const keys = hrefs.map((u) => sha256Text(u).slice(0, 32));
  const o = { ...CACHE_DEFAULTS, headers: opts.headers || {} };
  for (const k of ['partBytes', 'parallel', 'retries', 'retryDelayMs', 'streamBytes']) if (opts[k] !== undefined) o[k] = Number(opts[k]);
  if (!(o.partBytes >= 4096)) throw new RangeError('cache partBytes must be at least 4096');
  if (!(o.streamBytes >= 65536)) throw new RangeError('cache streamBytes must be at least 65536');
  return { hrefs, keys, o };
}

// fn() under the locks of every key (taken in sorted order: two calls never wait on each other crosswise).
function withLocks(keys, signal, fn) {
  const locked = [...new Set(keys)].sort();
  const under = (j) => (j === locked.length ? fn() : withLock(locked[j], signal, () => under(j + 1)));
  return under(0);
}

// The call's entries, read from OPFS: {url, key, dir, meta, want, files (complete: its part files)}.
async function readEntries(root, hrefs, keys, opts) {
  const want = (Array.isArray(opts.sha256) ? opts.sha256 : [opts.sha256]).map((s) => (s ? String(s).toLowerCase() : null));
  return Promise.all(hrefs.map(async (url, k) => {
    let dir = null;
    try { dir = await root.getDirectoryHandle(keys[k]); } catch { /* not cached */ }
    const meta = dir ? await readMeta(dir) : null;
    return { url, key: keys[k], dir, meta, want: want[k] || null, files: null };
  }));
}

// The state of one call: progress over every entry (download bytes, cache-write bytes, verify bytes).
function makeRun(o, ctl, opts) {
  const run = {
    o, signal: ctl.signal, stats: { retries: 0 }, done: 0, total: 0, shown: -1, vDone: 0, vTotal: 0, written: 0,
    stop: () => ctl.abort(new Error('another part failed')),
    progress(n) {
      run.done += n;
      // reported every 1 % of the total (1 MiB at most) and at the end
      if (opts.onProgress && (run.done - run.shown >= Math.min(1 << 20, run.total / 100) || run.done === run.total)) {
        run.shown = run.done;
        opts.onProgress(run.done, run.total, 'download');
      }
    },
    committed(n) { // a part file was committed (streaming: one event per part)
      run.written += n;
      if (opts.onProgress) opts.onProgress(run.written, run.total, 'cache-write');
    },
    verified(n) {
      run.vDone += n;
      if (opts.onProgress) opts.onProgress(run.vDone, run.vTotal, 'verify');
    },
  };
  return run;
}

// Steps 1 and 2 of a call: complete entries are used as they are (revalidate: if the server still has that
// file); the others are probed, an old entry kept if it is the same file (e.partial: bytes of parts an earlier
// try left), the quota checked, their folders and meta.json made. Fills run.total and run.done. Returns the
// entries still to download.
async function prepare(root, entries, run, opts) {
  const o = run.o;
  await Promise.all(entries.map(async (e) => {
    const m = e.meta;
    if (!m || !m.complete || m.url !== e.url) return;
    const files = await wholeParts(e.dir, m);
    if (!files) { m.complete = false; return; } // a part went missing or was cut short: see below
    if (opts.revalidate && !sameFile(m, await probe(e.url, o, run.signal))) { e.meta = null; return; }
    // verify: the bytes on disk hashed against the entry's SHA-256 (or the one given); corrupt ones (same
    // sizes, other bytes: nothing else can see that) are dropped and downloaded again
    const want = e.want || m.sha256;
    if (opts.verify && want) {
      run.vTotal += m.size;
      if (await hashParts(files, run) !== want) { e.meta = null; return; }
    }
    e.files = files;
  }));
  const todo = entries.filter((e) => !e.files);
  const probes = await Promise.all(todo.map((e) => probe(e.url, o, run.signal)));
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
    let dropped = false;
    for (let i = 0; i < nParts(e.meta); i++) {
      const len = partLen(e.meta, i);
      const f = e.dir ? await partFile(e.dir, i) : null;
      if (e.done.has(i)) {
        if (f && f.size === len) continue;
        // a part listed as done whose file is gone or has another size (cut short or removed by something
        // other than this cache): downloaded again, and the whole file's SHA-256 checked again at the end
        e.done.delete(i);
        dropped = true;
        if (f) await e.dir.removeEntry(partName(i)).catch(() => {});
        need += len;
        continue;
      }
      if (f && f.size === len) { e.done.add(i); continue; } // committed, then the page went before meta.json said so
      if (f && p.ranges && f.size < len) e.partial.set(i, f.size); // bytes of an earlier try
      need += len - (e.partial.get(i) || 0);
    }
    if (dropped) e.meta.sha256 = null;
    e.meta.done = [...e.done].sort((a, b) => a - b);
  }
  if (need > 0 && navigator.storage.estimate) {
    const est = await navigator.storage.estimate();
    if (est.quota !== undefined && est.quota - (est.usage || 0) < need) {
      throw new LlamawebError('QUOTA_EXCEEDED', `not enough browser storage for the model: ${mib(need)} to download, ` +
        `${mib(Math.max(0, est.quota - (est.usage || 0)))} free of a ${mib(est.quota)} quota`);
    }
  }
  for (const e of todo) {
    if (!e.dir) e.dir = await root.getDirectoryHandle(e.key, { create: true });
    let saving = Promise.resolve();
    e.save = () => (saving = saving.then(() => writeFile(e.dir, META, JSON.stringify(e.meta))));
    e.markDone = (i) => { e.done.add(i); e.meta.done = [...e.done].sort((a, b) => a - b); return e.save(); };
    await e.save();
  }
  for (const e of entries) {
    run.total += e.meta.size;
    const cached = e.files ? e.meta.size : [...e.done].reduce((s, i) => s + partLen(e.meta, i), 0);
    run.done += cached + [...(e.partial || new Map()).values()].reduce((s, n) => s + n, 0);
    run.written += cached;
  }
  return todo;
}

// The last step of a call, after every download: each entry's parts are there with their sizes, the
// SHA-256 checked where one is known (digests: a hash computed while streaming, by URL; else the parts are
// read and hashed), and meta.json says complete.
async function finish(root, entries, todo, run, digests = new Map()) {
  for (const e of todo) {
    e.files = await wholeParts(e.dir, e.meta);
    if (!e.files) throw new LlamawebError('NETWORK', `${e.url}: a part is missing or has the wrong size after the download`);
  }
  const hashing = entries.filter((e) => e.want && e.meta.sha256 !== e.want);
  run.vTotal = hashing.filter((e) => !digests.has(e.url)).reduce((s, e) => s + e.meta.size, 0);
  for (const e of hashing) {
    const got = digests.get(e.url) || await hashParts(e.files, run);
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
}

// A failed call: nothing of its downloads is left behind when storage ran out, a changed file loses its
// entry (other failures keep what arrived: the next call resumes it). Returns the error to throw.
async function failure(root, entries, err, userSignal) {
  const quota = isQuota(err);
  for (const e of quota ? entries.filter((x) => x.save) : err && err.entry ? [err.entry] : []) {
    await root.removeEntry(e.key, { recursive: true }).catch(() => {});
  }
  if (userSignal && userSignal.aborted) return abortError(userSignal);
  if (quota && err.code !== 'QUOTA_EXCEEDED') return new LlamawebError('QUOTA_EXCEEDED', `browser storage is full: ${err.message}`, { cause: err });
  if (err instanceof LlamawebError) return err;
  return new LlamawebError('NETWORK', err && err.message || String(err), { cause: err });
}

// An AbortController for the call that follows the caller's signal; off() removes the listener.
function follow(userSignal) {
  const ctl = new AbortController();
  const onAbort = () => ctl.abort(userSignal.reason);
  if (userSignal) userSignal.addEventListener('abort', onAbort, { once: true });
  ctl.off = () => { if (userSignal) userSignal.removeEventListener('abort', onAbort); };
  return ctl;
}

async function fill(hrefs, keys, o, opts) {
  const ctl = follow(opts.signal);
  const root = await cacheRoot();
  const entries = await readEntries(root, hrefs, keys, opts);
  const run = makeRun(o, ctl, opts);
  try {
    const todo = await prepare(root, entries, run, opts);
    // download (every URL's parts in one pool), then check and mark complete
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
    await finish(root, entries, todo, run);
    return entries.map((e) => new Blob(e.files));
  } catch (err) {
    throw await failure(root, entries, err, opts.signal);
  } finally {
    ctl.off();
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
