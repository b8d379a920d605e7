// Byte sources for the browser package: {size, name, read(offset, length) -> Promise<Uint8Array>}, the shape
// lwGpu.addSource takes (web/lw-gpu.js streams tensors from them into GPU buffers in chunks). From a File or
// Blob, a URL (HTTP range requests, or the OPFS model cache of web/lw-cache.mjs), an OPFS file by name, and
// split GGUF (llama.cpp's gguf-split: model-00001-of-00003.gguf, ...) presented to the loader as one file.
// Re-exported by web/llamaweb.mjs; modelSource() is what Llamaweb.open() reads a model through.
import { LlamawebError } from './lw-model.mjs';
import { cacheFiles, cacheStream, cacheUsable, throwIfAborted } from './lw-cache.mjs';

// A File or Blob (a picked or dropped file, an OPFS file): each chunk is sliced and read on demand.
export function blobSource(blob) {
  return {
    size: blob.size,
    name: blob.name || 'blob',
    read: async (off, len) => new Uint8Array(await blob.slice(off, off + len).arrayBuffer()),
  };
}

// A URL read with HTTP range requests (one request per chunk). The server must answer ranges with 206 and a
// Content-Range header (node web/serve.mjs does; so do static hosts and CDNs); cross-origin servers must
// also send CORS (and, on a cross-origin isolated page, CORP) headers.
export async function urlSource(url, { headers = {} } = {}) {
  const href = String(new URL(url, globalThis.location ? globalThis.location.href : undefined));
  const probe = await fetch(href, { headers: { ...headers, Range: 'bytes=0-0' } });
  // a server that ignores Range answers 200 with the whole file: never read that body
  const drop = (r) => { if (r.body) r.body.cancel().catch(() => {}); };
  if (!probe.ok) { drop(probe); throw new LlamawebError('NETWORK', `${href}: HTTP ${probe.status} ${probe.statusText}`); }
  if (probe.status !== 206) {
    drop(probe);
    throw new LlamawebError('NETWORK', `${href}: the server does not answer HTTP range requests (status ${probe.status}); ` +
      'open it through the model cache instead (open(url, {cache: true}), cacheModel)');
  }
  const range = probe.headers.get('Content-Range') || '';
  await probe.arrayBuffer(); // drain (one byte)
  const m = /\/(\d+)\s*$/.exec(range);
  let size = m ? Number(m[1]) : NaN;
  if (!m) {
    // a cross-origin server that does not expose Content-Range: the size from a HEAD's Content-Length
    const head = await fetch(href, { method: 'HEAD', headers });
    size = head.ok ? Number(head.headers.get('Content-Length')) : NaN;
    if (!(size > 0)) throw new LlamawebError('NETWORK', `${href}: the file size is unknown (no Content-Range nor Content-Length)`);
  }
  const read = async (off, len) => {
    const r = await fetch(href, { headers: { ...headers, Range: `bytes=${off}-${off + len - 1}` } });
    if (r.status !== 206) { drop(r); throw new Error(`${href}: range ${off}+${len}: HTTP ${r.status}`); }
    const b = new Uint8Array(await r.arrayBuffer());
    if (b.length !== len) throw new Error(`${href}: range ${off}+${len}: got ${b.length} bytes`);
    return b;
  };
  return { size, name: href.split('/').pop() || href, read };
}

// A file in the origin private file system (OPFS) by name.
export async function opfsSource(name) {
  const dir = await navigator.storage.getDirectory();
  const fh = await dir.getFileHandle(name);
  return blobSource(await fh.getFile());
}

// Names and sizes of the files in the OPFS root (the model cache is a folder there: listCached()).
export async function listOpfs() {
  const dir = await navigator.storage.getDirectory();
  const out = [];
  for await (const [name, h] of dir.entries()) {
    if (h.kind === 'file') out.push({ name, size: (await h.getFile()).size });
  }
  return out;
}

