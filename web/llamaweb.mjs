// llamaweb for web pages: the browser entry of the JS package. Loads the wasm module and, where one works, a
// WebGPU device; opens a GGUF model from a File/Blob (file picker, drag-and-drop), a URL (HTTP range requests)
// or OPFS, on WebGPU or on the CPU engine in the same module; generates text with streaming callbacks or
// through an OpenAI-shaped API.
//
//     import { Llamaweb } from './llamaweb.mjs';
//     const lw = await Llamaweb.loadInWorker();                // or load(): on this thread; device 'auto':
//                                                              // WebGPU, else (and on software adapters) CPU
//     const model = await lw.open(fileInput.files[0], { onProgress: (done, total) => ... });
//     const r = await model.generate('Once upon a time', { maxTokens: 64, onToken: (text) => out.append(text) });
//     console.log(r.text, r.tokensPerSecond, model.device);    // model.stop() ends a generation early
//     const chat = model.newChat({ system: 'Be brief.' });     // a conversation: the KV cache keeps earlier
//     await chat.send('Hello', { onToken });                   // turns, so each send() decodes only the new
//     const r2 = await chat.send('And then?');                 // part (r2.decodedTokens ids at r2.fromCell)
//     const c = await model.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], stream: true });
//     for await (const chunk of c) out.append(chunk.choices[0].delta.content ?? '');   // web/lw-openai.mjs
//     model.free();
//
// On WebGPU the weights never pass through JS memory as a whole nor through the wasm heap (docs: invariant 1
// of ARCHITECTURE.md): C parses only the GGUF header, served from a prefetched head of the file, and the glue
// (web/lw-gpu.js) streams each tensor's bytes from the source into its GPU buffer in chunks of
// lwGpu.chunkBytes (8 MiB). On the CPU engine (web/lw-wasm-cpu.c) they stream the same way into their place
// in the heap. The engines (GpuModel, CpuEngine) are shared with Node in web/lw-model.mjs; failures are
// LlamawebErrors with a public code.
//
// The wasm module (scripts/build-wasm.sh: llamaweb-wasm.js + llamaweb-wasm.wasm, and the pthreads build in
// mt/ for the CPU engine's threads on cross-origin isolated pages) is looked up in wasm/ next to this file
// unless Llamaweb.load({ wasmBase }) says where; node web/serve.mjs serves it there. load() runs the engine
// on the calling thread (a page, or a module worker: the classic loader script is then run as global code);
// loadInWorker() starts web/llamaweb-worker.mjs and talks to it with messages. Other options:
// load({device, threads}), generate({keepContext, sampling, stop, signal}), model.stream() (an async
// iterator); open(url) keeps the file in the OPFS model cache (web/lw-cache.mjs: listCached, deleteCached,
// cacheModel).
// Types: web/llamaweb.d.mts.
import { GpuModel, LlamawebError, bytesSource } from './lw-model.mjs';
import { modelSource, withHead } from './lw-sources.mjs';
import { abortError } from './lw-cache.mjs';

export { GpuModel, LlamawebError, bytesSource };
// byte sources (File/Blob, URL, OPFS, split GGUF) and the OPFS model cache: web/lw-sources.mjs, web/lw-cache.mjs
export { blobSource, urlSource, opfsSource, listOpfs, downloadToOpfs, splitSource, splitUrls } from './lw-sources.mjs';
export { cacheModel, listCached, deleteCached, clearCache, cacheAvailable } from './lw-cache.mjs';

import { CpuEngine, statusError, rowsEmbd } from './lw-model.mjs';
import { attachOpenAI, pushed } from './lw-openai.mjs';
import { Generation, REASONS, STOP_EOG, STOP_NONE, putStops, stopList } from './lw-gen.mjs';

export { CpuEngine };

// ---------------------------------------------------------------------------------------------------------
// WebGPU checks
// ---------------------------------------------------------------------------------------------------------

// Why this page cannot run WebGPU, or null when it looks possible (an adapter still has to be found).
export function webgpuMissingReason() {
  if (typeof globalThis.isSecureContext === 'boolean' && !globalThis.isSecureContext) {
    return 'WebGPU needs a secure context: open the page over https:// or from http://localhost / 127.0.0.1.';
  }
  if (typeof navigator === 'undefined' || !navigator.gpu) {
    return 'This browser does not expose WebGPU (navigator.gpu is missing). Use a current Chrome or Edge ' +
      '(113+), Safari 26+ or Firefox 141+; on Linux, Chromium needs --enable-unsafe-webgpu (or ' +
      'chrome://flags/#enable-unsafe-webgpu) and a Vulkan driver.';
  }
  return null;
}

// Whether an adapter is a CPU rasterizer posing as a GPU (SwiftShader, lavapipe / llvmpipe, WARP): the
// browser says so (GPUAdapterInfo.isFallbackAdapter) or its names do.
export function isSoftwareAdapter(info) {
  if (!info) return false;
  if (info.isFallbackAdapter === true) return true;
  const names = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ');
  return /swiftshader|lavapipe|llvmpipe|softpipe|microsoft basic render|\bwarp\b/i.test(names);
}

// device 'auto' with a software adapter: models whose file is at most this many bytes run on WebGPU, larger
// ones on the CPU engine. Measured in headless Chromium on its SwiftShader (2 cores, README "Choosing the
// device"): the CPU engine decodes stories260K (1.1 MiB) 20-90x faster and a 117 MiB Q4_0 ~100x faster, so
// there is no cross-over to keep: every model goes to the CPU engine (a page can set a size to keep tiny ones
// on the adapter: Llamaweb.load({softwareAdapterMaxBytes})).
export const SOFTWARE_ADAPTER_MAX_BYTES = 0;

// ---------------------------------------------------------------------------------------------------------
// The engine
// ---------------------------------------------------------------------------------------------------------

// Loads an Emscripten factory (a classic script defining globalThis[name]) once per script and page or
// worker. The single-thread and threaded builds both define createLlamaweb: each script's factory is kept
// by its URL and the global is left to the first one loaded.
const factories = new Map(); // script URL -> Promise<factory>
function loadScript(src, name = 'createLlamaweb') {
  if (!factories.has(src)) {
    const p = loadScriptOnce(src, name);
    factories.set(src, p);
    p.catch(() => factories.delete(src)); // a later call may try again (the build may appear)
  }
  return factories.get(src);
}

async function loadScriptOnce(src, name) {
  const prev = globalThis[name];
  const missing = (why) => new LlamawebError('UNSUPPORTED_MODEL', `could not load ${src}${why} (is the wasm module built? scripts/build-wasm.sh)`);
  const take = () => {
    const f = globalThis[name];
    if (typeof f !== 'function' || f === prev) throw new LlamawebError('UNSUPPORTED_MODEL', `${src} did not define ${name}`);
    if (prev !== undefined) globalThis[name] = prev;
    return f;
  };
  if (typeof document === 'undefined') return importFactory(src, name, missing);
  await new Promise((resolve, reject) => {
    const el = document.createElement('script');
    el.src = src;
    el.onload = resolve;
    el.onerror = () => reject(missing(''));
    document.head.appendChild(el);
  });
  return take();
}

// A module worker has neither <script> nor importScripts, and a strict Content-Security-Policy (no
// 'unsafe-eval') refuses eval: the classic script is imported as a module instead, whose UMD tail stores the
// factory on the global `exports` object it finds (`exports[name] = ...`); that object is ours for the
// duration, so loads are one at a time. Needs the script served as JavaScript (module MIME check).
let importing = Promise.resolve();
function importFactory(src, name, missing) {
  const run = importing.then(async () => {
    const had = Object.prototype.hasOwnProperty.call(globalThis, 'exports'), prev = globalThis.exports, sink = {};
    globalThis.exports = sink;
    try {
      await import(src);
    } catch (e) {
      throw missing(`: ${e && e.message || e}`);
    } finally {
      if (had) globalThis.exports = prev;
      else delete globalThis.exports;
    }
    if (typeof sink[name] !== 'function') throw new LlamawebError('UNSUPPORTED_MODEL', `${src} did not define ${name}`);
    return sink[name];
  });
  importing = run.catch(() => {});
  return run;
}

