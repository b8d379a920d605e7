// Whole models on WebGPU from JS, over the wasm module's entry points (web/lw-wasm-model.c): a GGUF file is
// registered as a host byte source (lwGpu.addSource), C parses only its header through readSync, and the
// weights are streamed by the glue from the source straight into GPU buffers (never through the wasm heap).
//
//     const { Module } = await setup();                         // web/lw-node.mjs (Node + Dawn)
//     const m = await GpuModel.open(Module, fileSource('m.gguf'), { nCtx: 512 });
//     const ids = m.tokenize('Once upon a time', true);
//     let next = await m.decode(ids);                           // greedy id of the next token
//     while (...) next = await m.decode([next]);
//     m.nPast = 0;                                              // or sampled on the GPU (the CPU sampler's
//     next = await m.decode(ids, { temp: 0.8, seed: 1 });       // chain and generator; same seed, same text)
//     m.free();
// No top-level Node imports: this module is shared with the browser entry (web/llamaweb.mjs); node:fs is
// looked up only when a Node file is opened (process.getBuiltinModule: Node >= 20.16).

// Errors with a code. The public codes (what the package's API rejects with; web/llamaweb.d.mts):
//   GPU_UNAVAILABLE    no WebGPU, no adapter or device, or the device failed
//   UNSUPPORTED_MODEL  the file was refused (not GGUF, corrupt, an architecture or format this build lacks)
//   NOT_ENOUGH_MEMORY  the wasm heap (or the address space) cannot hold what the model needs
//   NETWORK            the byte source failed (HTTP, a File read), after retries with backoff
//   QUOTA_EXCEEDED     browser storage (OPFS) is full
//   ABORTED            the AbortSignal fired (or had fired before the call)
//   CONTEXT_FULL       the prompt does not fit the context
//   BAD_INPUT          an argument was refused (the message says which)
// `status` is the C lw_status where one caused it (a number; `statusText` its lw_status_str), else null.
// The GPU model below throws the engine's own codes (LW_ERR_READ: the source failed; LW_ERR_GPU: the device
// reported an error; LW_ERR_MODEL: the file or its GPU plan was refused; LW_ERR_NOMEM: the wasm heap ran out),
// which LlamawebError.from maps to the public ones. A failed open() has freed what it made.
export class LlamawebError extends Error {
  constructor(code, message, options = {}) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'LlamawebError';
    this.code = code;
    this.status = options.status ?? null;
    this.statusText = options.statusText ?? null;
  }

  // e (anything thrown) as a LlamawebError with a public code; `code` is used when e says nothing better.
  static from(e, code = 'BAD_INPUT') {
    if (e instanceof LlamawebError && PUBLIC_CODES.has(e.code)) return e;
    const legacy = e && LEGACY_CODES[e.code];
    const dom = e && e.name === 'QuotaExceededError' ? 'QUOTA_EXCEEDED' : e && e.name === 'AbortError' ? 'ABORTED' : null;
    const why = e && e.message ? e.message : String(e);
    return new LlamawebError(legacy || dom || (/out of memory/i.test(why) ? 'NOT_ENOUGH_MEMORY' : code), why,
      { cause: e, status: e && e.status, statusText: e && e.statusText });
  }
}

const PUBLIC_CODES = new Set(['GPU_UNAVAILABLE', 'UNSUPPORTED_MODEL', 'NOT_ENOUGH_MEMORY', 'NETWORK', 'QUOTA_EXCEEDED',
  'ABORTED', 'CONTEXT_FULL', 'BAD_INPUT']);
const LEGACY_CODES = { LW_ERR_READ: 'NETWORK', LW_ERR_GPU: 'GPU_UNAVAILABLE', LW_ERR_MODEL: 'UNSUPPORTED_MODEL',
  LW_ERR_NOMEM: 'NOT_ENOUGH_MEMORY' };

// The public code of C status `status` (include/llamaweb.h's order) with `message` from a call of kind 'open'
// or 'decode'. LW_ERR_TOO_LARGE at open is a file announcing absurd sizes, or weights beyond the address
// space (the loader's message says so); at decode, a prompt past the context.
const S = { INVALID_ARG: 1, NOMEM: 2, IO: 3, TOO_LARGE: 8 };
export function statusCode(status, kind = 'open', message = '') {
  if (status === S.NOMEM) return 'NOT_ENOUGH_MEMORY';
  if (status === S.IO) return 'NETWORK';
  if (status === S.INVALID_ARG) return 'BAD_INPUT';
  if (status === S.TOO_LARGE && kind === 'decode') return 'CONTEXT_FULL';
  if (status === S.TOO_LARGE && /address space/.test(message)) return 'NOT_ENOUGH_MEMORY';
  return kind === 'decode' ? 'BAD_INPUT' : 'UNSUPPORTED_MODEL';
}

// A LlamawebError for C status st of module M (its lw_status_str where the build has it).
export function statusError(M, st, message, kind) {
  const statusText = typeof M._lw_wasm_status_str === 'function' ? M.UTF8ToString(M._lw_wasm_status_str(st)) : null;
  return new LlamawebError(statusCode(st, kind, message), message, { status: st, statusText });
}

