// llamaweb WebGPU glue for the wasm build (an Emscripten --js-library): implements the JS side of the GPU
// HAL (src/webgpu/gpu.h, C side in web/lw-gpu-wasm.c) against today's WebGPU JS API, so the same module
// runs in browsers and in Node with the npm `webgpu` package (Dawn). Not Emscripten's -sUSE_WEBGPU.
//
// The host creates the GPUDevice (async) and hands it over before calling into C:
//     const dev = await Module.lwGpu.requestDevice(navigator.gpu);   // every useful feature, max limits
//     Module.lwGpu.init(dev);   // or init(yourDevice, adapterInfo)
// C then creates objects and records work synchronously; asynchronous results (reads into the wasm heap,
// streamed host-source writes, error scopes) are tracked and awaited by the host between two calls into C:
//     await Module.lwGpu.settle();      // every pending operation done; C may read the results now
// Host byte sources (weights that must not pass through the wasm heap) are registered from JS:
//     const id = Module.lwGpu.addSource({ size, read: async (offset, length) => Uint8Array });
// and C streams a range of one into a buffer with buffer_write_host (chunks of lwGpu.chunkBytes).
// Streaming is bounded: every buffer_write_host call queues a job; at most lwGpu.load.maxInFlight chunks
// (read started, not yet written and acknowledged by the queue) exist at once, issued in ascending source
// offset (sequential reads per source); a failed read is retried lwGpu.load.retries times with exponential
// backoff, then fails that HAL context only (its error carries a code, LW_ERR_READ; other contexts and the
// device stay usable). lwGpu.loadStats: chunks, bytes, peak chunks in flight, retries, peak JS heap.
// lwGpu.capLimits({maxBufferSize, maxStorageBufferBindingSize}) makes C plan for smaller limits than the
// device's (tests: tensors split over many small buffers and bindings).
//
// Objects live in tables indexed by small integers (0 = none), the handles the C side holds.

