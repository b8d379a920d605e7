// Models larger than 4 GiB and bounded streaming through the real wasm32 build, without a GPU: a fake
// WebGPU device (it validates every buffer, write and binding against its limits and keeps no bytes) under
// the project's glue (web/lw-gpu.js), and a synthetic GGUF whose bytes are made on demand (each chunk read
// is stamped with its own file offset, so the writes that reach the fake say where they came from). Checks:
// header-only load past 4 GiB (src/model/model.c), 64-bit offsets through C, wasm and JS, buffers of at most
// maxBufferSize and bindings of at most maxStorageBufferBindingSize, every weight byte written exactly once,
// reads in file order with at most N chunks in flight, retries, a failed read failing open() with a code and
// freeing everything; a split GGUF's parts (web/lw-sources.mjs splitSource over 7 parts in gguf-split's
// layout) loading as the whole file does, past 4 GiB; and, on a real adapter (Dawn), a model split over many
// small buffers and bindings decodes exactly as the unsplit one.
// Run: LW_WASM_DIR=... [VK_ICD_FILENAMES=...] node --test tests/web/big.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { loadModule, setup, repoRoot } from '../../web/lw-node.mjs';
import { GpuModel, LlamawebError, fileSource } from '../../web/lw-model.mjs';
import { splitSource } from '../../web/lw-sources.mjs';
import { ggufSplitLayout } from './gguf-split.mjs';

const M = await loadModule();
const skip = M ? false : 'build/wasm/llamaweb-wasm.* not built (scripts/build-wasm.sh)';
if (skip) console.log('SKIP: ' + skip);

// ---- a GGUF v3 header in JS (llama architecture, no tokenizer: ids only) ----
const T = { F32: 0, Q8_0: 8 };
const typeBytes = (type, n) => (type === T.F32 ? 4 * n : (n / 32) * 34);

function ggufHeader(kv, tensors) {
  const parts = [];
  const u32 = (v) => { const b = new Uint8Array(4); new DataView(b.buffer).setUint32(0, v, true); parts.push(b); };
  const u64 = (v) => { const b = new Uint8Array(8); new DataView(b.buffer).setBigUint64(0, BigInt(v), true); parts.push(b); };
  const f32 = (v) => { const b = new Uint8Array(4); new DataView(b.buffer).setFloat32(0, v, true); parts.push(b); };
  const str = (s) => { const b = new TextEncoder().encode(s); u64(b.length); parts.push(b); };
  parts.push(new TextEncoder().encode('GGUF'));
  u32(3);
  u64(tensors.length);
  u64(kv.length);
  for (const [k, type, v] of kv) {
    str(k);
    u32(type);
    if (type === 4) u32(v);
    else if (type === 6) f32(v);
    else str(v);
  }
  let off = 0;
  for (const t of tensors) {
    str(t.name);
    u32(t.ne.length);
    for (const n of t.ne) u64(n);
    u32(t.type);
    u64(off);
    t.rel = off;
    t.bytes = typeBytes(t.type, t.ne.reduce((a, b) => a * b, 1));
    off += Math.ceil(t.bytes / 32) * 32;
  }
  let len = parts.reduce((a, p) => a + p.length, 0);
  const head = new Uint8Array(Math.ceil(len / 32) * 32);
  len = 0;
  for (const p of parts) { head.set(p, len); len += p.length; }
  return { head, dataBytes: off };
}

// A llama-shaped model: E embedding, F feed-forward, L blocks, V vocabulary, Q8_0 matrices.
function llamaModel({ E, F, L, V, heads, kvHeads }) {
  const kd = (E / heads) * kvHeads;
  const kv = [['general.architecture', 8, 'llama'], ['llama.context_length', 4, 4096], ['llama.embedding_length', 4, E],
    ['llama.block_count', 4, L], ['llama.feed_forward_length', 4, F], ['llama.attention.head_count', 4, heads],
    ['llama.attention.head_count_kv', 4, kvHeads], ['llama.attention.layer_norm_rms_epsilon', 6, 1e-5]];
  const tensors = [{ name: 'token_embd.weight', ne: [E, V], type: T.Q8_0 }, { name: 'output_norm.weight', ne: [E], type: T.F32 },
    { name: 'output.weight', ne: [E, V], type: T.Q8_0 }];
  for (let l = 0; l < L; l++) {
    const b = `blk.${l}.`;
    tensors.push({ name: b + 'attn_norm.weight', ne: [E], type: T.F32 }, { name: b + 'attn_q.weight', ne: [E, E], type: T.Q8_0 },
      { name: b + 'attn_k.weight', ne: [E, kd], type: T.Q8_0 }, { name: b + 'attn_v.weight', ne: [E, kd], type: T.Q8_0 },
      { name: b + 'attn_output.weight', ne: [E, E], type: T.Q8_0 }, { name: b + 'ffn_norm.weight', ne: [E], type: T.F32 },
      { name: b + 'ffn_gate.weight', ne: [E, F], type: T.Q8_0 }, { name: b + 'ffn_up.weight', ne: [E, F], type: T.Q8_0 },
      { name: b + 'ffn_down.weight', ne: [F, E], type: T.Q8_0 });
  }
  const { head, dataBytes } = ggufHeader(kv, tensors);
  return { head, tensors, dataStart: head.length, size: head.length + dataBytes };
}