// A Node file as a host source: async reads for streaming, synchronous ones for the header.
export function fileSource(path) {
  const { openSync, readSync, fstatSync, closeSync } = process.getBuiltinModule('node:fs');
  const fd = openSync(path, 'r');
  const size = fstatSync(fd).size;
  const readAt = (off, len) => {
    const b = new Uint8Array(len);
    let done = 0;
    while (done < len) {
      const n = readSync(fd, b, done, len - done, off + done);
      if (n <= 0) throw new Error(`${path}: short read at ${off + done}`);
      done += n;
    }
    return b;
  };
  return { size, readSync: readAt, read: async (off, len) => readAt(off, len), close: () => closeSync(fd) };
}

// Bytes already in JS memory as a host source.
export function bytesSource(bytes) {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const sub = (off, len) => u8.subarray(off, off + len);
  return { size: u8.length, readSync: sub, read: async (off, len) => sub(off, len) };
}

function cstr(M, s) {
  const n = M.lengthBytesUTF8(s) + 1;
  const p = M._malloc(n);
  M.stringToUTF8(s, p, n);
  return [p, n - 1];
}

// Tune overrides for lw_wasm_model_open from a JSON string, a nested object (the same JSON), or an object of
// dotted keys (per-key setter). Throws with the parser's message (which key, where) when refused.
function makeTune(M, tune) {
  const t = M._lw_wasm_tune_new();
  if (!t) throw new Error('out of memory');
  const fail = (st) => {
    const msg = M.UTF8ToString(M._lw_wasm_tune_error(t));
    M._lw_wasm_tune_free(t);
    throw new Error(msg.startsWith('tune') ? msg : 'tune: ' + (msg || 'status ' + st));
  };
  if (typeof tune === 'object' && Object.keys(tune).every((k) => k.includes('.'))) {
    for (const [k, v] of Object.entries(tune)) {
      const [p] = cstr(M, k);
      const st = M._lw_wasm_tune_set(t, p, Number(v));
      M._free(p);
      if (st !== 0) fail(st);
    }
    return t;
  }
  const text = typeof tune === 'string' ? tune : JSON.stringify(tune);
  const [p, n] = cstr(M, text);
  const st = M._lw_wasm_tune_json(t, p, n);
  M._free(p);
  if (st !== 0) fail(st);
  return t;
}

// rows.embeddings of open()'s options: token embedding rows the row store keeps on the GPU (0: the whole table);
// BAD_INPUT for anything but a non-negative integer.
export function rowsEmbd(opts) {
  const r = opts.rows;
  if (r === undefined || r === null) return 0;
  const n = typeof r === 'object' ? r.embeddings ?? 0 : NaN;
  if (!Number.isInteger(n) || n < 0 || n > 0x7fffffff)
    throw new LlamawebError('BAD_INPUT', `rows: {embeddings: N} takes a non-negative integer (got ${JSON.stringify(r)})`);
  return n;
}

// Sampling parameters as lw_wasm_model_set_sampling takes them; defaults are the CPU sampler's
// (lw_sampler_default_params, the native `llamaweb run`'s): temp 0.8, top-k 40, top-p 0.95, min-p 0.05,
// seed 0x5eed.
export const SAMPLING_DEFAULTS = Object.freeze({ temp: 0.8, topK: 40, topP: 0.95, minP: 0.05, seed: 0x5eed });

export class GpuModel {
  // Opens and plans the model and awaits the weight upload. opts: nCtx, nBatch, submitEvery, f16, subgroups
  // (-1 or undefined: as the device offers), kvType 'f16' | 'f32' | 'q8_0' | 'q4_0' or kvF32 (an f32 KV cache
  // instead of f16; gpuKvType), tune (kernel overrides,
  // src/webgpu/gpu-tune.h: the JSON text `node web/tune.mjs` prints, the same as an object, or an object of
  // single keys {'matvec.q4_0.wg': 128}; a bad one throws before anything is opened). Streaming: maxInFlight
  // (chunks read and not yet on the GPU, at most; default lwGpu.load's), retries (per chunk); verifyUpload:
  // afterwards every streamed byte is read back from its GPU buffer and compared with the source read again
  // (m.uploadCheck: lwGpu.verifyUploads' result; a difference throws; costs a second read and a read-back).
  // Afterwards m.loadMs and m.loadStats ({ms, bytes, chunks, peakInFlight, retries, peakJsHeap}). Failures throw a
  // LlamawebError and free what was made.
  // rows: {embeddings: N}: the row store keeps only N token embedding rows on the GPU (an LRU cache with a GPU
  // id -> slot map; misses read from the source at the row's offset in the GGUF); tokens are identical. Where
  // it cannot serve the table (tied output projection, ...) the table is resident and rowsStats().fallback
  // says why (also m.rowsFallback, set once at open).
  static async open(M, source, opts = {}) {
    gpuKvType(opts); // a bad kvType throws before anything is opened
    rowsEmbd(opts);
    const tune = opts.tune === undefined || opts.tune === null || opts.tune === '' ? 0 : makeTune(M, opts.tune);
    const L = M.lwGpu.load, saved = L ? { ...L } : null;
    if (L && opts.maxInFlight > 0) L.maxInFlight = opts.maxInFlight;
    if (L && opts.retries >= 0) L.retries = opts.retries;
    if (L && opts.verifyUpload) L.verify = true;
    let m = null;
    try {
      m = await GpuModel.open_(M, source, tune, opts);
    } finally {
      if (saved) Object.assign(L, saved);
      if (!m && opts.verifyUpload && M.lwGpu.uploadLog) M.lwGpu.uploadLog = null; // a failed open's writes
    }
    if (opts.verifyUpload) {
      // every streamed byte read back from the GPU against the source (the weights past 4 GiB included)
      try {
        m.uploadCheck = await M.lwGpu.verifyUploads(m.sourceId);
      } catch (e) {
        m.free();
        throw new LlamawebError('LW_ERR_GPU', 'verifying the upload: ' + (e && e.message || e));
      }
      const c = m.uploadCheck;
      if (c.mismatches) {
        m.free();
        throw new LlamawebError('LW_ERR_GPU', `the upload differs from the file in ${c.mismatches} chunk(s), the first at file offset ` +
          `${c.first.srcOffset} (${c.first.buffer} + ${c.first.offset})`);
      }
    }
    return m;
  }