// Streams url into OPFS file `name` (chunk by chunk, never whole in memory) so later visits open it
// offline with opfsSource(name). onProgress(bytesDone, bytesTotal or 0); signal: an AbortSignal. The file
// appears only when every byte the server announced (Content-Length) arrived: OPFS commits a writable on
// close(), so a cut-off download leaves the name as it was. Not resumable: the model cache is
// (open(url), cacheModel(url)).
export async function downloadToOpfs(url, name, { onProgress, signal } = {}) {
  throwIfAborted(signal);
  let r;
  try {
    r = await fetch(url, { signal, cache: 'no-store' });
  } catch (e) {
    throwIfAborted(signal);
    throw new LlamawebError('NETWORK', `${url}: ${e.message}`, { cause: e });
  }
  if (!r.ok || !r.body) throw new LlamawebError('NETWORK', `${url}: HTTP ${r.status} ${r.statusText}`);
  const total = Number(r.headers.get('Content-Length')) || 0;
  const dir = await navigator.storage.getDirectory();
  const fh = await dir.getFileHandle(name, { create: true });
  const w = await fh.createWritable();
  let done = 0;
  try {
    const reader = r.body.getReader();
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) break;
      await w.write(value);
      done += value.length;
      if (onProgress) onProgress(done, total);
    }
    if (total && done !== total) throw new Error(`the body ended after ${done} of ${total} bytes`);
    await w.close();
  } catch (e) {
    await w.abort().catch(() => {});
    if ((await fh.getFile()).size === 0) await dir.removeEntry(name).catch(() => {}); // made by this call
    throwIfAborted(signal);
    if (e && e.name === 'QuotaExceededError') throw new LlamawebError('QUOTA_EXCEEDED', `browser storage is full: ${e.message}`, { cause: e });
    throw new LlamawebError('NETWORK', `${url}: ${e && e.message || e}`, { cause: e });
  }
  return opfsSource(name);
}

// ---------------------------------------------------------------------------------------------------------
// GGUF headers and split GGUF
// ---------------------------------------------------------------------------------------------------------

// Bytes of one value of each scalar GGUF type (0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
// 10 u64, 11 i64, 12 f64); 8 is a string, 9 an array.
const SCALAR = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
const GGUF_MAGIC = 0x46554747; // "GGUF"

// The header in b stops before its end: at least `need` bytes are wanted.
class ShortHeader extends Error {
  constructor(need) {
    super('short header');
    this.need = need;
  }
}

const modelError = (msg) => new LlamawebError('UNSUPPORTED_MODEL', msg);