// A host source over the model: the header's bytes, then zeros with every read's first and last 8 bytes
// stamped with their file offsets. hooks.fail(off, attempt) -> true makes that read throw.
function stampedSource(model, hooks = {}) {
  const s = { size: model.size, reads: [], outstanding: 0, maxOutstanding: 0, attempts: new Map() };
  const make = (off, len) => {
    const b = new Uint8Array(len);
    if (off < model.dataStart) {
      b.set(model.head.subarray(off, Math.min(model.dataStart, off + len)));
      return b;
    }
    if (len >= 16) {
      const dv = new DataView(b.buffer);
      dv.setFloat64(0, off, true);
      dv.setFloat64(len - 8, off + len - 8, true);
    }
    return b;
  };
  s.readSync = (off, len) => make(off, len);
  s.read = async (off, len) => {
    const a = (s.attempts.get(off) || 0) + 1;
    s.attempts.set(off, a);
    await new Promise((r) => setImmediate(r)); // reads complete later, out of the caller's turn
    if (hooks.fail && hooks.fail(off, a)) throw new Error(`injected read failure at ${off}`);
    if (off >= model.dataStart) {
      s.reads.push(off);
      s.outstanding++;
      s.maxOutstanding = Math.max(s.maxOutstanding, s.outstanding);
    }
    return make(off, len);
  };
  return s;
}

// ---- a fake WebGPU device: limits enforced, writes decoded, nothing stored ----
function fakeDevice(limits, source) {
  const violations = [], writes = [];
  let live = 0, created = 0;
  const bad = (m) => { if (violations.length < 20) violations.push(m); };
  const device = {
    limits, features: new Set(), queue: null, lost: new Promise(() => {}),
    addEventListener() {},
    pushErrorScope() {},
    popErrorScope: async () => null,
    createBuffer({ size, label }) {
      if (size > limits.maxBufferSize) bad(`buffer ${label}: ${size} > maxBufferSize`);
      live++;
      created++;
      const buf = { size, label, destroyed: false, writes: [],
        destroy() { if (!this.destroyed) { this.destroyed = true; live--; } },
        mapAsync: async () => {}, getMappedRange: (o, n) => new ArrayBuffer(n), unmap() {} };
      return buf;
    },
    createShaderModule: () => ({ getCompilationInfo: async () => ({ messages: [] }) }),
    createBindGroupLayout: (d) => ({ entries: d.entries }),
    createPipelineLayout: () => ({}),
    createComputePipeline: () => ({}),
    createBindGroup({ layout, entries }) {
      for (const e of entries) {
        const { buffer, offset = 0 } = e.resource, size = e.resource.size ?? buffer.size - offset;
        const type = layout.entries[e.binding].buffer.type;
        const maxB = type === 'uniform' ? limits.maxUniformBufferBindingSize : limits.maxStorageBufferBindingSize;
        if (size > maxB) bad(`binding ${buffer.label} +${offset}: ${size} > ${type} binding limit ${maxB}`);
        if (offset + size > buffer.size) bad(`binding ${buffer.label}: ${offset}+${size} past ${buffer.size}`);
        if (offset % 256) bad(`binding ${buffer.label}: offset ${offset} unaligned`);
      }
      return {};
    },
    createCommandEncoder: () => ({
      beginComputePass: () => ({ setPipeline() {}, setBindGroup() {}, dispatchWorkgroups() {}, end() {} }),
      copyBufferToBuffer() {}, finish: () => ({}),
    }),
  };
  device.queue = {
    submit() {},
    onSubmittedWorkDone: async () => {},
    writeBuffer(buf, off, data, dataOff, size) {
      if (buf.destroyed) bad(`write into destroyed ${buf.label}`);
      if (off % 4 || size % 4 || off + size > buf.size) bad(`write ${buf.label} +${off} ${size} (size ${buf.size})`);
      if (size < 16 || !buf.label.startsWith('weights')) return;
      const dv = new DataView(data, dataOff, size);
      const src = dv.getFloat64(0, true);
      if (dv.getFloat64(size - 8, true) !== src + size - 8) bad(`write ${buf.label} +${off}: stamps disagree`);
      writes.push({ buf, off, src, size });
      source.outstanding--;
    },
  };
  return { device, violations, writes, live: () => live, created: () => created };
}