  static async open_(M, source, tune, opts) {
    let id, h, t0;
    try {
      id = M.lwGpu.addSource(source);
      t0 = performance.now();
      if (M.lwGpu.resetLoadStats) M.lwGpu.resetLoadStats();
      h = M._lw_wasm_model_open(id, source.size, opts.nCtx ?? 0, opts.nBatch ?? 0, opts.submitEvery ?? 0,
        opts.f16 ?? -1, opts.subgroups ?? -1, gpuKvType(opts), tune, opts.exact === undefined ? -1 : opts.exact ? 1 : 0,
        rowsEmbd(opts));
    } finally {
      if (tune) M._lw_wasm_tune_free(tune); // read during open only
    }
    if (!h) {
      M.lwGpu.removeSource(id);
      throw new LlamawebError('LW_ERR_NOMEM', 'out of memory');
    }
    const m = new GpuModel(M, h, id, source);
    const err = M.UTF8ToString(M._lw_wasm_model_error(h));
    if (err) {
      m.free(); // first: cancels queued streams (nothing more is read)
      await M.lwGpu.settle();
      throw new LlamawebError(/out of memory/.test(err) ? 'LW_ERR_NOMEM' : 'LW_ERR_MODEL', err);
    }
    await M.lwGpu.settle();
    const se = M.lwGpu.sourceError ? M.lwGpu.sourceError(id) : null;
    try {
      m.check();
      if (se) throw new Error(se.message);
    } catch (e) {
      m.free();
      await M.lwGpu.settle();
      throw new LlamawebError(se ? se.code : 'LW_ERR_GPU', e.message);
    }
    m.loadMs = performance.now() - t0;
    m.rowsFallback = m.rowsStats().fallback; // said once: the reason the resident table serves instead (or null)
    const S = M.lwGpu.loadStats;
    m.loadStats = S ? { ms: m.loadMs, bytes: S.bytes, chunks: S.chunks, peakInFlight: S.peakInFlight, retries: S.retries,
      peakJsHeap: S.peakJsHeap } : { ms: m.loadMs };
    return m;
  }

  constructor(M, h, sourceId, source) {
    this.M = M;
    this.h = h;
    this.sourceId = sourceId;
    this.source = source;
    this.nVocab = M._lw_wasm_model_n_vocab(h);
    this.sampling = JSON.stringify(SAMPLING_DEFAULTS); // what the C side starts with
    this.ids = M._malloc(4 * 65536); // token ids passed to C
    this.idsCap = 65536;
    this.grammar = null; // a Grammar (web/lw-structured.mjs) choosing the tokens of decode(), or null
    this.gpuMask = true; // a grammar's mask applied on the GPU (false: its logits read back, the CPU picks)
    this.rowsStep = M._lw_wasm_model_rows_step(h); // > 0: token rows from the row store, this many per step
  }

  check() {
    if (this.M._lw_wasm_model_check(this.h)) throw new LlamawebError('LW_ERR_GPU', this.M.UTF8ToString(this.M._lw_wasm_model_error(this.h)));
  }

  // Token ids of text (addSpecial: BOS as the vocabulary asks).
  tokenize(text, addSpecial = true) {
    const M = this.M;
    const [p, n] = cstr(M, text);
    const cap = 4 * n + 8;
    const out = M._malloc(4 * cap);
    try {
      const k = M._lw_wasm_model_tokenize(this.h, p, n, addSpecial ? 1 : 0, out, cap);
      if (k < 0) throw new Error(M.UTF8ToString(M._lw_wasm_model_error(this.h)));
      return Array.from(M.HEAP32.subarray(out >> 2, (out >> 2) + k));
    } finally {
      M._free(p);
      M._free(out);
    }
  }

  // Bytes of token id's text (a piece may be part of a UTF-8 character).
  pieceBytes(id) {
    const M = this.M;
    const p = M._malloc(256);
    try {
      const n = M._lw_wasm_model_piece(this.h, id, p, 256);
      return n < 0 ? new Uint8Array(0) : M.HEAPU8.slice(p, p + n);
    } finally {
      M._free(p);
    }
  }

  isEog(id) {
    return this.M._lw_wasm_model_is_eog(this.h, id) !== 0;
  }