// The folder of the wasm builds, ending in '/'.
function wasmDir(opts) {
  const base = String(opts.wasmBase ? new URL(opts.wasmBase, globalThis.location.href) : new URL('wasm/', import.meta.url));
  return base.endsWith('/') ? base : base + '/';
}

// An instance of the wasm build in folder dir: llamaweb-wasm.js (WebGPU glue and the CPU engine; in wasm/
// one thread, in wasm/mt/ pthreads, whose workers load the same script: mainScriptUrlOrBlob).
async function instantiate(dir, opts, extra = {}) {
  const factory = await loadScript(dir + 'llamaweb-wasm.js');
  return factory({
    locateFile: (p) => dir + p,
    mainScriptUrlOrBlob: dir + 'llamaweb-wasm.js',
    print: opts.print || ((s) => console.log(s)),
    printErr: opts.printErr || ((s) => console.warn(s)),
    ...extra,
  });
}

// Threads of the CPU engine unless told: where the threaded build can run (cross-origin isolated), half the
// processors (hardwareConcurrency counts SMT siblings, which add no memory bandwidth to a decode step), but
// 2 wherever there are 2, and at most 4; else 1. On 2 cores a 1B Q4_0 decoded 1.9x faster with 2 threads
// than with 1 in headless Chromium (bench/wasm-cpu-compare.mjs); with other work on both cores 2 threads
// lost ~10 % to 1: the barrier's waiters sleep (a futex) instead of spinning.
function defaultThreads() {
  if (!globalThis.crossOriginIsolated) return 1;
  const n = globalThis.navigator && navigator.hardwareConcurrency || 1;
  return n < 2 ? 1 : Math.min(4, Math.max(2, Math.floor(n / 2)));
}

const DEVICES = ['auto', 'webgpu', 'cpu'];

function checkDevice(d) {
  if (d !== undefined && !DEVICES.includes(d)) throw new LlamawebError('BAD_INPUT', `device must be one of ${DEVICES.join(', ')} (got ${JSON.stringify(d)})`);
  return d;
}

// open()'s progress: onProgress(done, total, phase, state) for each event of every phase ('download':
// bytes of the file in the cache entry, 'cache-write': bytes committed to OPFS (once a part), 'verify',
// 'upload': bytes read by the engine (from the network stream, the cache or the File), 'ready': once, at the
// end), with state {phase, download, cacheWrite, verify, upload: {done, total} or null}: a streamed
// download and the upload advance together.
function loadProgress(onProgress) {
  const state = { phase: null, download: null, cacheWrite: null, verify: null, upload: null };
  const key = { download: 'download', 'cache-write': 'cacheWrite', verify: 'verify', upload: 'upload' };
  return {
    state,
    report: (done, total, phase) => {
      state.phase = phase;
      if (key[phase]) state[key[phase]] = { done, total };
      if (onProgress) onProgress(done, total, phase, { ...state });
    },
  };
}

export class Llamaweb {
  // The same engine in a dedicated module Worker (web/llamaweb-worker.mjs): an object with the interface of
  // Llamaweb (adapter, canSample, open) whose models generate off the page's main thread (Model's interface,
  // its methods promises; open() takes a File/Blob, a URL or {opfs: name}). opts as load's, and workerUrl
  // (where llamaweb-worker.mjs is served; default: next to this file).
  static async loadInWorker(opts = {}) {
    const device = checkDevice(opts.device) ?? 'auto';
    const why = webgpuMissingReason();
    if (why && device === 'webgpu') throw new LlamawebError('GPU_UNAVAILABLE', why);
    const worker = new Worker(opts.workerUrl || new URL('./llamaweb-worker.mjs', import.meta.url), { type: 'module' });
    const rpc = new WorkerRpc(worker);
    // URLs are resolved here: the worker's base is its own script
    const wasmBase = opts.wasmBase ? String(new URL(opts.wasmBase, globalThis.location.href)) : undefined;
    try {
      const r = await rpc.call({ op: 'load', opts: { wasmBase, adapterOptions: opts.adapterOptions, device,
        threads: opts.threads, softwareAdapterMaxBytes: opts.softwareAdapterMaxBytes, gpuMissing: why } });
      return new WorkerLlamaweb(rpc, r);
    } catch (e) {
      worker.terminate();
      throw e;
    }
  }

  // The wasm module and, where the device choice wants one, a WebGPU device. opts: device ('auto' (default):
  // WebGPU where it works, else the CPU engine, which also takes the models above softwareAdapterMaxBytes
  // when the adapter is a software one; 'webgpu': rejects with GPU_UNAVAILABLE without it; 'cpu'), wasmBase
  // (URL of the folder holding the wasm builds), adapterOptions (for requestAdapter), threads (CPU engine;
  // default 1), softwareAdapterMaxBytes, print/printErr (module output).
  static async load(opts = {}) {
    const device = checkDevice(opts.device) ?? 'auto';
    const why = device === 'cpu' ? null : opts.gpuMissing ?? webgpuMissingReason();
    if (why && device === 'webgpu') throw new LlamawebError('GPU_UNAVAILABLE', why);
    const M = await instantiate(wasmDir(opts), opts);
    let gpu = null, gpuError = device === 'cpu' ? 'device: cpu' : why;
    if (!gpuError) {
      try {
        gpu = await M.lwGpu.requestDevice(navigator.gpu, opts.adapterOptions);
        M.lwGpu.init(gpu);
      } catch (e) {
        gpuError = 'WebGPU is exposed but no adapter/device could be created (' + e.message + '): the GPU ' +
          'may be blocklisted or WebGPU disabled for it (see chrome://gpu).';
        if (device === 'webgpu') throw new LlamawebError('GPU_UNAVAILABLE', gpuError, { cause: e });
      }
    }
    return new Llamaweb(M, gpu, { ...opts, device, gpuError, wasmDir: wasmDir(opts) });
  }

  // M: the wasm module; device: its WebGPU device (lwGpu.init done), or null for the CPU engine alone.
  // opts: device preference, threads, softwareAdapterMaxBytes, gpuError (why there is no device).
  constructor(M, device, opts = {}) {
    this.Module = M;
    this.device = device; // the GPUDevice, or null
    // made directly with a device (tests, Node): that device unless told otherwise; load() defaults to 'auto'
    this.preference = checkDevice(opts.device) ?? (device ? 'webgpu' : 'cpu');
    this.gpuError = device ? null : opts.gpuError || 'no WebGPU device';
    this.threads = opts.threads ?? defaultThreads();
    this.wasmDir = opts.wasmDir || null; // where the threaded build is looked up (wasmDir + 'mt/'); null: none
    this.print = { print: opts.print, printErr: opts.printErr };
    this.mt_ = null; // Promise of {M, build, threads, error}: the CPU engine's module, made once
    this.softwareAdapterMaxBytes = opts.softwareAdapterMaxBytes ?? SOFTWARE_ADAPTER_MAX_BYTES;
    this.adapter = null;
    if (device) {
      const a = M.lwGpu.adapterInfo || {};
      // what the demo shows and the kernels pick their variants from
      this.adapter = {
        vendor: a.vendor || '', architecture: a.architecture || '', device: a.device || '', description: a.description || '',
        f16: device.features.has('shader-f16'), subgroups: device.features.has('subgroups'),
        subgroupMinSize: a.subgroupMinSize, subgroupMaxSize: a.subgroupMaxSize,
        maxBufferSize: device.limits.maxBufferSize, maxStorageBufferBindingSize: device.limits.maxStorageBufferBindingSize,
        software: isSoftwareAdapter(a),
      };
    }
    // whether generate({sampling}) can draw tokens (the CPU sampler always can; the GPU where the build has it)
    this.canSample = !device || (typeof GpuModel.prototype.setSampling === 'function' && typeof M._lw_wasm_model_set_sampling === 'function');
    this.cpu = typeof M._lw_wasm_cpum_open === 'function'; // the module has the CPU engine
  }