const FAKE_LIMITS = { maxBufferSize: 1 << 30, maxStorageBufferBindingSize: 128 << 20, maxUniformBufferBindingSize: 65536,
  minStorageBufferOffsetAlignment: 256, minUniformBufferOffsetAlignment: 256, maxStorageBuffersPerShaderStage: 10,
  maxComputeWorkgroupStorageSize: 32768, maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupSizeX: 256,
  maxComputeWorkgroupsPerDimension: 65535 };

// The glue's globals where no WebGPU implementation defined them.
globalThis.GPUBufferUsage ??= { MAP_READ: 1, MAP_WRITE: 2, COPY_SRC: 4, COPY_DST: 8, INDEX: 16, VERTEX: 32, UNIFORM: 64,
  STORAGE: 128, INDIRECT: 256, QUERY_RESOLVE: 512 };
globalThis.GPUShaderStage ??= { VERTEX: 1, FRAGMENT: 2, COMPUTE: 4 };
globalThis.GPUMapMode ??= { READ: 1, WRITE: 2 };

function useFake(model, hooks) {
  const source = stampedSource(model, hooks);
  const fake = fakeDevice(FAKE_LIMITS, source);
  M.lwGpu.init(fake.device, { vendor: 'fake', architecture: 'fake', device: 'fake', description: 'fake' });
  M.lwGpu.error = null;
  return { source, fake };
}

// Every data byte of the file reached exactly one place, in one write per chunk.
function checkCoverage(model, writes) {
  const w = [...writes].sort((a, b) => a.src - b.src);
  let at = model.dataStart;
  for (const x of w) {
    assert.equal(x.src, at, `bytes from ${at} are missing or written twice (next write from ${x.src})`);
    at += x.size;
  }
  assert.equal(at, model.size, 'every tensor byte was written');
  const byBuf = new Map();
  for (const x of writes) (byBuf.get(x.buf) || byBuf.set(x.buf, []).get(x.buf)).push(x);
  for (const [b, ws] of byBuf) {
    ws.sort((p, q) => p.off - q.off);
    for (let i = 1; i < ws.length; i++) assert.ok(ws[i].off >= ws[i - 1].off + ws[i - 1].size, `${b.label}: writes overlap`);
  }
  return byBuf.size;
}

const BIG = { E: 4096, F: 14336, L: 20, V: 32000, heads: 32, kvHeads: 8 }; // the 8B's blocks, 20 of them: 4.9 GB

test('a model over 4 GiB plans and streams through the wasm32 build (fake device: 1 GiB buffers, 128 MiB bindings)', { skip }, async () => {
  const model = llamaModel(BIG);
  assert.ok(model.size > 2 ** 32 + 2 ** 29, `${model.size} bytes`);
  const { source, fake } = useFake(model);
  const g = await GpuModel.open(M, source, { nCtx: 64, maxInFlight: 3 });
  try {
    assert.deepEqual(fake.violations, []);
    const info = g.info();
    assert.equal(info.n_layer, BIG.L);
    assert.ok(info.weightBytes >= model.size - model.dataStart, `weightBytes ${info.weightBytes}`);
    const nBufs = checkCoverage(model, fake.writes);
    assert.ok(nBufs >= 5, `${nBufs} weight buffers`);
    assert.ok(Math.max(...fake.writes.map((x) => x.src + x.size)) > 2 ** 32, 'bytes past 4 GiB were written');
    // bounded: at most 3 chunks read and not yet written; reads in file order
    assert.ok(source.maxOutstanding <= 3, `${source.maxOutstanding} chunks in flight`);
    assert.ok(g.loadStats.peakInFlight <= 3 && g.loadStats.peakInFlight >= 2, `peak ${g.loadStats.peakInFlight}`);
    for (let i = 1; i < source.reads.length; i++) assert.ok(source.reads[i] > source.reads[i - 1], 'reads in file order');
    assert.equal(g.loadStats.bytes, model.size - model.dataStart);
    console.log(`# ${(model.size / 2 ** 30).toFixed(2)} GiB: ${nBufs} weight buffers, ${fake.writes.length} chunks, ` +
      `peak ${g.loadStats.peakInFlight} in flight, ${g.loadStats.ms.toFixed(0)} ms, peak JS heap ${(g.loadStats.peakJsHeap / 2 ** 20).toFixed(0)} MiB`);
  } finally {
    g.free();
  }
  assert.equal(fake.live(), 0, 'every buffer destroyed');
});