  // Sampling parameters of decode(ids, 'sample') (see SAMPLING_DEFAULTS; missing fields take the defaults),
  // and reseeds the generator: the same seed and parameters give the same tokens. Temperature <= 0 is greedy;
  // topK <= 0 or above the GPU's cap (256 for vocabularies up to 65536) takes the cap; the draws are the CPU
  // sampler's (tokens lw_sampler_sample would draw from the same logits and seed). Returns the top-k in effect.
  setSampling(params = {}) {
    const p = { ...SAMPLING_DEFAULTS, ...params };
    const k = this.M._lw_wasm_model_set_sampling(this.h, p.temp, p.topK, p.topP, p.minP, Number(p.seed));
    if (k < 0) throw new Error(this.M.UTF8ToString(this.M._lw_wasm_model_sampling_error(this.h)));
    this.sampling = JSON.stringify(p);
    if (this.grammar) this.grammar.follow(p); // its draws reseeded with the engine's
    return k;
  }

  // Decodes ids (appended at nPast); out: 'argmax' (default) resolves to the greedy next id (GPU argmax),
  // 'logits' to {id, logits} (the GPU argmax and a Float32Array copy of the last row's logits), 'none' to null,
  // 'sample' to a token drawn on the GPU with the setSampling parameters (the defaults until then), and an
  // object of sampling parameters ({temp, topK, topP, minP, seed}) the same after setSampling(out) when they
  // differ from the ones in effect (so passing the same object every step keeps one seeded sequence).
  async decode(ids, out = 'argmax') {
    const M = this.M;
    if (ids.length > this.idsCap) throw new Error('too many tokens in one call');
    if (out !== null && typeof out === 'object') {
      if (JSON.stringify({ ...SAMPLING_DEFAULTS, ...out }) !== this.sampling) this.setSampling(out);
      out = 'sample';
    }
    M.HEAP32.set(ids, this.ids >> 2);
    // a grammar (web/lw-structured.mjs, set while a constrained request runs) picks the token: by default on
    // the GPU, its allowed-token mask uploaded before the step and the argmax / draw over the allowed ids
    // there (4 bytes read back, gr.onGpu); else (gpuMask false, a wasm build without the mask, or a GPU id the
    // grammar does not allow: no allowed id with a non-NaN logit) from the logits read back (n_vocab floats)
    // with the CPU sampler
    const gr = this.grammar && (out === 'argmax' || out === 'sample') ? this.grammar : null;
    const masked = gr && this.gpuMask && typeof M._lw_wasm_model_set_mask === 'function';
    const kind = masked ? (out === 'sample' ? 3 : 1) : gr || out === 'logits' ? 2 : out === 'none' ? 0 : out === 'sample' ? 3 : 1;
    const past = this.nPast;
    let at = 0, n = ids.length;
    if (this.rowsStep > 0) {
      // the row store: a step's rows are loaded (streamed from the source) and awaited before it is recorded,
      // one step of at most rowsStep tokens (their rows resident together) per call
      for (;;) {
        n = Math.min(this.rowsStep, ids.length - at);
        const loads = M._lw_wasm_model_rows_load(this.h, this.ids + 4 * at, n);
        if (loads < 0) throw new Error(M.UTF8ToString(M._lw_wasm_model_error(this.h)));
        if (loads > 0) {
          await M.lwGpu.settle();
          this.check();
        }
        if (at + n >= ids.length) break;
        const st = M._lw_wasm_model_decode(this.h, this.ids + 4 * at, n, 0);
        if (st !== 0) throw new Error(M.UTF8ToString(M._lw_wasm_model_error(this.h)));
        at += n;
      }
    }
    if (masked) {
      const st = M._lw_wasm_model_set_mask(this.h, gr.mask(), (this.nVocab + 31) >> 5);
      if (st !== 0) throw new Error(M.UTF8ToString(M._lw_wasm_model_error(this.h)));
    }
    const st = M._lw_wasm_model_decode(this.h, this.ids + 4 * at, n, kind);
    if (st !== 0) throw new Error(M.UTF8ToString(M._lw_wasm_model_error(this.h)));
    await M.lwGpu.settle();
    this.check();
    if (masked) {
      const id = gr.take(M._lw_wasm_model_token(this.h));
      if (id >= 0) return id;
      // the fallback: this last step again with its logits read back (the same cells, the same values)
      this.nPast = past + at;
      const st2 = M._lw_wasm_model_decode(this.h, this.ids + 4 * at, n, 2);
      if (st2 !== 0) throw new Error(M.UTF8ToString(M._lw_wasm_model_error(this.h)));
      await M.lwGpu.settle();
      this.check();
    }
    if (gr) return gr.pick(this, out, M._lw_wasm_model_logits(this.h));
    if (kind === 1 || kind === 3) return M._lw_wasm_model_token(this.h);
    if (kind === 2) {
      const p = M._lw_wasm_model_logits(this.h) >> 2;
      return { id: M._lw_wasm_model_token(this.h), logits: M.HEAPF32.slice(p, p + this.nVocab) };
    }
    return null;
  }