// A GGUF v2/v3 header: {version, kv: [{key, type, value (scalars and strings), start, end (its bytes in b)}],
// tensors: [{name, dims, type, offset, start, end}], headerEnd, alignment, dataStart}. Throws ShortHeader
// when b ends inside it, an UNSUPPORTED_MODEL error when it is not a GGUF header.
export function parseGgufHeader(b, name = 'file') {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const text = new TextDecoder();
  let p = 0;
  const need = (n) => { if (p + n > b.length) throw new ShortHeader(p + n); };
  const u32 = () => { need(4); p += 4; return dv.getUint32(p - 4, true); };
  const u64 = () => {
    need(8);
    p += 8;
    const v = dv.getBigUint64(p - 8, true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw modelError(`${name}: a GGUF count or offset past 2^53 at byte ${p - 8}`);
    return Number(v);
  };
  const str = () => { const n = u64(); need(n); p += n; return text.decode(b.subarray(p - n, p)); };
  // only type t's getter runs: a wider one would read past a small value at the end of b (a RangeError)
  const READ = [(q) => dv.getUint8(q), (q) => dv.getInt8(q), (q) => dv.getUint16(q, true), (q) => dv.getInt16(q, true),
    (q) => dv.getUint32(q, true), (q) => dv.getInt32(q, true), (q) => dv.getFloat32(q, true), (q) => dv.getUint8(q) !== 0,
    null, null, (q) => dv.getBigUint64(q, true), (q) => dv.getBigInt64(q, true), (q) => dv.getFloat64(q, true)];
  const scalar = (t) => {
    need(SCALAR[t]);
    p += SCALAR[t];
    return READ[t](p - SCALAR[t]);
  };
  if (b.length >= 4 && dv.getUint32(0, true) !== GGUF_MAGIC) throw modelError(`${name}: not a GGUF file`);
  u32();
  const version = u32();
  if (version !== 2 && version !== 3) throw modelError(`${name}: GGUF version ${version} (2 and 3 are read)`);
  const nTensors = u64(), nKv = u64();
  if (nTensors > 1e7 || nKv > 1e7) throw modelError(`${name}: ${nTensors} tensors, ${nKv} keys: not a sane GGUF header`);
  const kv = [];
  for (let i = 0; i < nKv; i++) {
    const start = p, key = str(), type = u32();
    let value;
    if (SCALAR[type]) value = scalar(type);
    else if (type === 8) value = str();
    else if (type === 9) {
      const et = u32(), n = u64();
      if (et === 8) for (let k = 0; k < n; k++) { const m = u64(); need(m); p += m; }
      else if (SCALAR[et]) { need(n * SCALAR[et]); p += n * SCALAR[et]; }
      else throw modelError(`${name}: key ${key}: arrays of GGUF type ${et} are not read`);
    } else throw modelError(`${name}: key ${key}: GGUF value type ${type}`);
    kv.push({ key, type, value, start, end: p });
  }
  const tensors = [];
  for (let i = 0; i < nTensors; i++) {
    const start = p, tname = str(), nd = u32();
    if (nd > 8) throw modelError(`${name}: tensor ${tname}: ${nd} dimensions`);
    const dims = [];
    for (let d = 0; d < nd; d++) dims.push(u64());
    tensors.push({ name: tname, dims, type: u32(), offset: u64(), start, end: p });
  }
  const al = kv.find((k) => k.key === 'general.alignment');
  const alignment = al ? Number(al.value) : 32;
  if (!(alignment > 0) || (alignment & (alignment - 1))) throw modelError(`${name}: general.alignment ${alignment}`);
  return { version, kv, tensors, headerEnd: p, alignment, dataStart: Math.ceil(p / alignment) * alignment };
}

// A source's GGUF header, read with a head that grows as the header needs ({h, head}).
export async function readGgufHeader(src, first = 1 << 20) {
  let len = Math.min(src.size, first);
  for (;;) {
    const head = await src.read(0, len);
    try {
      return { h: parseGgufHeader(head, src.name), head };
    } catch (e) {
      if (!(e instanceof ShortHeader)) throw e;
      if (len >= src.size || e.need > src.size) throw modelError(`${src.name}: the GGUF header is cut off (${src.size} bytes)`);
      len = Math.min(src.size, Math.max(2 * len, Math.ceil(e.need * 1.25)));
    }
  }
}

// model-00001-of-00003.gguf: llama.cpp's names of split GGUF parts (llama_split_path: "%s-%05d-of-%05d.gguf").
const SPLIT_NAME = /-(\d{5})-of-(\d{5})\.gguf$/i;

// Every part's URL when url names a part of a split GGUF (any of them), else null.
export function splitUrls(url) {
  const u = new URL(url, globalThis.location ? globalThis.location.href : undefined);
  const m = SPLIT_NAME.exec(u.pathname);
  const n = m ? Number(m[2]) : 0;
  if (n < 2) return null;
  return Array.from({ length: n }, (_, i) => {
    const v = new URL(u);
    v.pathname = u.pathname.slice(0, m.index) + `-${String(i + 1).padStart(5, '0')}-of-${m[2]}.gguf`;
    return String(v);
  });
}

const kvNum = (h, key) => {
  const k = h.kv.find((x) => x.key === key);
  return k && typeof k.value !== 'string' && k.value !== undefined ? Number(k.value) : undefined;
};

// The parts of a split GGUF (byte sources, in any order) as one GGUF file for the loader. gguf-split writes
// every model key and split.no (u16, 0-based), split.count (u16) and split.tensors.count (i32, over all
// parts) into the first part, only the split keys into the others, and each part's tensors after its own
// header (each tensor padded to the alignment). The file presented here is: a header made in memory (the
// first part's keys but split.*, every part's tensor infos in order, offsets moved), then each part's data
// section at the next aligned offset; reads of it go to the parts. For a file gguf-split made from a model
// with 32-byte alignment that is the original file, byte for byte. Checked: the keys say every part is
// there once, the tensor counts agree, names are unique, each tensor starts inside its part's data; a read
// that runs from one part's data past its end (a part cut off) fails. One source that is not split is
// returned as it is.
export async function splitSource(parts) {
  if (!parts.length) throw modelError('split GGUF: no parts');
  const heads = await Promise.all(parts.map((s) => readGgufHeader(s)));
  const info = heads.map(({ h, head }, i) => ({ src: parts[i], h, head, no: kvNum(h, 'split.no'), count: kvNum(h, 'split.count') }));
  if (parts.length === 1 && !(info[0].count > 1)) return parts[0];
  for (const x of info) {
    if (!(x.count >= 1) || x.no === undefined) throw modelError(`split GGUF: ${x.src.name} has no split.count / split.no keys`);
  }
  const n = info[0].count;
  if (info.some((x) => x.count !== n)) throw modelError(`split GGUF: the parts disagree on split.count (${info.map((x) => x.count).join(', ')})`);
  info.sort((a, b) => a.no - b.no);
  const nos = info.map((x) => x.no);
  if (parts.length !== n || nos.some((no, i) => no !== i)) {
    const missing = Array.from({ length: n }, (_, i) => i).filter((i) => !nos.includes(i)).map((i) => i + 1);
    const twice = [...new Set(nos.filter((no, i) => nos.indexOf(no) !== i))].map((no) => no + 1);
    const list = (what, xs) => (xs.length ? `; part${xs.length > 1 ? 's' : ''} ${xs.join(', ')} ${what}` : '');
    throw new LlamawebError('BAD_INPUT', `split GGUF of ${n} parts: ${parts.length} given (split.no ${nos.join(', ')})` +
      list('missing', missing) + list('given twice', twice));
  }
  const first = info[0].h, A = first.alignment;
  const nTensors = info.reduce((s, x) => s + x.h.tensors.length, 0);
  const declared = kvNum(first, 'split.tensors.count');
  if (declared !== undefined && declared !== nTensors) throw modelError(`split GGUF: split.tensors.count ${declared}, the parts hold ${nTensors} tensors`);
  const names = new Set();
  // layout: header, then each part's data section at the next multiple of A
  const keep = first.kv.filter((k) => !k.key.startsWith('split.'));
  let headerLen = 24 + keep.reduce((s, k) => s + k.end - k.start, 0);
  for (const x of info) for (const t of x.h.tensors) headerLen += t.end - t.start;
  const dataStart = Math.ceil(headerLen / A) * A;
  const segs = []; // {start, end, src?, srcOff?, bytes?}: contiguous over the file; no src and no bytes: zeros
  let at = dataStart;
  const placed = [];
  for (const x of info) {
    const len = x.src.size - x.h.dataStart;
    if (len < 0) throw modelError(`split GGUF: ${x.src.name} ends inside its header`);
    if (x.h.alignment % A) throw modelError(`split GGUF: ${x.src.name} is aligned to ${x.h.alignment} bytes, the first part to ${A}`);
    const base = Math.ceil(at / A) * A;
    if (base > at) segs.push({ start: at, end: base });
    for (const t of x.h.tensors) {
      if (names.has(t.name)) throw modelError(`split GGUF: tensor ${t.name} is in two parts`);
      names.add(t.name);
      if (t.offset > len) throw modelError(`split GGUF: tensor ${t.name} starts past the end of ${x.src.name} (cut off?)`);
      placed.push({ x, t, offset: base - dataStart + t.offset });
    }
    segs.push({ start: base, end: base + len, src: x.src, srcOff: x.h.dataStart, part: x });
    at = base + len;
  }
  // the header: magic, version, counts, the kept keys' bytes as they are, tensor infos with new offsets
  const head = new Uint8Array(headerLen);
  const dv = new DataView(head.buffer);
  dv.setUint32(0, GGUF_MAGIC, true);
  dv.setUint32(4, first.version, true);
  dv.setBigUint64(8, BigInt(nTensors), true);
  dv.setBigUint64(16, BigInt(keep.length), true);
  let p = 24;
  for (const k of keep) { head.set(info[0].head.subarray(k.start, k.end), p); p += k.end - k.start; }
  for (const { x, t, offset } of placed) {
    head.set(x.head.subarray(t.start, t.end - 8), p);
    p += t.end - t.start;
    dv.setBigUint64(p - 8, BigInt(offset), true);
  }
  segs.unshift({ start: 0, end: headerLen, bytes: head }, ...(dataStart > headerLen ? [{ start: headerLen, end: dataStart }] : []));
  const size = at, name = info[0].src.name.replace(SPLIT_NAME, '.gguf');
  const readSeg = (s, off, len) => (s.bytes ? s.bytes.subarray(off - s.start, off - s.start + len)
    : s.src ? s.src.read(s.srcOff + off - s.start, len) : new Uint8Array(len));
  const read = async (off, len) => {
    if (off < 0 || len < 0 || off + len > size) throw new RangeError(`split GGUF: bytes ${off}+${len} of ${size}`);
    let lo = 0, hi = segs.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (segs[mid].start <= off) lo = mid; else hi = mid - 1; }
    const s = segs[lo];
    if (off + len <= s.end) return readSeg(s, off, len);
    // only a read from the header (the loader's prefetch) spans parts; a tensor lies in one part's data
    if (off >= headerLen) {
      throw modelError(`split GGUF: bytes ${off}+${len} run past the end of ${s.part ? s.part.src.name + "'s data" : 'the padding'}` +
        ' (is a part cut off?)');
    }
    const out = new Uint8Array(len);
    for (let i = lo, q = off; q < off + len; i++) {
      const t = segs[i], k = Math.min(off + len, t.end) - q;
      out.set(await readSeg(t, q, k), q - off);
      q += k;
    }
    return out;
  };
  return { size, name, read, parts: n };
}