test('a split model over 4 GiB (gguf-split parts) streams as the whole file: every byte once, offsets past 4 GiB', { skip }, async () => {
  const model = llamaModel(BIG);
  const { source, fake } = useFake(model);
  // 7 parts of at most 30 tensors, in gguf-split's layout (the last one starts past 4 GiB); a part's data byte d is the model's byte from + d,
  // so tensor reads go to the stamped source (its counters see them), header reads are made on the spot
  const layout = ggufSplitLayout(model.head, model.size, 30, 'big');
  const parts = layout.map((p) => ({
    name: p.name, size: p.size,
    read: async (off, len) => {
      if (off >= p.dataStart) return source.read(p.from + off - p.dataStart, len);
      const b = new Uint8Array(len), h = Math.min(len, p.dataStart - off);
      b.set(p.head.subarray(off, off + h));
      if (len > h) b.set(source.readSync(p.from, len - h), h);
      return b;
    },
  }));
  const split = await splitSource([...parts].reverse());
  assert.equal(split.parts, 7);
  assert.equal(split.size, model.size, 'the parts present the whole file');
  assert.ok(layout[6].from > 2 ** 32, `the last part starts at ${layout[6].from}`);
  // the merged header is the model's own; C reads it synchronously in 64 KiB blocks (past the header, the
  // stamped bytes are the file's), the tensors stream through the split source from the parts
  const merged = await split.read(0, model.dataStart);
  assert.ok(Buffer.from(merged).equals(Buffer.from(model.head)), 'the merged header is the whole file\'s');
  const readSync = (off, len) => {
    const b = source.readSync(off, len);
    if (off < merged.length) b.set(merged.subarray(off, Math.min(merged.length, off + len)));
    return b;
  };
  const g = await GpuModel.open(M, { size: split.size, read: split.read, readSync }, { nCtx: 64, maxInFlight: 3 });
  try {
    assert.deepEqual(fake.violations, []);
    assert.equal(g.info().n_layer, BIG.L);
    const nBufs = checkCoverage(model, fake.writes);
    assert.ok(Math.max(...fake.writes.map((x) => x.src + x.size)) > 2 ** 32, 'bytes past 4 GiB were written');
    assert.ok(source.maxOutstanding <= 3, `${source.maxOutstanding} chunks in flight`);
    for (let i = 1; i < source.reads.length; i++) assert.ok(source.reads[i] > source.reads[i - 1], 'reads in file order');
    console.log(`# split: ${layout.map((p) => `${p.name} ${(p.size / 2 ** 30).toFixed(2)} GiB`).join(', ')}: ` +
      `${nBufs} weight buffers, every byte once`);
  } finally {
    g.free();
  }
  assert.equal(fake.live(), 0, 'every buffer destroyed');
});

const SMALL = { E: 256, F: 512, L: 2, V: 512, heads: 4, kvHeads: 2 };

test('a failed read is retried with backoff; one that keeps failing fails open() with LW_ERR_READ and frees everything', { skip }, async () => {
  const model = llamaModel(SMALL);
  M.lwGpu.chunkBytes = 16 << 10; // many chunks
  const L0 = { ...M.lwGpu.load };
  M.lwGpu.load.retryDelayMs = 1;
  try {
    const bad = model.dataStart + 5 * (16 << 10);
    // transient: the 6th chunk fails twice, then reads
    {
      const { source, fake } = useFake(model, { fail: (off, a) => off === bad && a <= 2 });
      const g = await GpuModel.open(M, source, { nCtx: 64 });
      assert.equal(g.loadStats.retries, 2);
      checkCoverage(model, fake.writes);
      g.free();
      assert.equal(fake.live(), 0);
    }
    // permanent: typed error, nothing left, later reads stop, and the next open works
    {
      // other chunks keep streaming while one waits out its backoff (a busy machine's timers can let them reach
      // the end of this small file), so "reading stopped" is: nothing starts after the last try failed but the
      // chunks already in flight then, and nothing at all once open() has rejected
      let readsAtFailure = -1;
      const { source, fake } = useFake(model, { fail: (off, a) => {
        if (off !== bad) return false;
        if (a === 3) readsAtFailure = source.reads.length;
        return true;
      } });
      await assert.rejects(GpuModel.open(M, source, { nCtx: 64, retries: 2 }), (e) => {
        assert.ok(e instanceof LlamawebError, e.stack);
        assert.equal(e.code, 'LW_ERR_READ');
        assert.match(e.message, /failed after 3 tries: injected read failure/);
        return true;
      });
      assert.equal(source.attempts.get(bad), 3);
      assert.ok(fake.created() > 0);
      assert.equal(fake.live(), 0, 'the failed open destroyed its buffers');
      const readsAtReject = source.reads.length;
      assert.ok(readsAtReject - readsAtFailure <= M.lwGpu.load.maxInFlight - 1,
        `reading stopped at the failure: ${readsAtReject - readsAtFailure} reads after it`);
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(source.reads.length, readsAtReject, 'no read after open() rejected');
      assert.equal(M.lwGpu.error, null, 'the page-wide error stays clear');
    }
    {
      const { source, fake } = useFake(model);
      const g = await GpuModel.open(M, source, { nCtx: 64 });
      checkCoverage(model, fake.writes);
      g.free();
    }
  } finally {
    M.lwGpu.chunkBytes = 8 << 20;
    Object.assign(M.lwGpu.load, L0);
  }
});