  // The ids generated after `ids`, the GPU keeping the decode loop: each step's input id is the previous
  // step's output on the GPU (lw__gpu_model_decode_next), so `depth` steps are recorded and submitted ahead of
  // the id the caller is handed and the host never waits for a read-back between two steps. out: 'argmax'
  // or sampling as decode(). Stopping (break / return()) undoes the speculative steps: nPast and the draws'
  // generator end as if the loop had decoded each handed id but the last, as the one-step loop
  //   for (let id = await m.decode(ids, out); ; id = await m.decode([id], out)) { ...; if (stop) break; }
  // does, with the same ids. With a grammar or 'logits' it is that loop (the CPU picks every id).
  // With the row store the steps stay speculative: a chained step gathers its input id through the GPU's
  // id -> slot map before the host has seen the id; when the host reads it, it checks that the row was
  // resident (rows_check) and, when it was not, waits for the steps in flight, undoes them, and decodes the
  // id from the host (which loads its row first). Nothing else changes the map while steps are in flight.
  async *chain(ids, out = 'argmax', { depth = 2 } = {}) {
    const M = this.M;
    let next = await this.decode(ids, out);
    if (this.grammar || (out !== 'argmax' && out !== 'sample' && (out === null || typeof out !== 'object'))) {
      for (;;) { yield next; next = await this.decode([next], out); }
    }
    const kind = out === 'argmax' ? 1 : 3, ring = M._lw_wasm_model_chain_ids(this.h) >> 2;
    const q = []; // steps in flight, oldest first: {slot, read}
    const more = () => { // one more step ahead; false at the context's end
      const slot = M._lw_wasm_model_decode_next(this.h, kind);
      if (slot === -2) return false;
      if (slot < 0) throw new LlamawebError('LW_ERR_GPU', M.UTF8ToString(M._lw_wasm_model_error(this.h)));
      q.push({ slot, read: M.lwGpu.lastRead });
      return true;
    };
    let room = true;
    try {
      for (;;) {
        while (room && q.length < depth) room = more();
        if (this.rowsStep > 0 && q.length && !M._lw_wasm_model_rows_check(this.h, next)) {
          await Promise.all(q.map((s) => s.read)); // (they write the ring)
          if (M._lw_wasm_model_rewind(this.h, q.length) !== 0) this.check();
          q.length = 0; // next is decoded from the host below, its row loaded first
        }
        yield next;
        if (!q.length) { next = await this.decode([next], out); continue; } // context full: decode() says so
        const s = q.shift();
        await s.read;
        if (M.lwGpu.error) throw new LlamawebError('LW_ERR_GPU', M.lwGpu.error);
        next = M.HEAP32[ring + s.slot];
      }
    } finally {
      // the steps after the last handed id: wait for their reads (they write the ring), then undo them
      if (q.length) {
        await Promise.all(q.map((s) => s.read));
        if (M._lw_wasm_model_rewind(this.h, q.length) !== 0) this.check();
      }
    }
  }

  get nPast() {
    return this.M._lw_wasm_model_n_past(this.h);
  }
  set nPast(n) {
    if (this.M._lw_wasm_model_set_n_past(this.h, n) !== 0) throw new Error('bad n_past ' + n);
  }

  // Plan facts and counters (see lw_wasm_model_info_json); rows: rowsStats().
  info() {
    const M = this.M;
    const p = M._malloc(2048);
    try {
      if (M._lw_wasm_model_info_json(this.h, p, 2048) < 0) throw new Error('info failed');
      return { ...JSON.parse(M.UTF8ToString(p)), rows: this.rowsStats() };
    } finally {
      M._free(p);
    }
  }

  // The token embedding row store: {asked, active, status, message, nRows, nSlots, rowBytes, lookups, hits,
  // misses, warmLoads, evictions, bytesRead, rewinds (chained steps undone: their row was not resident),
  // hitRate (hits / lookups, null before any), fallback (why the table is resident although rows were asked
  // for, else null)}.
  rowsStats() {
    const M = this.M;
    const p = M._malloc(1024);
    try {
      if (M._lw_wasm_model_rows_json(this.h, p, 1024) < 0) throw new Error('rowsStats failed');
      const r = JSON.parse(M.UTF8ToString(p));
      r.hitRate = r.lookups ? r.hits / r.lookups : null;
      r.fallback = r.asked && r.status !== 0 ? r.message : null;
      return r;
    } finally {
      M._free(p);
    }
  }

  // The kernel variants the plan uses per weight format ({matvec: {f32: 'wg64 rows4 ...'}, matmat: {...}}):
  // what tune overrides changed.
  variants() {
    const M = this.M;
    const p = M._malloc(4096);
    try {
      if (M._lw_wasm_model_variants_json(this.h, p, 4096) < 0) throw new Error('variants failed');
      return JSON.parse(M.UTF8ToString(p));
    } finally {
      M._free(p);
    }
  }

  free() {
    if (!this.h) return;
    this.M._lw_wasm_model_free(this.h);
    this.M._free(this.ids);
    this.M.lwGpu.removeSource(this.sourceId);
    this.h = 0;
  }
}