var LibraryLwGpu = {
  $LwGpu__postset: 'Module["lwGpu"] = LwGpu;',
  $LwGpu: {
    device: null,        // the GPUDevice
    adapterInfo: null,   // GPUAdapterInfo (or a plain object) for info()
    objects: [null],     // handle -> {kind, obj, ctx, ...}; index 0 is never used
    contexts: 0,         // HAL contexts opened so far (each owns the objects it created)
    free: [],            // reusable handles
    sources: [null],     // host byte sources: {size, read(offset, length) -> Promise<Uint8Array>}
    encoder: null,       // GPUCommandEncoder being recorded, or null
    pass: null,          // GPUComputePassEncoder open on it, or null
    pending: 0,          // asynchronous operations in flight
    promises: null,      // their promises (a Set, made on first use: this object is serialized at build time)
    error: null,         // first asynchronous error (sticky)
    chunkBytes: 8 << 20, // host-source streaming chunk
    // streaming: chunks in flight at most, read retries, first retry delay (doubles each time), and whether
    // a chunk counts in flight until the queue reports its write done (onSubmittedWorkDone); verify: every
    // buffer is made copyable and each host-source write is logged for verifyUploads (GpuModel.open's verify)
    load: { maxInFlight: 4, retries: 3, retryDelayMs: 50, waitQueue: true, verify: false },
    skip: null, // a RegExp of pipeline labels whose dispatches are left out (web/cli.mjs --skip: a measurement)
    uploadLog: null,     // verify: the host-source writes [{rec, offset, srcId, srcOffset, size}] since the last check
    loadStats: null,     // {chunks, bytes, inFlight, peakInFlight, retries, failed, peakJsHeap, startMs, ms}
    jobs: [],            // queued host-source writes, in source order
    active: null,        // every unfinished one (a Set, made on first use)
    jobsDirty: false,    // jobs needs sorting
    inFlight: 0,         // chunks in flight now
    ctxErrors: null,     // HAL context -> {message, code}: its streams failed (not sticky for the page)
    srcErrors: null,     // host source id -> {message, code}
    limitCaps: null,     // {limit name: cap} applied to what C sees (capLimits)
    staging: [],         // free MAP_READ staging buffers [{buf, size}]
    prof: null,          // profiling state while switched on (profileStart), else null: see "Profiling" below
    wgslFeatures: null,  // the GPU object's wgslLanguageFeatures when requestDevice made the device
    // what was created and done, so tests can prove a step creates nothing (invariant 2)
    counters: { buffers: 0, stagingBuffers: 0, pipelines: 0, bindGroups: 0, dispatches: 0, submits: 0, bytesWritten: 0, bytesStreamed: 0, bytesRead: 0, querySets: 0 },

    // Requests an adapter + device with every feature the kernels can use and the adapter's max limits.
    requestDevice: async function (gpu, adapterOptions) {
      const adapter = await gpu.requestAdapter(adapterOptions || { powerPreference: 'high-performance' });
      if (!adapter) throw new Error('lwGpu: no WebGPU adapter');
      const want = ['shader-f16', 'subgroups', 'timestamp-query'];
      const requiredFeatures = want.filter((f) => adapter.features.has(f));
      // the matrix units (prefill's matmat-smx.wgsl), where the adapter lists an i8 x i8 -> i32 configuration
      // (Dawn: created with enable-dawn-features=allow_unsafe_apis; lavapipe/SwiftShader list none)
      if (adapter.features.has(LwGpu.SMX_FEATURE) && LwGpu.smxConfig(adapter.info)) requiredFeatures.push(LwGpu.SMX_FEATURE);
      const requiredLimits = {};
      for (const k of ['maxBufferSize', 'maxStorageBufferBindingSize', 'maxComputeWorkgroupStorageSize',
        'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxStorageBuffersPerShaderStage',
        'maxComputeWorkgroupsPerDimension', 'maxUniformBufferBindingSize']) {
        if (adapter.limits[k] !== undefined) requiredLimits[k] = adapter.limits[k];
      }
      const device = await adapter.requestDevice({ requiredFeatures, requiredLimits });
      LwGpu.adapterInfo = adapter.info || {};
      LwGpu.wgslFeatures = gpu.wgslLanguageFeatures || null;
      return device;
    },

    SMX_FEATURE: 'chromium-experimental-subgroup-matrix',
    // The 16 x 16 x 32 i8 x i8 -> i32 subgroup-matrix configuration of an adapter's info, or null. Its entries'
    // fields are getters (JSON.stringify shows {}).
    smxConfig: function (info) {
      const cfgs = info && info.subgroupMatrixConfigs;
      if (!cfgs) return null;
      for (const c of cfgs) {
        if (c.componentType === 'i8' && c.resultComponentType === 'i32' && c.M === 16 && c.N === 16 && c.K === 32)
          return { m: 16, n: 16, k: 32 };
      }
      return null;
    },

    init: function (device, adapterInfo) {
      LwGpu.device = device;
      if (adapterInfo) LwGpu.adapterInfo = adapterInfo;
      if (!LwGpu.adapterInfo) LwGpu.adapterInfo = device.adapterInfo || {};
      device.addEventListener && device.addEventListener('uncapturederror', (ev) => {
        LwGpu.fail('uncaptured: ' + (ev.error && ev.error.message || ev));
      });
      if (device.lost) device.lost.then((info) => { if (LwGpu.device === device) LwGpu.fail('device lost: ' + info.message); });
    },

    fail: function (msg) {
      if (!LwGpu.error) LwGpu.error = String(msg);
    },

    // Tracks an asynchronous operation until settle().
    track: function (promise) {
      LwGpu.pending++;
      if (!LwGpu.promises) LwGpu.promises = new Set();
      const p = Promise.resolve(promise).catch((e) => LwGpu.fail(e && e.message || e)).finally(() => {
        LwGpu.pending--;
        LwGpu.promises.delete(p);
      });
      LwGpu.promises.add(p);
      return p;
    },

    settle: async function () {
      while (LwGpu.promises && LwGpu.promises.size) await Promise.all([...LwGpu.promises]);
      return LwGpu.error;
    },

    // Error scopes around a synchronous creation: errors (e.g. shader compilation) become sticky.
    scoped: function (what, fn) {
      const d = LwGpu.device;
      d.pushErrorScope('out-of-memory');
      d.pushErrorScope('validation');
      let r;
      try {
        r = fn();
      } finally {
        const v = d.popErrorScope(), m = d.popErrorScope();
        LwGpu.track(Promise.all([v, m]).then(([ve, me]) => {
          if (ve) LwGpu.fail(what + ': ' + ve.message);
          if (me) LwGpu.fail(what + ': out of memory: ' + me.message);
        }));
      }
      return r;
    },

    add: function (rec) {
      const h = LwGpu.free.length ? LwGpu.free.pop() : LwGpu.objects.length;
      LwGpu.objects[h] = rec;
      return h;
    },
    get: function (h, kind) {
      const r = LwGpu.objects[h];
      if (!r || r.kind !== kind) throw new Error('lwGpu: bad ' + kind + ' handle ' + h);
      return r;
    },

    addSource: function (src) {
      if (!src || typeof src.read !== 'function') throw new Error('lwGpu.addSource: needs read(offset, length)');
      LwGpu.sources.push(src);
      return LwGpu.sources.length - 1;
    },
    removeSource: function (id) {
      LwGpu.sources[id] = null;
      if (LwGpu.srcErrors) delete LwGpu.srcErrors[id];
    },

    // A source over bytes already in JS memory (tests; small models).
    bytesSource: function (bytes) {
      const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
      return { size: u8.length, read: async (off, len) => u8.subarray(off, off + len) };
    },
    // A source over a Blob or File (a user's file, an OPFS getFile()): each chunk is read on demand.
    blobSource: function (blob) {
      return { size: blob.size, read: async (off, len) => new Uint8Array(await blob.slice(off, off + len).arrayBuffer()) };
    },

    endPass: function () {
      if (LwGpu.pass) { LwGpu.pass.end(); LwGpu.pass = null; }
    },
    enc: function () {
      if (!LwGpu.encoder) LwGpu.encoder = LwGpu.device.createCommandEncoder();
      return LwGpu.encoder;
    },
    submit: function () {
      if (!LwGpu.encoder) return;
      LwGpu.endPass();
      const cb = LwGpu.encoder.finish();
      LwGpu.encoder = null;
      LwGpu.device.queue.submit([cb]);
      LwGpu.counters.submits++;
    },

    // writeBuffer needs sizes that are multiples of 4: pad the tail with zeros (buffers are rounded up to 4).
    write: function (buf, offset, bytes) {
      const n = bytes.length;
      const body = n & ~3;
      if (body) LwGpu.device.queue.writeBuffer(buf, offset, bytes.buffer, bytes.byteOffset, body);
      if (n & 3) {
        const tail = new Uint8Array(4);
        tail.set(bytes.subarray(body));
        LwGpu.device.queue.writeBuffer(buf, offset + body, tail.buffer, 0, 4);
      }
    },

    // Lower limits C plans for (tests; null clears): {maxBufferSize, maxStorageBufferBindingSize, ...}.
    capLimits: function (caps) {
      LwGpu.limitCaps = caps || null;
    },

    // JS heap in use now, where the runtime tells (Chrome's performance.memory, Node's process), else 0.
    jsHeap: function () {
      if (typeof performance !== 'undefined' && performance.memory) return performance.memory.usedJSHeapSize;
      if (typeof process !== 'undefined' && process.memoryUsage) {
        const m = process.memoryUsage();
        return m.heapUsed + (m.arrayBuffers || 0);
      }
      return 0;
    },
    // Load statistics from now on (GpuModel.open calls it before C plans the model).
    resetLoadStats: function () {
      LwGpu.loadStats = { chunks: 0, bytes: 0, inFlight: 0, peakInFlight: 0, retries: 0, failed: 0,
        peakJsHeap: LwGpu.jsHeap(), startMs: performance.now(), ms: 0 };
      return LwGpu.loadStats;
    },
    contextError: function (ctx) { return (LwGpu.ctxErrors && LwGpu.ctxErrors[ctx]) || null; },
    sourceError: function (id) { return (LwGpu.srcErrors && LwGpu.srcErrors[id]) || null; },

    // Queues a host-source write; the promise settles when every chunk is written (or the job failed or was
    // cancelled: its context's error says which).
    stream: function (rec, offset, srcId, srcOffset, size) {
      const job = { rec: rec, ctx: rec.ctx, offset: offset, srcId: srcId, src: LwGpu.sources[srcId], srcOffset: srcOffset,
        size: size, next: 0, done: 0, inFlight: 0, dead: false, resolve: null };
      const p = new Promise((resolve) => { job.resolve = resolve; });
      LwGpu.jobs.push(job);
      if (LwGpu.load.verify) (LwGpu.uploadLog || (LwGpu.uploadLog = [])).push({ rec: rec, offset: offset, srcId: srcId, srcOffset: srcOffset, size: size });
      if (!LwGpu.active) LwGpu.active = new Set();
      LwGpu.active.add(job);
      LwGpu.jobsDirty = true;
      if (!LwGpu.loadStats) LwGpu.resetLoadStats();
      // start once C has queued the whole plan (a microtask): reads then go in source order
      Promise.resolve().then(LwGpu.pump);
      return p;
    },
    jobSettle: function (job) {
      if (job.inFlight || (!job.dead && job.done < job.size)) return;
      if (!job.dead) LwGpu.counters.bytesStreamed += job.size;
      LwGpu.active.delete(job);
      job.resolve();
    },
    // Fails (or cancels: err null) every job of HAL context ctx: nothing more is read for them.
    failContext: function (ctx, err) {
      if (err) {
        if (!LwGpu.ctxErrors) LwGpu.ctxErrors = {};
        if (!LwGpu.ctxErrors[ctx]) LwGpu.ctxErrors[ctx] = err;
      }
      for (const j of LwGpu.active ? [...LwGpu.active] : []) {
        if (j.ctx !== ctx || j.dead) continue;
        j.dead = true;
        if (err && j.srcId) {
          if (!LwGpu.srcErrors) LwGpu.srcErrors = {};
          if (!LwGpu.srcErrors[j.srcId]) LwGpu.srcErrors[j.srcId] = err;
        }
        LwGpu.jobSettle(j);
      }
      LwGpu.jobs = LwGpu.jobs.filter((j) => !j.dead);
    },
    sleep: function (ms) { return new Promise((r) => setTimeout(r, ms)); },
    // One chunk's bytes, retried with backoff; throws an Error with code LW_ERR_READ when every try failed.
    readChunk: async function (job, off, len) {
      const L = LwGpu.load;
      for (let attempt = 0; ; attempt++) {
        let why;
        try {
          const bytes = await job.src.read(off, len);
          if (bytes && bytes.length === len) return bytes;
          why = 'returned ' + (bytes ? bytes.length : 0) + ' of ' + len + ' bytes';
        } catch (e) {
          why = e && e.message || String(e);
        }
        if (job.dead) return null;
        if (attempt >= L.retries) {
          const e = new Error('reading host source ' + job.srcId + ' at ' + off + ' (' + len + ' bytes) failed after ' +
            (attempt + 1) + ' tries: ' + why);
          e.code = 'LW_ERR_READ';
          throw e;
        }
        if (LwGpu.loadStats) LwGpu.loadStats.retries++;
        await LwGpu.sleep(L.retryDelayMs * Math.pow(2, attempt));
        if (job.dead) return null;
      }
    },
    // Starts chunks while fewer than load.maxInFlight are in flight: the job with the lowest source offset
    // first (per source: ascending offsets), each job's chunks in order.
    pump: function () {
      const S = LwGpu.loadStats || LwGpu.resetLoadStats();
      const cap = Math.max(1, LwGpu.load.maxInFlight | 0);
      const step = Math.max(4, LwGpu.chunkBytes - (LwGpu.chunkBytes % 4)); // keeps every offset 4-aligned
      if (LwGpu.jobsDirty) {
        LwGpu.jobs.sort((a, b) => a.srcId - b.srcId || a.srcOffset - b.srcOffset);
        LwGpu.jobsDirty = false;
      }
      while (LwGpu.inFlight < cap) {
        while (LwGpu.jobs.length && (LwGpu.jobs[0].dead || LwGpu.jobs[0].next >= LwGpu.jobs[0].size)) LwGpu.jobs.shift();
        const job = LwGpu.jobs[0];
        if (!job) break;
        const at = job.next, len = Math.min(step, job.size - at);
        job.next += len;
        job.inFlight++;
        LwGpu.inFlight++;
        S.inFlight = LwGpu.inFlight;
        if (LwGpu.inFlight > S.peakInFlight) S.peakInFlight = LwGpu.inFlight;
        LwGpu.chunk(job, at, len).catch((e) => {
          S.failed++;
          LwGpu.failContext(job.ctx, { message: e && e.message || String(e), code: e && e.code || 'LW_ERR_GPU' });
        }).finally(() => {
          job.inFlight--;
          LwGpu.inFlight--;
          S.inFlight = LwGpu.inFlight;
          S.ms = performance.now() - S.startMs;
          LwGpu.jobSettle(job);
          LwGpu.pump();
        });
      }
    },
    chunk: async function (job, at, len) {
      let bytes = await LwGpu.readChunk(job, job.srcOffset + at, len);
      if (!bytes || job.dead) return; // cancelled: its buffers may be gone
      LwGpu.write(job.rec.obj, job.offset + at, bytes);
      bytes = null; // writeBuffer copied it: nothing keeps the chunk
      const S = LwGpu.loadStats;
      S.chunks++;
      S.bytes += len;
      const h = LwGpu.jsHeap();
      if (h > S.peakJsHeap) S.peakJsHeap = h;
      if (LwGpu.load.waitQueue && LwGpu.device.queue.onSubmittedWorkDone) await LwGpu.device.queue.onSubmittedWorkDone();
      job.done += len;
    },

    // The proof that streamed bytes land where they belong (bytes past 4 GiB included): every logged write of
    // host source srcId read back from its GPU buffer, chunkBytes at a time, and compared with the same range
    // read again from the source. Returns {writes, bytes, bytesPast4GiB (source bytes at offsets >= 2^32),
    // mismatches (chunks that differ), first (the first difference: {srcOffset, buffer label, offset}) or null}.
    // Takes the log's entries of srcId off it. Costs a second read of the source and a GPU read-back.
    verifyUploads: async function (srcId) {
      const log = (LwGpu.uploadLog || []).filter((w) => w.srcId === srcId);
      LwGpu.uploadLog = (LwGpu.uploadLog || []).filter((w) => w.srcId !== srcId);
      const src = LwGpu.sources[srcId], d = LwGpu.device, step = LwGpu.chunkBytes;
      const r = { writes: log.length, bytes: 0, bytesPast4GiB: 0, mismatches: 0, first: null };
      const st = LwGpu.stagingGet(step);
      try {
        for (const w of log) {
          for (let at = 0; at < w.size; at += step) {
            const len = Math.min(step, w.size - at), padded = Math.min((len + 3) & ~3, w.rec.size - w.offset - at);
            const e = d.createCommandEncoder();
            e.copyBufferToBuffer(w.rec.obj, w.offset + at, st.buf, 0, padded);
            d.queue.submit([e.finish()]);
            const want = await src.read(w.srcOffset + at, len);
            await st.buf.mapAsync(GPUMapMode.READ, 0, padded);
            const got = new Uint8Array(st.buf.getMappedRange(0, padded), 0, len);
            let same = want && want.length === len;
            for (let i = 0; same && i < len; i++) same = got[i] === want[i];
            st.buf.unmap();
            if (!same) {
              r.mismatches++;
              if (!r.first) r.first = { srcOffset: w.srcOffset + at, buffer: w.rec.obj.label, offset: w.offset + at };
            }
            r.bytes += len;
            const past = w.srcOffset + at + len - 4294967296;
            if (past > 0) r.bytesPast4GiB += Math.min(len, past);
          }
        }
      } finally {
        LwGpu.staging.push(st);
      }
      return r;
    },

    stagingGet: function (size) {
      for (let i = 0; i < LwGpu.staging.length; i++) {
        if (LwGpu.staging[i].size >= size) return LwGpu.staging.splice(i, 1)[0];
      }
      const s = Math.max(256, Math.ceil(size / 256) * 256);
      LwGpu.counters.stagingBuffers++;
      return { size: s, buf: LwGpu.device.createBuffer({ size: s, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: 'lw staging' }) };
    },

    // ---- Profiling (web/lw-profile.mjs) ----
    // profileStart({gpu}) makes every dispatch record its pipeline's label (the variant key) and the JS time
    // spent recording it (performance.now() around the call). With gpu and the device's timestamp-query, each
    // dispatch also runs in its own compute pass whose timestampWrites go to one query set (made here, once,
    // with its resolve and read buffers: nothing per token); dispatches past its capacity go untimed.
    // profileRead() submits, resolves and reads those timestamps back, returns the records since the last
    // read and starts a new list. Outside profiling the recording path only tests LwGpu.prof.
    profileStart: function (opts) {
      const d = LwGpu.device;
      const gpu = !!(opts && opts.gpu) && d.features.has('timestamp-query');
      LwGpu.submit(); // work recorded before is not profiled
      const P = LwGpu.prof || { qs: null, cap: 2048 }; // 2048 dispatches = 4096 timestamps, WebGPU's query set maximum
      if (gpu && !P.qs) {
        P.qs = d.createQuerySet({ type: 'timestamp', count: 2 * P.cap, label: 'lw profile' });
        P.resolve = d.createBuffer({ size: 16 * P.cap, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC, label: 'lw profile resolve' });
        P.read = d.createBuffer({ size: 16 * P.cap, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: 'lw profile read' });
        LwGpu.counters.querySets++;
        LwGpu.counters.buffers += 2;
      }
      Object.assign(P, { gpu: gpu, n: 0, labels: [], cpu: [], submitMs: 0, writeMs: 0 });
      LwGpu.prof = P;
      return gpu;
    },
    // -> {labels[i], cpuMs[i] (per dispatch), timed (dispatches with timestamps: the first ones), beginNs /
    // endNs (Float64Array, ns after the first timed dispatch began), submitMs, writeMs (JS time in submits and
    // buffer writes)}, or null when profiling is off.
    profileRead: async function () {
      const P = LwGpu.prof;
      if (!P) return null;
      LwGpu.submit();
      const r = { labels: P.labels, cpuMs: P.cpu, timed: P.n, beginNs: new Float64Array(P.n), endNs: new Float64Array(P.n),
        submitMs: P.submitMs, writeMs: P.writeMs };
      Object.assign(P, { n: 0, labels: [], cpu: [], submitMs: 0, writeMs: 0 });
      if (r.timed) {
        const e = LwGpu.device.createCommandEncoder();
        e.resolveQuerySet(P.qs, 0, 2 * r.timed, P.resolve, 0);
        e.copyBufferToBuffer(P.resolve, 0, P.read, 0, 16 * r.timed);
        LwGpu.device.queue.submit([e.finish()]);
        await P.read.mapAsync(GPUMapMode.READ, 0, 16 * r.timed);
        const t = new BigUint64Array(P.read.getMappedRange(0, 16 * r.timed).slice(0));
        P.read.unmap();
        for (let i = 0; i < r.timed; i++) {
          r.beginNs[i] = Number(t[2 * i] - t[0]);
          r.endNs[i] = Number(t[2 * i + 1] - t[0]);
        }
      }
      return r;
    },
    profileStop: function () {
      const P = LwGpu.prof;
      if (!P) return;
      LwGpu.submit();
      LwGpu.prof = null;
      if (P.qs) { P.qs.destroy(); P.resolve.destroy(); P.read.destroy(); }
    },

    // Releases the objects of one HAL context (others keep theirs).
    destroyContext: function (ctx) {
      LwGpu.submit(); // recorded work may still use them
      LwGpu.failContext(ctx, null); // queued streams into its buffers: cancelled
      if (LwGpu.ctxErrors) delete LwGpu.ctxErrors[ctx];
      for (let h = 1; h < LwGpu.objects.length; h++) {
        const r = LwGpu.objects[h];
        if (!r || r.ctx !== ctx) continue;
        if (r.kind === 'buffer') r.obj.destroy();
        LwGpu.objects[h] = null;
        LwGpu.free.push(h);
      }
    },
  },

  // ---- device info -------------------------------------------------------------------------------------
  lw_js_gpu_ready__deps: ['$LwGpu'],
  lw_js_gpu_ready: function () {
    return LwGpu.device ? 1 : 0;
  },
  lw_js_gpu_limit__deps: ['$LwGpu'],
  lw_js_gpu_limit: function (name) {
    const key = UTF8ToString(name);
    const v = LwGpu.device.limits[key], cap = LwGpu.limitCaps && LwGpu.limitCaps[key];
    if (v === undefined) return -1;
    return cap !== undefined && cap !== null && cap < v ? cap : v;
  },
  lw_js_gpu_has_feature__deps: ['$LwGpu'],
  lw_js_gpu_has_feature: function (name) {
    return LwGpu.device.features.has(UTF8ToString(name)) ? 1 : 0;
  },
  // WGSL language features (e.g. packed_4x8_integer_dot_product): of the GPU object the device came from,
  // or the browser's navigator.gpu for a device made elsewhere
  lw_js_gpu_has_wgsl_feature__deps: ['$LwGpu'],
  lw_js_gpu_has_wgsl_feature: function (name) {
    const nav = typeof navigator !== 'undefined' && navigator.gpu ? navigator.gpu.wgslLanguageFeatures : null;
    const f = LwGpu.wgslFeatures || nav;
    return f && f.has(UTF8ToString(name)) ? 1 : 0;
  },
  // M, N or K (which 0, 1, 2) of the device's i8 subgroup-matrix configuration, 0 without one
  lw_js_gpu_smx__deps: ['$LwGpu'],
  lw_js_gpu_smx: function (which) {
    const d = LwGpu.device;
    if (!d.features.has(LwGpu.SMX_FEATURE)) return 0;
    const c = LwGpu.smxConfig(LwGpu.adapterInfo || d.adapterInfo);
    return c ? [c.m, c.n, c.k][which] || 0 : 0;
  },
  lw_js_gpu_adapter_info__deps: ['$LwGpu'],
  lw_js_gpu_adapter_info: function (field, dst, cap) {
    const info = LwGpu.adapterInfo || {};
    const key = UTF8ToString(field);
    const v = info[key];
    if (typeof v === 'number') return v;
    stringToUTF8(v === undefined ? '' : String(v), dst, cap);
    return 0;
  },

  // ---- buffers -----------------------------------------------------------------------------------------
  lw_js_context_new__deps: ['$LwGpu'],
  lw_js_context_new: function () {
    return ++LwGpu.contexts;
  },
  lw_js_buffer_create__deps: ['$LwGpu'],
  lw_js_buffer_create: function (ctx, size, usage, label) {
    let u = 0;
    if (usage & 1) u |= GPUBufferUsage.STORAGE;
    if (usage & 2) u |= GPUBufferUsage.UNIFORM;
    if (usage & 4) u |= GPUBufferUsage.COPY_SRC;
    if (usage & 8) u |= GPUBufferUsage.COPY_DST;
    if (usage & 16) u |= GPUBufferUsage.INDIRECT;
    if (LwGpu.load.verify) u |= GPUBufferUsage.COPY_SRC; // verifyUploads reads the weights back
    const l = label ? UTF8ToString(label) : 'lw buffer';
    try {
      const buf = LwGpu.scoped('createBuffer ' + l, () => LwGpu.device.createBuffer({ size: size, usage: u, label: l }));
      LwGpu.counters.buffers++;
      return LwGpu.add({ kind: 'buffer', obj: buf, size: size, ctx: ctx });
    } catch (e) {
      LwGpu.fail('createBuffer ' + l + ': ' + e.message);
      return 0;
    }
  },
  lw_js_buffer_destroy__deps: ['$LwGpu'],
  lw_js_buffer_destroy: function (h) {
    const r = LwGpu.objects[h];
    if (!r || r.kind !== 'buffer') return;
    r.obj.destroy();
    LwGpu.objects[h] = null;
    LwGpu.free.push(h);
  },
  lw_js_buffer_write__deps: ['$LwGpu'],
  lw_js_buffer_write: function (h, offset, ptr, size) {
    try {
      const t0 = LwGpu.prof ? performance.now() : 0;
      const r = LwGpu.get(h, 'buffer');
      // the heap view is valid only now: writeBuffer copies before returning
      LwGpu.write(r.obj, offset, HEAPU8.subarray(ptr, ptr + size));
      LwGpu.counters.bytesWritten += size;
      if (LwGpu.prof) LwGpu.prof.writeMs += performance.now() - t0;
      return 0;
    } catch (e) {
      LwGpu.fail('buffer_write: ' + e.message);
      return 1;
    }
  },
  lw_js_buffer_write_host__deps: ['$LwGpu'],
  lw_js_buffer_write_host: function (h, offset, srcId, srcOffset, size) {
    try {
      const r = LwGpu.get(h, 'buffer');
      const src = LwGpu.sources[srcId];
      if (!src) throw new Error('no host source ' + srcId);
      if (src.size !== undefined && srcOffset + size > src.size) throw new Error('range past the end of host source ' + srcId);
      LwGpu.track(LwGpu.stream(r, offset, srcId, srcOffset, size));
      return 0;
    } catch (e) {
      LwGpu.fail('buffer_write_host: ' + e.message);
      return 1;
    }
  },

  // ---- pipelines and bind groups -------------------------------------------------------------------------
  lw_js_pipeline_create__deps: ['$LwGpu'],
  lw_js_pipeline_create: function (ctx, wgsl, entry, kindsPtr, n, label) {
    const d = LwGpu.device;
    const l = label ? UTF8ToString(label) : 'lw pipeline';
    try {
      const code = UTF8ToString(wgsl);
      const entries = [];
      let dynamic = -1;
      for (let i = 0; i < n; i++) {
        const k = HEAPU32[(kindsPtr >> 2) + i];
        const e = { binding: i, visibility: GPUShaderStage.COMPUTE };
        if (k === 0) e.buffer = { type: 'read-only-storage' };
        else if (k === 1) e.buffer = { type: 'storage' };
        else if (k === 2) e.buffer = { type: 'uniform' };
        else if (k === 3) { e.buffer = { type: 'uniform', hasDynamicOffset: true }; dynamic = i; }
        else throw new Error('bad binding kind ' + k);
        entries.push(e);
      }
      const rec = LwGpu.scoped('pipeline ' + l, () => {
        const module = d.createShaderModule({ code: code, label: l });
        // compilation messages carry line numbers of the expanded WGSL: keep the first error
        LwGpu.track(module.getCompilationInfo().then((info) => {
          for (const m of info.messages) {
            if (m.type === 'error') { LwGpu.fail('pipeline ' + l + ': WGSL ' + m.lineNum + ':' + m.linePos + ': ' + m.message); break; }
          }
        }));
        const bgl = d.createBindGroupLayout({ entries: entries, label: l });
        const layout = d.createPipelineLayout({ bindGroupLayouts: [bgl], label: l });
        const pipeline = d.createComputePipeline({ layout: layout, compute: { module: module, entryPoint: UTF8ToString(entry) }, label: l });
        return { kind: 'pipeline', obj: pipeline, bgl: bgl, dynamic: dynamic, ctx: ctx, label: l };
      });
      LwGpu.counters.pipelines++;
      return LwGpu.add(rec);
    } catch (e) {
      LwGpu.fail('pipeline ' + l + ': ' + e.message);
      return 0;
    }
  },
  lw_js_bind_group_create__deps: ['$LwGpu'],
  lw_js_bind_group_create: function (ctx, ph, entriesPtr, n) {
    try {
      const p = LwGpu.get(ph, 'pipeline');
      const entries = [];
      for (let i = 0; i < n; i++) {
        const base = (entriesPtr >> 3) + 3 * i; // doubles: buffer handle, offset, size
        const b = LwGpu.get(HEAPF64[base], 'buffer');
        const res = { buffer: b.obj, offset: HEAPF64[base + 1] };
        if (HEAPF64[base + 2] > 0) res.size = HEAPF64[base + 2];
        entries.push({ binding: i, resource: res });
      }
      const g = LwGpu.scoped('bind group', () => LwGpu.device.createBindGroup({ layout: p.bgl, entries: entries }));
      LwGpu.counters.bindGroups++;
      return LwGpu.add({ kind: 'group', obj: g, pipeline: ph, ctx: ctx });
    } catch (e) {
      LwGpu.fail('bind group: ' + e.message);
      return 0;
    }
  },

  // ---- recording and submission --------------------------------------------------------------------------
  lw_js_dispatch__deps: ['$LwGpu'],
  lw_js_dispatch: function (ph, gh, dynOffset, x, y, z) {
    try {
      const P = LwGpu.prof, t0 = P ? performance.now() : 0;
      const p = LwGpu.get(ph, 'pipeline');
      const g = LwGpu.get(gh, 'group');
      // skip (a RegExp or null, web/cli.mjs --skip): a measurement that leaves these kernels' dispatches out
      if (LwGpu.skip && LwGpu.skip.test(p.label)) { LwGpu.counters.skipped = (LwGpu.counters.skipped || 0) + 1; return; }
      const timed = P && P.gpu && P.n < P.cap; // its own pass with timestamps (profiling)
      if (timed) {
        LwGpu.endPass();
        LwGpu.pass = LwGpu.enc().beginComputePass({ timestampWrites: { querySet: P.qs, beginningOfPassWriteIndex: 2 * P.n, endOfPassWriteIndex: 2 * P.n + 1 } });
        P.n++;
      }
      if (!LwGpu.pass) LwGpu.pass = LwGpu.enc().beginComputePass();
      const pass = LwGpu.pass;
      pass.setPipeline(p.obj);
      if (p.dynamic >= 0) pass.setBindGroup(0, g.obj, [dynOffset]);
      else pass.setBindGroup(0, g.obj);
      pass.dispatchWorkgroups(x, y, z);
      LwGpu.counters.dispatches++;
      if (timed) LwGpu.endPass();
      if (P) { P.labels.push(p.label); P.cpu.push(performance.now() - t0); }
    } catch (e) {
      LwGpu.fail('dispatch: ' + e.message);
    }
  },
  lw_js_copy__deps: ['$LwGpu'],
  lw_js_copy: function (src, srcOffset, dst, dstOffset, size) {
    try {
      LwGpu.endPass();
      LwGpu.enc().copyBufferToBuffer(LwGpu.get(src, 'buffer').obj, srcOffset, LwGpu.get(dst, 'buffer').obj, dstOffset, size);
    } catch (e) {
      LwGpu.fail('copy: ' + e.message);
    }
  },
  lw_js_submit__deps: ['$LwGpu'],
  lw_js_submit: function () {
    try {
      const t0 = LwGpu.prof ? performance.now() : 0;
      LwGpu.submit();
      if (LwGpu.prof) LwGpu.prof.submitMs += performance.now() - t0;
      return 0;
    } catch (e) {
      LwGpu.fail('submit: ' + e.message);
      return 1;
    }
  },
  lw_js_read__deps: ['$LwGpu'],
  lw_js_read: function (h, offset, ptr, size) {
    try {
      const b = LwGpu.get(h, 'buffer');
      const st = LwGpu.stagingGet(size);
      LwGpu.endPass();
      LwGpu.enc().copyBufferToBuffer(b.obj, offset, st.buf, 0, size);
      LwGpu.submit();
      // lastRead: this read alone, for hosts that wait on one step while later ones run (GpuModel.chain)
      LwGpu.lastRead = LwGpu.track(st.buf.mapAsync(GPUMapMode.READ, 0, size).then(() => {
        // HEAPU8 is looked up now: the heap may have grown since the call
        HEAPU8.set(new Uint8Array(st.buf.getMappedRange(0, size)), ptr);
        st.buf.unmap();
        LwGpu.staging.push(st);
        LwGpu.counters.bytesRead += size;
      }));
      return 0;
    } catch (e) {
      LwGpu.fail('read: ' + e.message);
      return 1;
    }
  },
  lw_js_pending__deps: ['$LwGpu'],
  lw_js_pending: function () {
    return LwGpu.pending;
  },
  lw_js_error__deps: ['$LwGpu'],
  lw_js_error: function (ctx, dst, cap) {
    const e = LwGpu.error || (LwGpu.contextError(ctx) && LwGpu.contextError(ctx).message);
    if (!e) return 0;
    stringToUTF8(e, dst, cap);
    return 1;
  },
  lw_js_context_destroy__deps: ['$LwGpu'],
  lw_js_context_destroy: function (ctx) {
    try {
      LwGpu.destroyContext(ctx);
    } catch (e) {
      LwGpu.fail('destroy: ' + e.message);
    }
  },
};

mergeInto(LibraryManager.library, LibraryLwGpu);