// ---- on a real adapter: small buffers and bindings give the same tokens ----
const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const real = skip || !existsSync(stories) ? null : await setup();
const realSkip = skip || (!existsSync(stories) && 'no ../shared') || (real && real.skip) || false;

test('stories260K split over 16 KiB bindings in 128 KiB buffers decodes as unsplit', { skip: realSkip }, async () => {
  const R = real.Module;
  const run = async () => {
    const g = await GpuModel.open(R, fileSource(stories), { nCtx: 64, nBatch: 8 });
    try {
      const out = [];
      let next = await g.decode(g.tokenize('Once upon a time', true), 'logits');
      const logits0 = next.logits;
      next = next.id;
      for (let i = 0; i < 6; i++) {
        out.push(next);
        next = await g.decode([next]);
      }
      return { out, logits0, buffers: g.info().buffers };
    } finally {
      g.free();
    }
  };
  const a = await run();
  R.lwGpu.capLimits({ maxBufferSize: 128 << 10, maxStorageBufferBindingSize: 16 << 10 });
  let b;
  try {
    b = await run();
  } finally {
    R.lwGpu.capLimits(null);
  }
  assert.deepEqual(b.out, a.out);
  assert.deepEqual(b.logits0, a.logits0, 'the same logits');
  assert.ok(b.buffers > a.buffers + 8, `${b.buffers} buffers split, ${a.buffers} not`);
  console.log(`# stories260K: ${a.buffers} buffers unsplit, ${b.buffers} split; tokens ${a.out.join(' ')}`);
});

test('verifyUpload reads every streamed weight byte back from the GPU (split buffers) and fails open() on a difference', { skip: realSkip }, async () => {
  const R = real.Module;
  R.lwGpu.capLimits({ maxBufferSize: 128 << 10, maxStorageBufferBindingSize: 16 << 10 });
  try {
    const src = fileSource(stories);
    const g = await GpuModel.open(R, src, { nCtx: 64, nBatch: 8, verifyUpload: true });
    const c = g.uploadCheck;
    g.free();
    assert.equal(c.mismatches, 0);
    assert.ok(c.writes > 8 && c.bytes > 0.9 * src.size, `${c.writes} writes, ${c.bytes} bytes checked of ${src.size}`);
    assert.equal(R.lwGpu.uploadLog.length, 0, 'the log is taken');
    // a source whose second read of one range differs in one byte (as a GPU buffer holding the wrong bytes would)
    let reads = 0;
    const flip = 200000 + (src.size % 1000);
    const seen = new Set();
    const odd = { size: src.size, readSync: src.readSync, read: async (off, len) => { // the header: readSync
      const b = await src.read(off, len);
      reads++;
      if (off <= flip && flip < off + len) {
        if (seen.has(off)) b[flip - off] ^= 0x5a; // the re-read, not the upload
        seen.add(off);
      }
      return b;
    } };
    await assert.rejects(GpuModel.open(R, odd, { nCtx: 64, nBatch: 8, verifyUpload: true }), (e) => {
      assert.ok(e instanceof LlamawebError, String(e));
      assert.match(e.message, /differs from the file in 1 chunk\(s\), the first at file offset \d+/);
      return true;
    });
    assert.ok(reads > c.writes, 'the check read the source again');
    console.log(`# verifyUpload: ${c.writes} writes, ${c.bytes} bytes read back and equal; a flipped byte at ${flip} caught`);
  } finally {
    R.lwGpu.capLimits(null);
  }
});

// Dawn for Node may keep the process alive (web/lw-node.mjs)
after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100));