  // Memory now: the wasm heap (small on the GPU path: weights live in GPU buffers; the weights themselves
  // on the CPU engine) and, where the browser tells (Chrome's performance.memory), the JS heap; bytes.
  memory() {
    return { wasmHeap: this.Module.HEAPU8.length, jsHeap: globalThis.performance && performance.memory ? performance.memory.usedJSHeapSize : null };
  }

  // Which engine opens a file of `size` bytes: 'webgpu' or 'cpu' (opts.device overrides the preference).
  pick(size, opts = {}) {
    const pref = checkDevice(opts.device) ?? this.preference;
    if (pref === 'cpu') return 'cpu';
    if (pref === 'webgpu') {
      if (!this.device) throw new LlamawebError('GPU_UNAVAILABLE', this.gpuError);
      return 'webgpu';
    }
    if (!this.device) return 'cpu';
    return this.adapter.software && size > this.softwareAdapterMaxBytes && this.cpu ? 'cpu' : 'webgpu';
  }

  // Opens a model: what = File/Blob, URL (string or URL), {opfs: name}, a byte source {size, read}, or an
  // array of them (a split GGUF's parts; the URL of any part brings every part). URLs go through the OPFS
  // model cache where the browser has OPFS (web/lw-cache.mjs; opts cache: false reads by range requests
  // instead; sha256, headers, revalidate, partBytes, parallel, retryDelayMs as cacheModel's); signal (an
  // AbortSignal) stops the download and the load (ABORTED).
  // opts: device (this open's engine: 'auto' | 'webgpu' | 'cpu'), nCtx (KV cells; default 2048), nBatch,
  // kvType ('f16' default, 'f32', llama.cpp's quantized 'q8_0' (~half of f16's bytes; on WebGPU 36 bytes per
  // 32 elements) and 'q4_0' (0.28 of f16's; on WebGPU 20 bytes per 32 elements, 0.31); quantized caches need
  // head sizes of multiples of 32, on both engines) or kvF32,
  // headBytes (first header prefetch, default 256 KiB), onProgress(done, total, phase: 'download' |
  // 'verify' | 'upload'), maxInFlight (chunks read and not yet in place, at most) and retries (per chunk read, with
  // backoff); verifyUpload (WebGPU: every weight byte read back from the GPU and compared with the file,
  // model.uploadCheck); on WebGPU f16/subgroups (0/1; default as the device offers) and tune (kernel overrides, as node
  // web/tune.mjs prints them), rows ({embeddings: N}: only N token embedding rows on the GPU, the row store;
  // model.rowsStats(), model.rowsFallback where it cannot serve); on the CPU threads. With device 'auto', a model WebGPU fails to open (a plan
  // the adapter's limits refuse, a device error) opens on the CPU engine. Failures throw a LlamawebError
  // (codes NETWORK, UNSUPPORTED_MODEL, NOT_ENOUGH_MEMORY, GPU_UNAVAILABLE, BAD_INPUT) and free what was made.
  async open(what, opts = {}) {
    const t0 = performance.now();
    const url = typeof what === 'string' || what instanceof URL || (Array.isArray(what) && what.some((w) => typeof w === 'string' || w instanceof URL));
    const P = loadProgress(opts.onProgress);
    opts = { ...opts, onProgress: P.report };
    const src = await modelSource(what, opts).catch((e) => { throw LlamawebError.from(e, url ? 'NETWORK' : 'BAD_INPUT'); });
    const dl = src.download; // a download streaming into the engine and the cache (lw-cache.mjs cacheStream)
    let model;
    try {
      model = await this.openOn(src, opts, t0);
    } catch (e) {
      if (!dl) throw e;
      // the download's own failure explains a failed read better than the engine's "read failed"
      const why = dl.error;
      dl.stop(e);
      await dl.done.catch(() => {});
      throw why && why.code !== 'ABORTED' ? why : e;
    }
    if (dl) {
      dl.release(); // the engine has its bytes: nothing more is kept for it
      try {
        await dl.done; // the rest of the file into the cache, checked, marked complete
      } catch (e) {
        model.free();
        throw LlamawebError.from(e, 'NETWORK');
      }
      model.loadMs = performance.now() - t0;
    }
    // where the bytes came from: network (streamed into the cache as they arrived), memory (served from what
    // arrived), cache (read back from OPFS), peakHeld (bytes held for the engine, at most), waits, retries
    model.download = dl ? dl.stats() : null;
    P.report(src.size, src.size, 'ready');
    return model;
  }

  // open() on the engine pick() chooses, falling back from WebGPU to the CPU engine with device 'auto'.
  async openOn(src, opts, t0) {
    const engine = this.pick(src.size, opts);
    if (engine === 'cpu') return this.openCpu(src, opts, t0);
    try {
      return await this.openGpu(src, opts, t0);
    } catch (e) {
      const err = LlamawebError.from(e, 'UNSUPPORTED_MODEL');
      const auto = (checkDevice(opts.device) ?? this.preference) === 'auto';
      if (!auto || !this.cpu || err.code === 'NETWORK' || err.code === 'ABORTED') throw err;
      try {
        return await this.openCpu(src, opts, t0, err.message);
      } catch (e2) {
        const err2 = LlamawebError.from(e2, 'UNSUPPORTED_MODEL');
        err2.message += ` (WebGPU failed first: ${err.message})`;
        throw err2;
      }
    }
  }

  // The module that runs CPU models with `threads` threads: the threaded build (wasm/mt/, its pool of
  // threads - 1 workers started once, at the first call) where the page is cross-origin isolated and more
  // than one thread is wanted, else this.Module; when the threaded build cannot start (not built, not
  // served, no SharedArrayBuffer, the browser refused the memory or the workers: iOS runs out of memory
  // there) also this.Module, with the reason. Resolves to {M, build: 'threads' | 'single', threads, error}.
  cpuModule(threads) {
    if (threads <= 1) return Promise.resolve({ M: this.Module, build: 'single', threads: 1, error: null });
    if (!globalThis.crossOriginIsolated || !this.wasmDir) {
      const error = !this.wasmDir ? 'no threaded build given' : 'the page is not cross-origin isolated (COOP/COEP headers): one thread';
      return Promise.resolve({ M: this.Module, build: 'single', threads: 1, error });
    }
    if (!this.mt_) {
      const pool = threads - 1;
      this.mt_ = instantiate(this.wasmDir + 'mt/', this.print, { lwPoolSize: pool })
        .then((M) => ({ M, build: 'threads', threads: pool + 1, error: null }),
          (e) => ({ M: this.Module, build: 'single', threads: 1, error: 'the threaded build did not start: ' + (e && e.message || e) }));
    }
    return this.mt_;
  }

  // The CPU engine (web/lw-model.mjs CpuEngine): the weights in the wasm heap.
  async openCpu(src, opts, t0, gpuFailure = null) {
    if (!this.cpu) throw new LlamawebError('UNSUPPORTED_MODEL', 'this wasm build has no CPU engine (web/lw-wasm-cpu.c)');
    const want = Math.max(1, Math.floor(opts.threads ?? this.threads));
    const mod = await this.cpuModule(want);
    const e = await CpuEngine.open(mod.M, src, { nCtx: opts.nCtx ?? 2048, nBatch: opts.nBatch, threads: Math.min(want, mod.threads),
      kvType: opts.kvType, kvF32: opts.kvF32, headBytes: opts.headBytes, onProgress: opts.onProgress && ((d, n) => opts.onProgress(d, n, 'upload')), maxInFlight: opts.maxInFlight,
      retries: opts.retries, signal: opts.signal });
    const model = new Model(e, src, performance.now() - t0);
    model.loadStats = e.loadStats;
    model.headBytes = e.headBytes;
    model.headTries = e.headTries;
    model.gpuFailure = gpuFailure; // device 'auto': why WebGPU did not take it
    model.build = mod.build;       // 'threads' (wasm/mt/) or 'single'
    model.threadsError = mod.error; // why the single-thread build runs it, when more threads were asked for
    rowsEmbd(opts); // (a bad rows option is refused on either engine)
    if (opts.rows && opts.rows.embeddings > 0) // said once, here and in rowsStats(): the table is resident
      model.rowsFallback = 'row store not used, token_embd resident: the wasm CPU engine keeps the whole table (WebGPU only so far)';
    return model;
  }