// The CPU engine inside the same wasm module (the reference in tests): the whole file in the heap.
export class CpuModel {
  static open(M, bytes, nCtx = 0, kvF32 = false) {
    const p = M._malloc(bytes.length);
    M.HEAPU8.set(bytes, p);
    const h = M._lw_wasm_cpu_open(p, bytes.length, nCtx, kvF32 ? 1 : 0); // owns p from here
    if (!h) throw new Error('out of memory');
    const err = M.UTF8ToString(M._lw_wasm_cpu_error(h));
    if (err) {
      M._lw_wasm_cpu_free(h);
      throw new Error(err);
    }
    return new CpuModel(M, h);
  }
  constructor(M, h) {
    this.M = M;
    this.h = h;
    this.ids = M._malloc(4 * 65536);
  }
  // Greedy next id after decoding ids.
  decode(ids) {
    const M = this.M;
    M.HEAP32.set(ids, this.ids >> 2);
    const id = M._lw_wasm_cpu_decode(this.h, this.ids, ids.length);
    if (id < 0) throw new Error(M.UTF8ToString(M._lw_wasm_cpu_error(this.h)));
    return id;
  }
  logits(nVocab) {
    const p = this.M._lw_wasm_cpu_logits(this.h) >> 2;
    return this.M.HEAPF32.slice(p, p + nVocab);
  }
  free() {
    this.M._lw_wasm_cpu_free(this.h);
    this.M._free(this.ids);
  }
}

// ---------------------------------------------------------------------------------------------------------
// The CPU engine of the browser package (web/lw-wasm-cpu.c): GpuModel's interface (tokenize, pieceBytes,
// isEog, setSampling, decode, nPast, info, free) over the CPU engine in the wasm heap
// ---------------------------------------------------------------------------------------------------------

// Lets the event loop run (a Stop click, an abort, a worker's 'stop' message) between synchronous CPU decodes:
// a resolved promise would only run microtasks. A MessageChannel round trip costs ~0.05 ms (setTimeout is
// clamped to 4 ms once nested; Node has setImmediate for it).
let yieldPort = null;
const yieldWaiters = [];
function yieldToEventLoop() {
  if (typeof setImmediate === 'function') return new Promise((r) => setImmediate(r));
  if (typeof MessageChannel === 'undefined') return new Promise((r) => setTimeout(r, 0));
  if (!yieldPort) {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => { const r = yieldWaiters.shift(); if (r) r(); };
    yieldPort = ch.port2;
  }
  return new Promise((r) => { yieldWaiters.push(r); yieldPort.postMessage(0); });
}

// Reads a byte source's ranges into the wasm heap in chunks of at most chunkBytes, maxInFlight reads at a
// time, each chunk retried with backoff; onBytes(n) after each chunk. ranges: [{off, dst, n}] (file offset,
// heap address, bytes). The heap is looked up after every await: it may have grown (a new buffer).
async function streamIntoHeap(M, source, ranges, { chunkBytes = 8 << 20, maxInFlight = 4, retries = 3, retryDelayMs = 50,
  onBytes, signal } = {}) {
  const chunks = [];
  for (const r of ranges.sort((a, b) => a.off - b.off)) {
    for (let k = 0; k < r.n; k += chunkBytes) chunks.push({ off: r.off + k, dst: r.dst + k, n: Math.min(chunkBytes, r.n - k) });
  }
  let next = 0, failure = null, retried = 0;
  const one = async (c) => {
    for (let attempt = 0; ; attempt++) {
      let why;
      try {
        const b = await source.read(c.off, c.n);
        if (b && b.length === c.n) {
          M.HEAPU8.set(b, c.dst);
          return;
        }
        why = `returned ${b ? b.length : 0} of ${c.n} bytes`;
      } catch (e) {
        why = e && e.message || String(e);
      }
      if (attempt >= retries) {
        throw new LlamawebError('NETWORK', `reading the model at ${c.off} (${c.n} bytes) failed after ${attempt + 1} tries: ${why}`);
      }
      retried++;
      await new Promise((r) => setTimeout(r, retryDelayMs * 2 ** attempt));
    }
  };
  const worker = async () => {
    while (!failure && next < chunks.length) {
      if (signal && signal.aborted) throw new LlamawebError('ABORTED', 'the model load was aborted');
      const c = chunks[next++];
      await one(c);
      if (onBytes) onBytes(c.n);
    }
  };
  const workers = Array.from({ length: Math.max(1, Math.min(maxInFlight, chunks.length)) }, () => worker().catch((e) => { failure = failure || e; }));
  await Promise.all(workers);
  if (failure) throw failure;
  return { chunks: chunks.length, retries: retried };
}

// The KV cache types the CPU engine takes (lw_context_params type_k/type_v; ggml's type numbers): f16, the
// default as llama.cpp's; f32; llama.cpp's quantized caches q8_0 and q4_0, 1/2 and 0.28 of f16's bytes (flash
// attention, head sizes multiples of 32).
export const KV_TYPES = Object.freeze({ f32: 0, f16: 1, q4_0: 2, q8_0: 8 });
// The type number of opts.kvType (or of kvF32: f32), -1 for the default; BAD_INPUT for an unknown name.
export function kvTypeId(opts) {
  if (opts.kvType === undefined || opts.kvType === null) return opts.kvF32 ? KV_TYPES.f32 : -1;
  const id = KV_TYPES[String(opts.kvType).toLowerCase()];
  if (id === undefined) throw new LlamawebError('BAD_INPUT', `kvType ${opts.kvType}: one of ${Object.keys(KV_TYPES).join(', ')}`);
  return id;
}

