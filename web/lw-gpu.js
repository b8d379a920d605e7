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
    removeSource: function (id) { LwGpu.sources[id] = null; },

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

    stream: async function (buf, offset, src, srcOffset, size) {
      let done = 0;
      const step = Math.max(4, LwGpu.chunkBytes - (LwGpu.chunkBytes % 4)); // keeps every offset 4-aligned
      while (done < size) {
        const len = Math.min(step, size - done);
        const bytes = await src.read(srcOffset + done, len);
        if (!bytes || bytes.length !== len) throw new Error('host source returned ' + (bytes ? bytes.length : 0) + ' of ' + len + ' bytes');
        LwGpu.write(buf, offset + done, bytes);
        done += len;
      }
      LwGpu.counters.bytesStreamed += size;
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
    const v = LwGpu.device.limits[UTF8ToString(name)];
    return v === undefined ? -1 : v;
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
      LwGpu.track(LwGpu.stream(r.obj, offset, src, srcOffset, size));
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
      LwGpu.track(st.buf.mapAsync(GPUMapMode.READ, 0, size).then(() => {
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
  lw_js_error: function (dst, cap) {
    if (!LwGpu.error) return 0;
    stringToUTF8(LwGpu.error, dst, cap);
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