  // The GPU model (web/lw-model.mjs GpuModel): C parses the header from a prefetched head (grown and tried
  // again when the header is longer), the glue streams the weights into GPU buffers.
  async openGpu(src, opts, t0) {
    let readBytes = 0;
    const counted = {
      size: src.size, name: src.name,
      read: async (off, len) => {
        const b = await src.read(off, len);
        readBytes += b.length;
        if (opts.onProgress) opts.onProgress(Math.min(readBytes, src.size), src.size, 'upload');
        return b;
      },
    };
    let headBytes = opts.headBytes || (256 << 10);
    let tries = 1;
    for (;;) {
      const s = await withHead(counted, headBytes);
      const ctx0 = this.Module.lwGpu.contexts; // the HAL contexts this open makes own the model's buffers
      try {
        const g = await GpuModel.open(this.Module, s, { nCtx: opts.nCtx ?? 2048, nBatch: opts.nBatch, f16: opts.f16,
          subgroups: opts.subgroups, kvType: opts.kvType, kvF32: opts.kvF32, tune: opts.tune, maxInFlight: opts.maxInFlight, retries: opts.retries,
          verifyUpload: opts.verifyUpload, rows: opts.rows });
        const model = new Model(g, src, performance.now() - t0);
        model.rowsFallback = g.rowsFallback; // rows asked for but the table is resident: why (null otherwise)
        model.uploadCheck = g.uploadCheck || null; // verifyUpload: {writes, bytes, bytesPast4GiB, mismatches, first}
        model.loadStats = g.loadStats; // {ms, bytes, chunks, peakInFlight, retries, peakJsHeap} of the upload
        model.headBytes = s.head.length; // header bytes prefetched (tests: never the whole file of a big model)
        model.headTries = tries;
        model.gpuContexts = Array.from({ length: this.Module.lwGpu.contexts - ctx0 }, (_, i) => ctx0 + 1 + i);
        return model;
      } catch (e) {
        if (opts.signal && opts.signal.aborted) throw abortError(opts.signal); // the source's reads stopped
        if (!s.miss || s.head.length >= src.size) {
          // the glue's first asynchronous GPU error is sticky (web/lw-gpu.js): later models would fail too
          if (this.Module.lwGpu.error) e.message += ' (the WebGPU device reported an error: reload the page to start over)';
          throw e;
        }
        // the header goes on past the head: fetch more (it is read front to back: 1.5x the furthest read)
        headBytes = Math.min(src.size, Math.max(2 * s.head.length, s.miss + (s.miss >> 1)));
        tries++;
        readBytes = 0; // progress counts this attempt's reads
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// The page side of the engine in a Worker (Llamaweb.loadInWorker)
// ---------------------------------------------------------------------------------------------------------

// Requests to the worker and their answers; events (tokens, progress) go to the request's listener.
class WorkerRpc {
  constructor(worker) {
    this.worker = worker;
    this.next = 1;
    this.calls = new Map(); // id -> {resolve, reject, onEvent}
    worker.onmessage = (ev) => {
      const m = ev.data, c = this.calls.get(m.id);
      if (!c) return;
      if (m.ok === undefined) { if (c.onEvent) c.onEvent(m); return; }
      this.calls.delete(m.id);
      if (m.ok) c.resolve(m.value);
      else c.reject(m.code ? new LlamawebError(m.code, m.error, { status: m.status, statusText: m.statusText }) : new Error(m.error));
    };
    worker.onerror = (ev) => { // the worker script itself failed (not served, syntax, ...)
      ev.preventDefault && ev.preventDefault();
      const e = new LlamawebError('UNSUPPORTED_MODEL', 'llamaweb worker failed: ' + (ev.message || 'could not start web/llamaweb-worker.mjs'));
      for (const c of this.calls.values()) c.reject(e);
      this.calls.clear();
    };
  }
  call(msg, onEvent) {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.calls.set(id, { resolve, reject, onEvent });
      this.worker.postMessage({ ...msg, id });
    });
  }
}

// A call whose AbortSignal (opts.signal) stops it in the worker: one already aborted rejects at once with
// ABORTED and nothing is sent; the listener goes when the call ends.
function withSignal(signal, stop, call) {
  if (!signal) return call();
  if (signal.aborted) return Promise.reject(new LlamawebError('ABORTED', 'the signal was already aborted'));
  signal.addEventListener('abort', stop, { once: true });
  return call().finally(() => signal.removeEventListener('abort', stop));
}

class WorkerLlamaweb {
  constructor(rpc, r) {
    this.rpc = rpc;
    this.adapter = r.adapter;
    this.canSample = r.canSample;
    this.preference = r.preference;
    this.gpuError = r.gpuError;
    this.threads = r.threads;
    this.inWorker = true;
  }
  async open(what, opts = {}) {
    const { onProgress, signal, ...rest } = opts;
    // what the worker can be sent: URLs (resolved here: the worker's base is its script), Files/Blobs (cloned
    // as references to the same bytes), {opfs: name}; an array of them (a split GGUF's parts)
    const sendable = (w) => {
      if (typeof w === 'string' || w instanceof URL) return String(new URL(w, globalThis.location.href));
      if (w instanceof Blob || (w && typeof w.opfs === 'string')) return w;
      throw new LlamawebError('BAD_INPUT', 'open() in a worker takes a File/Blob, a URL, {opfs: name} or an array of them ' +
        '(a byte source object cannot be sent)');
    };
    what = Array.isArray(what) ? what.map(sendable) : sendable(what);
    checkDevice(opts.device);
    const key = 'open-' + Math.random().toString(36).slice(2); // names this open for its signal
    const d = await withSignal(signal, () => this.rpc.call({ op: 'abortOpen', key }).catch(() => {}),
      () => this.rpc.call({ op: 'open', what, key, opts: rest }, (ev) => { if (ev.progress && onProgress) onProgress(...ev.progress); }));
    return new WorkerModel(this.rpc, d);
  }
  // The worker's Llamaweb.memory(), as a promise.
  memory() {
    return this.rpc.call({ op: 'memory' });
  }
  // Ends the worker (and every model in it).
  terminate() {
    this.rpc.worker.terminate();
  }
}

class WorkerModel {
  constructor(rpc, d) {
    this.rpc = rpc;
    this.handle = d.handle;
    this.name = d.name;
    this.device = d.device;
    this.info = d.info;
    this.loadMs = d.loadMs;
    this.loadStats = d.loadStats;
    this.uploadCheck = d.uploadCheck;
    this.headBytes = d.headBytes;
    this.headTries = d.headTries;
    this.gpuFailure = d.gpuFailure;
    this.build = d.build;
    this.threadsError = d.threadsError;
    this.chatTemplate = d.chatTemplate;
    this.chatError = d.chatError;
    this.download = d.download;
    attachOpenAI(this);
  }
  // The worker's model.memory(), as a promise.
  memory() {
    return this.rpc.call({ op: 'modelMemory', handle: this.handle });
  }
  generate(prompt, opts = {}, op = 'generate') {
    const { onToken, signal, ...rest } = opts;
    return withSignal(signal, () => this.stop(), () => this.rpc.call({ op, handle: this.handle, prompt, opts: rest },
      (ev) => { if (ev.token !== undefined && onToken) onToken(ev.token, ev.tokenId); }));
  }
  chat(messages, opts = {}) {
    return this.generate(messages, opts, 'chat');
  }
  // Model.newChat in the worker (a WorkerChat: Chat's interface, its methods promises).
  newChat(opts = {}) {
    return new WorkerChat(this, opts);
  }
  // Model.renderChat, tokenize, tokenizeSpecial and detokenize in the worker, as promises.
  renderChat(messages, addGenerationPrompt = true) {
    return this.rpc.call({ op: 'render', handle: this.handle, messages, addGenerationPrompt });
  }
  tokenize(text, addSpecial = true) {
    return this.rpc.call({ op: 'tokenize', handle: this.handle, text: String(text), addSpecial });
  }
  tokenizeSpecial(text, addSpecial = false) {
    return this.rpc.call({ op: 'tokenize', handle: this.handle, text: String(text), addSpecial, special: true });
  }
  detokenize(ids) {
    return this.rpc.call({ op: 'detokenize', handle: this.handle, ids: Array.from(ids) });
  }
  stop() {
    this.rpc.call({ op: 'stop', handle: this.handle }).catch(() => {});
  }
  free() {
    this.rpc.call({ op: 'free', handle: this.handle }).catch(() => {});
  }
}

// ---------------------------------------------------------------------------------------------------------
// Generation shared by Model.generate and Chat.send
// ---------------------------------------------------------------------------------------------------------

// What an engine's decode takes for a generation: 'argmax' (greedy) or the sampling parameters, after which
// the generator is seeded afresh (the same seed, the same text).
function samplingOut(g, sampling) {
  if (!sampling || !(Number(sampling.temp) > 0)) return 'argmax';
  if (typeof g.setSampling !== 'function' || (g instanceof GpuModel && typeof g.M._lw_wasm_model_set_sampling !== 'function')) {
    throw new LlamawebError('BAD_INPUT', 'this build cannot sample on the GPU (no setSampling): use temperature 0');
  }
  g.setSampling(sampling); // reseeds
  return { ...sampling };
}

const abortedBefore = () => new LlamawebError('ABORTED', 'the signal was already aborted');

// Where a decode of ids (from cell 0) may start when the KV cache holds `cached` (trusted only when its
// length is the engine's nPast): after the longest common prefix, leaving at least two ids to decode so the
// result is a fresh decode's (a one-token step runs the mat-vec kernels, whose sums differ from the prompt
// GEMMs' in the last bits; steps of two or more tokens give each row the same bits).
function reusableCells(engine, cached, ids) {
  if (!cached || cached.length !== engine.nPast) return 0;
  let n = 0;
  while (n < ids.length && n < cached.length && ids[n] === cached[n]) n++;
  return Math.max(0, Math.min(n, ids.length - 2));
}

// The lw_model of an engine (chat templates and sessions read it).
function lwModelOf(engine) {
  return typeof engine.lwModel === 'function' ? engine.lwModel() : engine.M._lw_wasm_model_model(engine.h);
}

// A model ready to generate, on WebGPU (GpuModel) or the CPU engine (CpuEngine). One generation at a time.
export class Model {
  constructor(engine, source, loadMs) {
    this.engine = engine;
    this.device = engine instanceof GpuModel ? 'webgpu' : 'cpu';
    this.source = source;
    this.name = source && source.name || 'model';
    this.loadMs = loadMs;        // open + plan + weight upload, ms
    this.info = engine.info();   // arch, n_layer, n_vocab, n_ctx, weightBytes, ...
    this.rowsFallback = null;    // opts.rows asked for, the store not used: why (said once, at open)
    this.stopping = false;       // set by stop(), read between tokens
    this.busy = false;           // a generation is running
    this.freed = false;          // free() was called (the engine goes once no generation uses it)
    this.pending = -1;           // the last generated token, not yet in the KV cache (-1: none)
    this.chats = new Set();      // conversations (newChat) over this model, freed with it
    this.cacheOwner = null;      // the Chat whose conversation the KV cache holds (null: none / generate's)
    this.cached = [];            // the ids in the engine's KV cache, cell by cell (trusted while its length
                                 // is the engine's nPast; null: unknown)
    // the chat template of the GGUF header (web/lw-wasm-chat.c), parsed once
    const M = engine.M;
    this.chat_ = 0;
    this.chatTemplate = false;   // chat() can render conversations
    this.chatError = 'this build has no chat templates';
    if (typeof M._lw_wasm_chat_new === 'function') {
      this.chat_ = M._lw_wasm_chat_new(lwModelOf(engine));
      this.chatError = this.chat_ ? M.UTF8ToString(M._lw_wasm_chat_error(this.chat_)) : 'out of memory';
      this.chatTemplate = !!this.chat_ && !this.chatError;
    }
    attachOpenAI(this);
  }

  // The token embedding row store (open's rows: {embeddings: N}): WebGPU's counters (GpuModel.rowsStats: hits,
  // misses, bytesRead, rewinds, hitRate, ...), fallback: why the table is resident although rows were asked
  // for (null otherwise; the CPU engine always keeps it).
  rowsStats() {
    const r = typeof this.engine.rowsStats === 'function' ? this.engine.rowsStats() : { asked: !!this.rowsFallback, active: false };
    return { ...r, fallback: this.rowsFallback };
  }

  // What this model holds now, bytes: gpu (WebGPU) {weights, kv, activations (activations and scratch),
  // params (parameters, tokens, tables, results), total, buffers: its live GPU buffers, summed by label from
  // the glue's table; a software adapter keeps them in CPU memory}, cpu (CPU engine) {weights, context (KV
  // cache and work buffers)} as the engine's info tells; wasmHeap (the module's memory: wasm memory only grows, so this is also its
  // high-water), jsHeap (performance.memory where the browser has it, else null), load (the weight upload:
  // ms, chunks and JS heap at their peak) and download (open(url): bytes held for the engine at most,
  // network / memory / cache bytes).
  memory() {
    const M = this.engine.M, S = this.loadStats || {};
    const out = { device: this.device, wasmHeap: M.HEAPU8.length,
      jsHeap: globalThis.performance && performance.memory ? performance.memory.usedJSHeapSize : null,
      gpu: null, cpu: null,
      load: { ms: S.ms ?? this.loadMs, bytes: S.bytes ?? null, peakInFlight: S.peakInFlight ?? null, peakJsHeap: S.peakJsHeap ?? null },
      download: this.download || null };
    if (this.device === 'webgpu') {
      const g = { weights: 0, kv: 0, activations: 0, params: 0, total: 0, buffers: 0 };
      const ctxs = new Set(this.gpuContexts || []);
      for (const r of M.lwGpu.objects) {
        if (!r || r.kind !== 'buffer' || !ctxs.has(r.ctx)) continue;
        const l = r.obj.label || '';
        const k = /^weights/.test(l) ? 'weights' : /^[KV] cache/.test(l) ? 'kv' : /^activation|scratch$/.test(l) ? 'activations' : 'params';
        g[k] += r.size;
        g.total += r.size;
        g.buffers++;
      }
      out.gpu = g;
    } else {
      out.cpu = { weights: this.info.weightBytes ?? null, context: this.info.contextBytes ?? null };
    }
    return out;
  }

  // The engine under the model by its former name (GpuModel or CpuEngine).
  get gpu() {
    return this.engine;
  }

  tokenize(text, addSpecial = true) {
    return this.engine.tokenize(text, addSpecial);
  }

  // Token ids of text with control-token texts (<|user|>, <s>, ...) as their ids, as a rendered chat
  // prompt needs; addSpecial off by default (templates write BOS themselves).
  tokenizeSpecial(text, addSpecial = false) {
    const M = this.engine.M;
    if (typeof M._lw_wasm_tokenize_special !== 'function') throw new LlamawebError('BAD_INPUT', this.chatError);
    const n = M.lengthBytesUTF8(text);
    const p = M._malloc(n + 1);
    let cap = n + 8, out = 0;
    try {
      M.stringToUTF8(text, p, n + 1);
      for (;;) {
        out = M._malloc(4 * cap);
        const k = M._lw_wasm_tokenize_special(lwModelOf(this.engine), p, n, addSpecial ? 1 : 0, out, cap);
        if (k < 0) throw new LlamawebError('BAD_INPUT', 'tokenize failed');
        if (k <= cap) return Array.from(M.HEAP32.subarray(out >> 2, (out >> 2) + k));
        M._free(out);
        out = 0;
        cap = k;
      }
    } finally {
      M._free(p);
      if (out) M._free(out);
    }
  }

  // The prompt text of a conversation ([{role, content}], roles as the template knows them: system, user,
  // assistant, ...) by the model's chat template, ending with the assistant's header unless
  // addGenerationPrompt is false. Throws when the model has no template (chatTemplate false).
  renderChat(messages, addGenerationPrompt = true) {
    if (!this.chatTemplate) throw new LlamawebError('BAD_INPUT', this.chatError);
    const M = this.engine.M;
    const n = messages.length;
    const strs = [];
    const put = (v) => {
      if (v === null || v === undefined) return 0;
      const t = String(v), k = M.lengthBytesUTF8(t) + 1, q = M._malloc(k);
      M.stringToUTF8(t, q, k);
      strs.push(q);
      return q;
    };
    const roles = M._malloc(4 * n + 4), contents = M._malloc(4 * n + 4), len = M._malloc(4);
    try {
      for (let i = 0; i < n; i++) {
        M.HEAPU32[(roles >> 2) + i] = put(messages[i].role);
        M.HEAPU32[(contents >> 2) + i] = put(messages[i].content);
      }
      const out = M._lw_wasm_chat_render(this.chat_, roles, contents, n, addGenerationPrompt ? 1 : 0, len);
      if (!out) throw new LlamawebError('BAD_INPUT', M.UTF8ToString(M._lw_wasm_chat_error(this.chat_)));
      const text = M.UTF8ToString(out, M.HEAP32[len >> 2]);
      M._lw_wasm_chat_string_free(this.chat_, out);
      return text;
    } finally {
      for (const q of strs) M._free(q);
      M._free(roles);
      M._free(contents);
      M._free(len);
    }
  }

  // The assistant's reply to a conversation: renderChat(messages), its control tokens parsed, generated as
  // generate() does (a fresh context; opts as generate's). chat.completions.create (web/lw-openai.mjs) hangs
  // on this function.
  chat(messages, opts = {}) {
    return this.generate(this.tokenizeSpecial(this.renderChat(messages, true)), { ...opts, keepContext: false });
  }

  // Text of ids (pieces joined as UTF-8).
  detokenize(ids) {
    const dec = new TextDecoder('utf-8');
    let s = '';
    for (const id of ids) s += dec.decode(this.engine.pieceBytes(id), { stream: true });
    return s + dec.decode();
  }

  // Ends the running generation after the current token.
  stop() {
    this.stopping = true;
  }

  // Checks that a generation may start now and takes the model for it.
  begin(signal) {
    if (signal && signal.aborted) throw abortedBefore();
    if (this.busy) throw new LlamawebError('BAD_INPUT', 'a generation is already running on this model');
    if (this.freed) throw new LlamawebError('BAD_INPUT', 'model was freed');
    this.busy = true;
    this.stopping = false;
  }

  // Generation from prompt (text, or an array of token ids). opts: maxTokens (default 128), addSpecial (BOS
  // etc.; default true on a fresh context), keepContext (go on from the previous generation: its last token,
  // then prompt, which may be '', are appended to the context instead of starting afresh), reusePrefix (a
  // fresh context whose cells that the KV cache already holds, the longest common prefix of the ids, are
  // kept, not decoded again: result.fromCell of them; the text is a fresh decode's), sampling ({temp,
  // topK, topP, minP, seed}: tokens drawn by the engine, reproducible for one seed; absent or temp <= 0:
  // greedy), stop (a string or strings: the text ends before the first one, which is not part of it),
  // onToken(text, id) for each generated token (text may be '' while a UTF-8 character is incomplete or
  // while it could begin a stop string; id -1: held back text handed on at the end), signal (an AbortSignal,
  // as stop(); one already aborted rejects with ABORTED). Resolves to {text, tokens, promptTokens, promptMs,
  // genMs, promptTokensPerSecond, tokensPerSecond, fromCell (where the decoded prompt ids went), reason:
  // 'eog' | 'length' | 'context' | 'stopped' | 'stopString'}. A prompt that does not fit rejects with
  // CONTEXT_FULL.
  async generate(prompt, opts = {}) {
    const stops = stopList(opts.stop);
    this.begin(opts.signal);
    this.cacheOwner = null; // the KV cache is generate's from here: a conversation re-decodes what it reuses
    let gen = null, chain = null; // the C state machine; GpuModel.chain's iterator (GPU engine)
    try {
      const maxTokens = opts.maxTokens ?? 128;
      const g = this.engine;
      const out = samplingOut(g, opts.sampling); // decode's out: 'argmax' or the sampling parameters
      const keep = !!opts.keepContext && g.nPast > 0;
      // the previous generation's last token was produced but never decoded: it goes first
      const ids = keep && this.pending >= 0 ? [this.pending] : [];
      if (Array.isArray(prompt)) ids.push(...prompt); // token ids (chat)
      else if (prompt) ids.push(...g.tokenize(prompt, opts.addSpecial ?? !keep));
      else if (!keep && (opts.addSpecial ?? true)) ids.push(...g.tokenize('', true));
      if (ids.length === 0) throw new LlamawebError('BAD_INPUT', 'empty prompt (and the model adds no BOS)');
      let base = keep ? g.nPast : 0;
      // the rules of this generation (stop strings, maxTokens, end of generation, a full context) are C's
      gen = new Generation(g.M, lwModelOf(g), { nPredict: Number.isFinite(maxTokens) ? maxTokens : -1, nCtx: this.info.n_ctx, stop: stops });
      const prompt0 = ids.length;
      if (!keep) {
        base = opts.reusePrefix && ids.length <= this.info.n_ctx ? reusableCells(g, this.cached, ids) : 0;
        ids.splice(0, base);
      }
      let step = gen.start(ids, base); // a prompt past the context: CONTEXT_FULL
      if (!keep) g.nPast = base;
      // the cells kept: none, or the first `base` of what the cache held (unknown when it was unknown)
      const cached = base === 0 ? [] : this.cached && this.cached.length >= base ? this.cached.slice(0, base) : null;
      this.cached = null; // in flux until the prompt is in
      this.pending = -1;
      let t0 = performance.now();
      // the GPU model keeps the loop on the GPU (GpuModel.chain: steps submitted ahead of the ids handed
      // here, undone when this loop stops); other engines decode one step per id
      chain = g.chain ? g.chain(ids, out) : null;
      let next = chain ? (await chain.next()).value : await g.decode(ids, out);
      this.cached = cached ? cached.concat(ids) : null;
      const promptMs = performance.now() - t0;
      t0 = performance.now();
      const tokens = [];
      let text = '', steps = 0;
      const hand = (piece, id) => {
        text += piece;
        if (opts.onToken) opts.onToken(piece, id);
      };
      while (step.sample) {
        step = gen.push(next);
        if (step.stop !== STOP_EOG) {
          tokens.push(next);
          hand(step.text, next);
        }
        // stop() or the signal: after this token (an end of generation or a stop string ends it anyway)
        if (this.stopping || (opts.signal && opts.signal.aborted)) step = gen.stop();
        if (!step.sample) break;
        const id = next;
        next = chain ? (await chain.next()).value : await g.decode([id], out);
        if (this.cached) this.cached.push(id);
        steps++;
      }
      if (chain) await chain.return(); // the steps after `next`: undone (nPast as if it was never decoded)
      chain = null;
      this.pending = next; // produced, not decoded: keepContext feeds it first
      const genMs = performance.now() - t0;
      if (step.tail) hand(step.tail, -1); // held back: a character never completed, a stop string's start
      const reason = REASONS[step.stop];
      return {
        text, tokens, promptTokens: keep ? ids.length : prompt0, decodedTokens: ids.length, fromCell: base, promptMs, genMs, reason,
        promptTokensPerSecond: ids.length / promptMs * 1000,
        tokensPerSecond: steps > 0 ? steps / genMs * 1000 : 0, // decode steps per second
      };
    } catch (e) {
      this.cached = null;
      throw LlamawebError.from(e);
    } finally {
      if (chain) await chain.return().catch(() => {}); // an error: the speculative steps undone all the same
      if (gen) gen.free();
      this.busy = false;
      if (this.freed) this.release_(); // free() came during the generation
    }
  }

  // A conversation kept on this model (Chat): each send() decodes only what the KV cache does not hold yet.
  // opts: system (system prompt), template (a Jinja chat template instead of the model's; with neither, the
  // plain "User: ...\nAssistant:" format), special (control tokens' text in replies).
  newChat(opts = {}) {
    return new Chat(this, opts);
  }

  // generate() as an async iterator of text pieces: for await (const text of model.stream(prompt)) ...
  // Breaking out of the loop stops the generation. opts as generate's (onToken is still called).
  stream(prompt, opts = {}) {
    return pushed((push) => this.generate(prompt, { ...opts, onToken: (text, id) => { push(text); if (opts.onToken) opts.onToken(text, id); } }),
      () => this.stop());
  }

  // Releases the model (GPU buffers or heap weights); during a generation, it stops it and releases them once
  // it ends.
  free() {
    this.stopping = true;
    this.freed = true;
    if (this.chat_) { // it points into the model's header
      this.engine.M._lw_wasm_chat_free(this.chat_);
      this.chat_ = 0;
    }
    this.chatTemplate = false;
    this.chatError = 'model was freed';
    if (!this.busy) this.release_();
  }

  // The conversations (they point into the model's header), then the engine.
  release_() {
    for (const c of this.chats) c.release_();
    this.chats.clear();
    this.engine.free();
  }
}

WorkerModel.prototype.stream = Model.prototype.stream; // built on generate() and stop() only

// ---------------------------------------------------------------------------------------------------------
// Conversations: a chat session (web/lw-wasm-session.c over lw_chat_session_new_model) whose KV cache is the
// engine's, kept across turns
// ---------------------------------------------------------------------------------------------------------

// Result slots of web/lw-wasm-session.c (LW_WS_*): one int32 each in the session's result area.
const WS = { status: 0, decode: 1, stop: 2, piece: 3, pieceLen: 4, fromCell: 5, nPrompt: 6, prompt: 7,
  restarted: 8, resumed: 9, nGen: 10, text: 11, textLen: 12, role: 13 };

const utf8 = new TextEncoder(), fromUtf8 = new TextDecoder();

// A conversation with a model (model.newChat): C renders it with the chat template and plans each turn
// (which cells the KV cache already holds, the ids of the new part), JS decodes on the engine and samples the
// reply token by token as generate() does. Texts may hold NUL characters. One send() at a time per model
// (generate() too); a generate() or another conversation in between costs the next send() a re-decode of
// the cells it reuses, nothing else.
export class Chat {
  constructor(model, opts = {}) {
    if (model.freed) throw new LlamawebError('BAD_INPUT', 'model was freed');
    const M = model.engine.M;
    if (typeof M._lw_wasm_session_new !== 'function') throw new LlamawebError('UNSUPPORTED_MODEL', 'this build has no chat sessions (web/lw-wasm-session.c)');
    this.model = model;
    this.M = M;
    this.w = 0;          // the wasm session
    this.sending = false; // a send() is running
    this.freed = false;  // free() was called (the session goes once no send() uses it)
    const sys = opts.system ? utf8.encode(String(opts.system)) : null;
    const tmpl = opts.template ? utf8.encode(String(opts.template)) : null;
    const put = (b) => {
      const p = M._malloc(b.length + 1);
      M.HEAPU8.set(b, p);
      M.HEAPU8[p + b.length] = 0;
      return p;
    };
    const sp = sys ? put(sys) : 0, tp = tmpl ? put(tmpl) : 0;
    try {
      this.w = M._lw_wasm_session_new(lwModelOf(model.engine), model.info.n_ctx, sp, sys ? sys.length : -1,
        tp, opts.special ? 1 : 0);
    } finally {
      if (sp) M._free(sp);
      if (tp) M._free(tp);
    }
    if (!this.w) throw new LlamawebError('NOT_ENOUGH_MEMORY', 'out of memory');
    this.out = M._lw_wasm_session_out(this.w) >> 2;
    if (this.slot(WS.status) !== 0) {
      const e = this.failure();
      M._lw_wasm_session_free(this.w);
      this.w = 0;
      throw e;
    }
    // which template renders the conversation: 'model' (the GGUF's), 'given' (opts.template) or 'plain'
    this.template = ['given', 'model', 'plain'][M._lw_wasm_session_template(this.w)];
    model.chats.add(this);
  }

  slot(i) {
    return this.M.HEAP32[this.out + i];
  }

  error() {
    return this.M.UTF8ToString(this.M._lw_wasm_session_error(this.w)) || 'chat session failed';
  }

  // The last call's failure as a LlamawebError with its C status (a message too long: CONTEXT_FULL).
  failure() {
    return statusError(this.M, this.slot(WS.status), this.error(), 'decode');
  }

  // Bytes at heap address p as text (NUL characters kept; a copy: a threaded build's heap is shared memory,
  // which TextDecoder refuses).
  text(p, n) {
    return n > 0 ? fromUtf8.decode(this.M.HEAPU8.slice(p, p + n)) : '';
  }

  check() {
    if (this.freed || !this.w) throw new LlamawebError('BAD_INPUT', 'chat was freed');
  }

  // The conversation: [{role, content}], the system prompt first (a restart drops the messages between it
  // and the message that did not fit).
  messages() {
    this.check();
    const M = this.M, n = M._lw_wasm_session_n_messages(this.w), out = [];
    for (let i = 0; i < n; i++) {
      M._lw_wasm_session_message(this.w, i);
      out.push({ role: M.UTF8ToString(this.slot(WS.role)), content: this.text(this.slot(WS.text), this.slot(WS.textLen)) });
    }
    return out;
  }

  // The token ids the KV cache holds for the conversation (the last turn's prompt and reply included).
  tokens() {
    this.check();
    this.M._lw_wasm_session_tokens(this.w);
    const p = this.slot(WS.text) >> 2;
    return Array.from(this.M.HEAP32.subarray(p, p + this.slot(WS.textLen)));
  }

  // Adds a message without generating (a conversation restored from storage): the next send() decodes it
  // with the rest.
  add(role, content) {
    this.check();
    if (this.sending) throw new LlamawebError('BAD_INPUT', 'a reply is being generated');
    const M = this.M, r = utf8.encode(String(role)), c = utf8.encode(String(content ?? ''));
    const rp = M._malloc(r.length + 1), cp = M._malloc(c.length + 1);
    try {
      M.HEAPU8.set(r, rp);
      M.HEAPU8[rp + r.length] = 0;
      M.HEAPU8.set(c, cp);
      if (M._lw_wasm_session_add(this.w, rp, cp, c.length) !== 0) throw this.failure();
    } finally {
      M._free(rp);
      M._free(cp);
    }
  }

  // The user's message text, answered: resolves to {text (the reply as the conversation keeps it; with a
  // stop string, the part before it), tokens (reply ids, an end-of-generation one excluded), decodedTokens
  // (prompt ids decoded for this turn), fromCell (where they went: cells before it were reused), restarted
  // (the context was full: the conversation started over from the system prompt and this message), resumed,
  // reason ('eog' | 'length' | 'context' | 'stopped' | 'stopString'), promptMs, genMs,
  // promptTokensPerSecond, tokensPerSecond}. opts: maxTokens (default 128), sampling (as generate's), stop
  // (as generate's: the reply ends there; the conversation keeps the tokens generated), reusePrefix (keep
  // the cells the KV cache holds anyway, whoever decoded them, as generate's), onToken(text, id),
  // signal (an AbortSignal: ends the reply after the current token; the reply so far joins the
  // conversation; one already aborted rejects with ABORTED). A failed turn leaves the conversation as it was
  // before (a too long message is refused with CONTEXT_FULL).
  async send(message, opts = {}) {
    this.check();
    const stops = stopList(opts.stop);
    const m = this.model, g = m.engine, M = this.M;
    m.begin(opts.signal);
    this.sending = true;
    try {
      const maxTokens = opts.maxTokens ?? 128;
      const out = samplingOut(g, opts.sampling);
      // the reply's rules (maxTokens, stop strings, end of generation, a full context) are the session's, in C
      const [sb, sl, ns] = putStops(M, stops);
      const lst = M._lw_wasm_session_set_limits(this.w, Number.isFinite(maxTokens) ? maxTokens : -1, sb, sl, ns);
      M._free(sb);
      M._free(sl);
      if (lst !== 0) throw this.failure();
      const bytes = utf8.encode(String(message));
      const p = M._malloc(bytes.length + 1);
      M.HEAPU8.set(bytes, p);
      const st = M._lw_wasm_session_user(this.w, p, bytes.length);
      M._free(p);
      if (st !== 0) throw this.failure();
      const restarted = this.slot(WS.restarted) !== 0, resumed = this.slot(WS.resumed) !== 0;
      let at = this.slot(WS.fromCell);
      const pp = this.slot(WS.prompt) >> 2;
      let ids = Array.from(M.HEAP32.subarray(pp, pp + this.slot(WS.nPrompt)));
      // The engine's cache holds this conversation only if nothing else decoded since its last turn:
      // otherwise the reused cells are decoded again (the session keeps their ids). With reusePrefix, the
      // cells the cache holds anyway (the longest common prefix) are kept whoever decoded them.
      if (opts.reusePrefix || (at > 0 && m.cacheOwner !== this)) {
        const all = [...this.tokens().slice(0, at), ...ids];
        at = opts.reusePrefix ? reusableCells(g, m.cached, all) : 0;
        ids = all.slice(at);
      }
      if (ids.length === 0) { // a template that renders nothing new: logits come from the last cell again
        ids = [this.tokens()[at - 1]];
        at--;
      }
      m.cacheOwner = null; // in flux until the turn ends
      m.cached = null;
      m.pending = -1;
      const tokens = [];
      let reason = 'length', steps = 0, promptMs = 0, t0 = performance.now(), said = '';
      const hand = (piece, id) => {
        said += piece;
        if (opts.onToken && (piece || id >= 0)) opts.onToken(piece, id);
      };
      let chain = null; // GpuModel.chain's iterator (the GPU engine: steps run ahead, undone at the end)
      const unchain = async () => { if (chain) { const c = chain; chain = null; await c.return(); } };
      try {
        g.nPast = at;
        chain = g.chain ? g.chain(ids, out) : null;
        let next = chain ? (await chain.next()).value : await g.decode(ids, out);
        promptMs = performance.now() - t0;
        t0 = performance.now();
        for (;;) {
          if (M._lw_wasm_session_push(this.w, next) !== 0) throw this.failure();
          const stop = this.slot(WS.stop), decode = this.slot(WS.decode) !== 0;
          const piece = this.text(this.slot(WS.piece), this.slot(WS.pieceLen));
          if (this.slot(WS.nGen) === tokens.length) break; // maxTokens 0: the reply ended without it
          if (stop === STOP_EOG) { // not in the cache nor the reply; a character left incomplete may end here
            if (piece) hand(piece, -1);
            reason = 'eog';
            break;
          }
          tokens.push(next);
          hand(piece, next);
          if (stop !== STOP_NONE) { // the cache keeps the whole reply: its last token is decoded when it fits
            await unchain(); // the steps run ahead: undone (the one the cache keeps is decoded below)
            if (decode) await g.decode([next], 'none');
            reason = REASONS[stop];
            break;
          }
          if (m.stopping || (opts.signal && opts.signal.aborted)) { // the token is the cache's: decoded too
            await unchain();
            await g.decode([next], 'none');
            if (M._lw_wasm_session_end_reply(this.w) !== 0) throw this.failure();
            const held = this.text(this.slot(WS.piece), this.slot(WS.pieceLen));
            if (held && opts.onToken) opts.onToken(held, -1);
            reason = 'stopped';
            break;
          }
          next = chain ? (await chain.next()).value : await g.decode([next], out);
          steps++;
        }
        await unchain(); // an end of generation or maxTokens: what ran ahead is not the cache's
      } catch (e) {
        await unchain().catch(() => {});
        M._lw_wasm_session_abort(this.w); // the turn is undone; the next one decodes from cell 0
        throw e;
      }
      m.cacheOwner = this;
      m.cached = this.tokens(); // what the session says the cache holds
      const genMs = performance.now() - t0;
      M._lw_wasm_session_reply(this.w);
      // the reply as the conversation keeps it; with a stop string, the part before it
      const text = reason === 'stopString' ? said : this.text(this.slot(WS.text), this.slot(WS.textLen));
      return {
        text, tokens, decodedTokens: ids.length, fromCell: at,
        promptTokens: ids.length, // as generate()'s result names it
        restarted, resumed, reason, promptMs, genMs,
        promptTokensPerSecond: ids.length / promptMs * 1000,
        tokensPerSecond: steps > 0 ? steps / genMs * 1000 : 0, // decode steps per second
      };
    } catch (e) {
      throw LlamawebError.from(e);
    } finally {
      this.sending = false;
      m.busy = false;
      if (m.freed) m.release_(); // free() came during the reply
      else if (this.freed) this.release_();
    }
  }

  // Starts over: back to the system prompt (the next send decodes from cell 0).
  reset() {
    this.check();
    if (this.sending) throw new LlamawebError('BAD_INPUT', 'a reply is being generated');
    this.M._lw_wasm_session_reset(this.w);
    if (this.model.cacheOwner === this) this.model.cacheOwner = null;
  }

  // Releases the session; during a send() it ends the reply first.
  free() {
    if (this.freed) return;
    this.freed = true;
    if (this.sending) this.model.stop();
    else this.release_();
  }

  release_() {
    this.freed = true;
    if (this.w) this.M._lw_wasm_session_free(this.w);
    this.w = 0;
    this.model.chats.delete(this);
    if (this.model.cacheOwner === this) this.model.cacheOwner = null;
  }
}

// A conversation in the worker (WorkerModel.newChat): Chat's interface; messages(), tokens(), add() and reset()
// are promises. Made at once; a failure to make it (a template that does not parse, say) rejects every call.
class WorkerChat {
  constructor(model, opts) {
    this.model = model;
    this.template = undefined; // 'model' | 'given' | 'plain' once the worker made it
    this.ready = model.rpc.call({ op: 'newChat', handle: model.handle, opts: { ...opts } })
      .then((d) => { this.template = d.template; return d.chat; });
    this.ready.catch(() => {}); // surfaced by the calls
  }
  async call(op, extra = {}, onEvent) {
    const chat = await this.ready;
    return this.model.rpc.call({ op, chat, ...extra }, onEvent);
  }
  send(text, opts = {}) {
    const { onToken, signal, ...rest } = opts;
    return withSignal(signal, () => this.model.stop(), () => this.call('send', { text: String(text), opts: rest },
      (ev) => { if (ev.token !== undefined && onToken) onToken(ev.token, ev.tokenId); }));
  }
  messages() {
    return this.call('chatMessages');
  }
  tokens() {
    return this.call('chatTokens');
  }
  add(role, content) {
    return this.call('chatAdd', { role: String(role), content: String(content ?? '') });
  }
  reset() {
    return this.call('chatReset');
  }
  free() {
    this.call('chatFree').catch(() => {});
  }
}