// The WebGPU engine's cache type number (kvTypeId; -1: the default f16): f16, f32, q8_0 or q4_0 (the quantized
// two in layouts of their own, 36 and 20 bytes per 32 elements: src/webgpu/kernels-attn.h; the values the CPU
// engine's caches hold). A type its kernels cannot read would be BAD_INPUT here (device 'auto' would then
// open the model on the CPU engine); every KV_TYPES entry has kernels today.
export function gpuKvType(opts) {
  const id = kvTypeId(opts);
  if (id !== -1 && id !== KV_TYPES.f16 && id !== KV_TYPES.f32 && id !== KV_TYPES.q8_0 && id !== KV_TYPES.q4_0)
    throw new LlamawebError('BAD_INPUT', `kvType ${opts.kvType}: the WebGPU engine keeps an f16, f32, q8_0 or q4_0 KV cache (others run on the CPU engine)`);
  return id;
}
// Whether the WebGPU engine's cache is f32 (kvType 'f32' or kvF32).
export function gpuKvF32(opts) {
  return gpuKvType(opts) === KV_TYPES.f32;
}

export class CpuEngine {
  // Opens the model of source ({size, read(offset, length) -> Promise<Uint8Array>, name?}) on the CPU engine
  // of module M: the header from a prefetched head of the file (grown when the header is longer), then every
  // tensor streamed from the source straight to its place in the heap. opts: nCtx (default: the model's
  // training context, at most 4096), nBatch, threads (default 1; a pthreads module can run more), kvType
  // ('f16' default, 'f32', 'q8_0', 'q4_0': kvTypeId) or kvF32,
  // headBytes (first head, default 256 KiB), onProgress(bytesRead, fileSize), chunkBytes (8 MiB),
  // maxInFlight (reads at a time, 4), retries (per chunk, 3), signal. Afterwards e.loadMs, e.loadStats,
  // e.headBytes, e.headTries. Failures throw a LlamawebError (public codes) and free what was made.
  static async open(M, source, opts = {}) {
    if (typeof M._lw_wasm_cpum_open !== 'function') {
      throw new LlamawebError('UNSUPPORTED_MODEL', 'this wasm build has no CPU engine (web/lw-wasm-cpu.c)');
    }
    if (!M.lwCpu) M.lwCpu = { sources: [null] }; // read by lw_js_cpu_read (web/lw-wasm-cpu.c)
    const t0 = performance.now();
    let read = 0;
    const progress = (n) => {
      read += n;
      if (opts.onProgress) opts.onProgress(Math.min(read, source.size), source.size);
    };
    let headBytes = Math.min(source.size, opts.headBytes || (256 << 10)), tries = 1;
    for (;;) {
      const head = await source.read(0, headBytes);
      if (!head || head.length !== headBytes) throw new LlamawebError('NETWORK', `reading the model's first ${headBytes} bytes failed`);
      progress(head.length);
      const pending = [];
      let miss = 0;
      const host = {
        // lw_js_cpu_read: serves the head now; records tensor reads past it (deferrable) for streamIntoHeap
        readInto(off, dst, n, deferrable) {
          if (off + n <= head.length) {
            M.HEAPU8.set(head.subarray(off, off + n), dst);
            return true;
          }
          if (deferrable) {
            pending.push({ off, dst, n });
            return true;
          }
          miss = Math.max(miss, off + n);
          return false;
        },
      };
      const id = M.lwCpu.sources.push(host) - 1;
      let h = 0;
      try {
        h = M._lw_wasm_cpum_open(id, source.size, opts.nCtx ?? 0, opts.nBatch ?? 0, opts.threads ?? 1, kvTypeId(opts));
        if (!h) throw new LlamawebError('NOT_ENOUGH_MEMORY', 'out of memory');
        const err = M.UTF8ToString(M._lw_wasm_cpum_error(h));
        if (err) {
          if (miss && head.length < source.size) { // the header goes on past the head: read more and try again
            M._lw_wasm_cpum_free(h);
            h = 0;
            headBytes = Math.min(source.size, Math.max(2 * head.length, miss + (miss >> 1)));
            tries++;
            read = 0;
            continue;
          }
          const e = statusError(M, M._lw_wasm_cpum_status(h), err, 'open');
          if (e.code === 'NOT_ENOUGH_MEMORY') e.message += ' (the CPU engine holds the weights in the wasm heap: 4 GiB at most, less where the browser refuses)';
          throw e;
        }
        // tensor bytes already in the head were copied while binding; the rest streams now
        const st = await streamIntoHeap(M, source, pending, { chunkBytes: opts.chunkBytes, maxInFlight: opts.maxInFlight,
          retries: opts.retries, onBytes: progress, signal: opts.signal });
        M._lw_wasm_cpum_loaded(h);
        const e = new CpuEngine(M, h);
        h = 0;
        e.loadMs = performance.now() - t0;
        const bytes = pending.reduce((a, r) => a + r.n, 0);
        e.loadStats = { ms: e.loadMs, bytes, chunks: st.chunks, peakInFlight: Math.min(opts.maxInFlight || 4, st.chunks),
          retries: st.retries, peakJsHeap: 0 };
        e.headBytes = head.length;
        e.headTries = tries;
        return e;
      } finally {
        M.lwCpu.sources[id] = null;
        if (h) M._lw_wasm_cpum_free(h);
      }
    }
  }