// ---------------------------------------------------------------------------------------------------------
// What Llamaweb.open() was given, as one byte source
// ---------------------------------------------------------------------------------------------------------

const isUrl = (w) => typeof w === 'string' || (typeof URL !== 'undefined' && w instanceof URL);

// A URL, or the parts of a split GGUF named by the URL of any of them: through the cache (opts.cache,
// default on where OPFS can be written) or by range requests. Through the cache the download streams into
// the engine as it is written (cacheStream: one network pass; the handle goes to got.download), or with
// opts.stream false is downloaded whole first and read back from OPFS.
async function urlSources(urls, opts, got) {
  if (opts.cache !== false && await cacheUsable()) {
    const names = urls.map((u) => decodeURIComponent(String(u).split(/[?#]/)[0].split('/').pop() || 'model.gguf'));
    if (opts.stream === false) {
      const blobs = await cacheFiles(urls, opts);
      return blobs.map((b, i) => ({ ...blobSource(b), name: names[i] }));
    }
    const h = await cacheStream(urls, opts);
    if (h.sources.some((x) => x.tee)) got.download = h; // else every file was in the cache, complete
    return h.sources.map((s, i) => ({ size: s.size, read: s.read, name: names[i] }));
  }
  return Promise.all(urls.map((u) => urlSource(u, { headers: opts.headers })));
}

// One source from a File/Blob, {opfs: name}, a byte source, or a URL (not split).
async function oneSource(what) {
  if (typeof Blob !== 'undefined' && what instanceof Blob) return blobSource(what);
  if (what && typeof what.opfs === 'string') return { ...(await opfsSource(what.opfs)), name: what.opfs };
  if (what && typeof what.read === 'function' && Number.isFinite(what.size)) return what;
  throw new LlamawebError('BAD_INPUT', 'open(): expected a File/Blob, a URL, {opfs: name}, a byte source {size, read}, or an array of ' +
    'them (the parts of a split GGUF)');
}

// What open() reads the model from: what = File/Blob, URL (a split GGUF's part URL brings every part),
// {opfs: name}, a byte source, or an array of those (a split GGUF's parts, in any order). opts: cache,
// stream, sha256, headers, signal, onProgress(done, total, phase), and the cache's partBytes, parallel,
// retries, retryDelayMs, streamBytes. Reads of the source fail with ABORTED once opts.signal is aborted.
// A URL through the cache that was not complete yet gives a source with `download` (cacheStream's handle:
// done, stop, stats, release, error): the caller awaits download.done after the load (the entry is then
// complete and checked) or calls stop() when the load failed.
export async function modelSource(what, opts = {}) {
  const { signal } = opts;
  throwIfAborted(signal);
  let src;
  const dl = {};
  try {
    src = await pickSource(what, opts, dl);
  } catch (e) {
    if (dl.download) { dl.download.stop(e); await dl.download.done.catch(() => {}); }
    throw e;
  }
  const inner = src;
  if (signal) src = { size: inner.size, name: inner.name, read: (off, len) => { throwIfAborted(signal); return inner.read(off, len); } };
  else if (dl.download) src = { size: inner.size, name: inner.name, read: inner.read };
  if (dl.download) src.download = dl.download;
  return src;
}

async function pickSource(what, opts, dl) {
  let src;
  if (isUrl(what)) {
    const urls = splitUrls(what) || [what];
    const got = await urlSources(urls, opts, dl);
    src = got.length > 1 ? await splitSource(got) : got[0];
  } else if (Array.isArray(what)) {
    if (!what.length) throw new LlamawebError('BAD_INPUT', 'open(): an empty array');
    const got = what.every(isUrl) ? await urlSources(what, opts, dl) : await Promise.all(what.map(oneSource));
    src = await splitSource(got);
  } else {
    src = await oneSource(what);
    const m = SPLIT_NAME.exec(src.name || '');
    if (m && Number(m[2]) > 1) {
      throw new LlamawebError('BAD_INPUT', `${src.name} is part ${Number(m[1])} of a split GGUF of ${Number(m[2])} parts: open all of them ` +
        'together (an array of Files, or the URL of any part)');
    }
  }
  return src;
}

// C parses the header synchronously (lw_js_source_read_sync), which a Blob or a fetch cannot serve: it is
// served from a prefetched head of the file. A read past the head is recorded (miss) and fails the open;
// open() then retries with a longer head. Only the header lives here, never the tensor data.
export async function withHead(src, headBytes) {
  const head = await src.read(0, Math.min(src.size, headBytes));
  const s = {
    size: src.size,
    name: src.name,
    read: src.read,
    head,
    miss: 0, // furthest byte a synchronous read wanted past the head
    readSync(off, len) {
      if (off + len <= head.length) return head.subarray(off, off + len);
      s.miss = Math.max(s.miss, off + len);
      throw new Error('read past the prefetched head');
    },
  };
  return s;
}