  constructor(M, h) {
    this.M = M;
    this.h = h;
    this.device = 'cpu';
    this.m = M._lw_wasm_cpum_model(h); // the lw_model (tokenizer, chat template)
    this.nVocab = JSON.parse(this.infoText()).n_vocab;
    this.ids = M._malloc(4 * 65536); // token ids passed to C
    this.idsCap = 65536;
    this.sampling = null; // JSON of the parameters in effect (null: none yet)
    this.grammar = null;  // a Grammar (web/lw-structured.mjs) choosing the tokens of decode(), or null
  }

  infoText() {
    const M = this.M, p = M._malloc(1024);
    try {
      if (M._lw_wasm_cpum_info_json(this.h, p, 1024) < 0) throw new Error('info failed');
      return M.UTF8ToString(p);
    } finally {
      M._free(p);
    }
  }

  // Model facts: arch, n_vocab, n_layer, n_embd, n_ctx, n_batch, threads (running) and threadsWanted,
  // weightBytes, contextBytes (KV cache + activations).
  info() {
    return JSON.parse(this.infoText());
  }

  // The lw_model under this engine (chat templates and sessions read it).
  lwModel() {
    return this.m;
  }

  tokenize(text, addSpecial = true) {
    // ids: at most 4 per byte + 2 (lw_tokenize's bound: an SPM space is U+2581, three byte tokens)
    const M = this.M, n = M.lengthBytesUTF8(text), p = M._malloc(n + 1), cap = 4 * n + 8, out = M._malloc(4 * cap);
    try {
      M.stringToUTF8(text, p, n + 1);
      const k = M._lw_wasm_text_tokenize(this.m, p, n, addSpecial ? 1 : 0, out, cap);
      if (k < 0) throw new LlamawebError('BAD_INPUT', 'tokenize failed (the model has no tokenizer this build reads)');
      return Array.from(M.HEAP32.subarray(out >> 2, (out >> 2) + k));
    } finally {
      M._free(p);
      M._free(out);
    }
  }

  pieceBytes(id) {
    const M = this.M, p = M._malloc(256);
    try {
      const n = M._lw_wasm_text_piece(this.m, id, p, 256);
      return n < 0 ? new Uint8Array(0) : M.HEAPU8.slice(p, p + n);
    } finally {
      M._free(p);
    }
  }

  isEog(id) {
    return this.M._lw_wasm_text_is_eog(this.m, id) !== 0;
  }

  // As GpuModel.setSampling (the CPU sampler; topK <= 0 is off, not capped); reseeds. Returns the top-k.
  setSampling(params = {}) {
    const p = { ...SAMPLING_DEFAULTS, ...params };
    const k = this.M._lw_wasm_cpum_set_sampling(this.h, p.temp, p.topK, p.topP, p.minP, Number(p.seed));
    if (k < 0) throw new LlamawebError('BAD_INPUT', this.M.UTF8ToString(this.M._lw_wasm_cpum_sampling_error(this.h)));
    this.sampling = JSON.stringify(p);
    if (this.grammar) this.grammar.follow(p); // its draws reseeded with the engine's
    return k;
  }

  // As GpuModel.decode: out 'argmax' | 'logits' | 'none' | 'sample' | sampling parameters. Runs synchronously
  // in the wasm module, then lets the event loop run once.
  async decode(ids, out = 'argmax') {
    const M = this.M;
    if (!this.h) throw new LlamawebError('BAD_INPUT', 'model was freed');
    if (ids.length > this.idsCap) throw new LlamawebError('BAD_INPUT', 'too many tokens in one call');
    if (out !== null && typeof out === 'object') {
      if (JSON.stringify({ ...SAMPLING_DEFAULTS, ...out }) !== this.sampling) this.setSampling(out);
      out = 'sample';
    }
    // a grammar (web/lw-structured.mjs, set while a constrained request runs) picks the token from the
    // decode's logits with the CPU sampler
    const gr = this.grammar && (out === 'argmax' || out === 'sample') ? this.grammar : null;
    const kind = gr ? 0 : out === 'logits' ? 2 : out === 'none' ? 0 : out === 'sample' ? 3 : 1;
    M.HEAP32.set(ids, this.ids >> 2);
    const st = M._lw_wasm_cpum_decode(this.h, this.ids, ids.length, kind);
    if (st !== 0) throw statusError(M, st, M.UTF8ToString(M._lw_wasm_cpum_decode_error(this.h)), 'decode');
    if (gr) {
      const id = gr.pick(this, out, M._lw_wasm_cpum_logits(this.h));
      await yieldToEventLoop();
      return id;
    }
    const id = M._lw_wasm_cpum_token(this.h);
    const logits = kind === 2 ? M.HEAPF32.slice(M._lw_wasm_cpum_logits(this.h) >> 2, (M._lw_wasm_cpum_logits(this.h) >> 2) + this.nVocab) : null;
    await yieldToEventLoop();
    if (kind === 2) return { id, logits };
    return kind === 0 ? null : id;
  }

  get nPast() {
    return this.M._lw_wasm_cpum_n_past(this.h);
  }
  set nPast(n) {
    if (this.M._lw_wasm_cpum_set_n_past(this.h, n) !== 0) throw new LlamawebError('BAD_INPUT', 'bad n_past ' + n);
  }

  free() {
    if (!this.h) return;
    this.M._lw_wasm_cpum_free(this.h);
    this.M._free(this.ids);
    this.h = 0;
  }
}
