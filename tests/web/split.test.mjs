// Split GGUF (llama.cpp's gguf-split: model-00001-of-00003.gguf, ...) through the browser package's sources
// (web/lw-sources.mjs splitSource): parts written in gguf-split's layout by tests/web/gguf-split.mjs from
// the shared models are presented to the loader as one GGUF, which for these files is the original file
// byte for byte, whatever order the parts come in; the names of every part from the URL of any part; parts
// missing, given twice, from two different splits or cut off are refused with a typed error; and on a real
// adapter (Dawn) a split stories260K opened from Blobs (Llamaweb.open with an array) decodes on WebGPU as
// the whole file does on the CPU engine. Run: LW_WASM_DIR=... [VK_ICD_FILENAMES=...] node --test tests/web/split.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { bytesSource } from '../../web/lw-model.mjs';
import { splitSource, splitUrls, parseGgufHeader } from '../../web/lw-sources.mjs';
import { Llamaweb } from '../../web/llamaweb.mjs';
import { ggufSplit } from './gguf-split.mjs';

const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const models = ['stories260K', 'llama-2-tiny-random'].map((m) => path.join(shared, 'models', m + '.gguf')).filter(existsSync);
const noModels = models.length ? false : `no ${shared}/models (the shared test models)`;
if (noModels) console.log('SKIP: ' + noModels);
const stories = path.join(shared, 'models/stories260K.gguf');

const named = (p) => ({ ...bytesSource(p.bytes), name: p.name });
const shuffled = (a, seed) => a.map((x, i) => [(i * 7919 + seed * 104729) % 1009, x]).sort((p, q) => p[0] - q[0]).map((p) => p[1]);

test('split URLs: every part from any part\'s URL, query kept; other names are not split', () => {
  assert.deepEqual(splitUrls('http://h/m/x-00002-of-00003.gguf?download=1'),
    ['http://h/m/x-00001-of-00003.gguf?download=1', 'http://h/m/x-00002-of-00003.gguf?download=1', 'http://h/m/x-00003-of-00003.gguf?download=1']);
  assert.equal(splitUrls('http://h/x-00001-of-00001.gguf'), null, 'one part: a plain file');
  assert.equal(splitUrls('http://h/x.gguf'), null);
  assert.equal(splitUrls('http://h/x-0001-of-0003.gguf'), null, 'llama.cpp writes 5 digits');
});

test('gguf-split parts read back as the original file, byte for byte, in any order', { skip: noModels }, async () => {
  for (const file of models) {
    const bytes = new Uint8Array(readFileSync(file));
    const h = parseGgufHeader(bytes);
    for (const per of [1, 7, Math.ceil(h.tensors.length / 2)]) {
      const parts = ggufSplit(bytes, per, 'm');
      assert.ok(parts.length >= 2);
      assert.equal(parts[1].name, `m-00002-of-${String(parts.length).padStart(5, '0')}.gguf`);
      // the loader sees one file: header from memory, tensor data from the parts
      const src = await splitSource(shuffled(parts, per).map(named));
      assert.equal(src.size, bytes.length);
      assert.equal(src.parts, parts.length);
      assert.equal(src.name, 'm.gguf');
      const all = await src.read(0, src.size);
      assert.ok(Buffer.from(all).equals(Buffer.from(bytes)), `${path.basename(file)} in ${parts.length} parts: not the original bytes`);
      // and piecewise, as the loader reads it (the head, then each tensor on its own)
      const m = parseGgufHeader(await src.read(0, h.dataStart));
      assert.deepEqual(m.tensors.map((t) => [t.name, t.offset]), h.tensors.map((t) => [t.name, t.offset]));
      const t = h.tensors[h.tensors.length - 1];
      const last = await src.read(h.dataStart + t.offset, bytes.length - h.dataStart - t.offset);
      assert.ok(Buffer.from(last).equals(Buffer.from(bytes.subarray(h.dataStart + t.offset))));
    }
    console.log(`# ${path.basename(file)}: ${h.tensors.length} tensors; 2, 7 and ${h.tensors.length} parts read back identical`);
  }
});

test('split GGUF refused: a missing part, a part twice, mixed splits, a part cut off', { skip: noModels }, async () => {
  const bytes = new Uint8Array(readFileSync(models[0]));
  const parts = ggufSplit(bytes, 10, 'a'); // stories260K: 48 tensors in 5 parts
  const n = parts.length;
  const code = (c, re) => (e) => { assert.equal(e.code, c, e.stack); assert.match(e.message, re); return true; };
  await assert.rejects(splitSource(parts.slice(1).map(named)), code('BAD_INPUT', new RegExp(`of ${n} parts: ${n - 1} given.*part 1 missing`)));
  await assert.rejects(splitSource([...parts.slice(0, n - 1), parts[1]].map(named)), code('BAD_INPUT', /given twice/));
  const other = ggufSplit(bytes, 12, 'b'); // 4 parts
  await assert.rejects(splitSource([...parts.slice(0, 2), ...other.slice(2)].map(named)), code('UNSUPPORTED_MODEL', /disagree on split.count/));
  const same = ggufSplit(bytes, 10, 'c');
  await assert.rejects(splitSource([...parts.slice(0, 2), same[1], ...parts.slice(3)].map(named)), code('BAD_INPUT', /given twice/));
  await assert.rejects(splitSource([named({ name: 'x.gguf', bytes })]).then((s) => {
    assert.equal(s.size, bytes.length, 'one unsplit file is itself');
    return splitSource([named({ name: 'x.gguf', bytes }), named(parts[1])]);
  }), code('UNSUPPORTED_MODEL', /x\.gguf has no split.count/));
  // part 3 cut off inside its last tensor: that tensor's read fails instead of running into part 4's bytes
  const cut = parts.map((p, i) => (i === 2 ? { name: p.name, bytes: p.bytes.subarray(0, p.bytes.length - 100) } : p));
  const src = await splitSource(cut.map(named));
  const h = parseGgufHeader(bytes), t = h.tensors[29], next = h.tensors[30];
  await assert.rejects(src.read(h.dataStart + t.offset, next.offset - t.offset), /run past the end of a-00003-of-00005\.gguf's data \(is a part cut off\?\)/);
  const cutHeader = parts.map((p, i) => (i === 1 ? { name: p.name, bytes: p.bytes.subarray(0, 40) } : p));
  await assert.rejects(splitSource(cutHeader.map(named)), code('UNSUPPORTED_MODEL', /header is cut off/));
});

// ---- on a real adapter: the package's open() with the parts as Blobs ----
const ctx = noModels || !existsSync(stories) ? { skip: 'no stories260K' } : await setup();
const gpuSkip = ctx.skip || false;
if (gpuSkip && !noModels) console.log('SKIP: ' + gpuSkip);
after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100)); // Dawn keeps the process alive

test('a split stories260K opened as Blobs decodes as the whole file; a lone part or a cut-off part is refused', { skip: gpuSkip, timeout: 120000 }, async () => {
  const lw = new Llamaweb(ctx.Module, ctx.device);
  const bytes = new Uint8Array(readFileSync(stories));
  // WebGPU for the split model (its tensors streamed from the parts into GPU buffers), the CPU engine for
  // the rest (the same source; each WebGPU open costs seconds of pipeline compiles on SwiftShader)
  const run = async (what, device = 'cpu') => {
    const m = await lw.open(what, { nCtx: 32, device });
    try {
      return { r: await m.generate('Once upon a time', { maxTokens: 8 }), info: m.info, memory: m.memory() };
    } finally {
      m.free();
    }
  };
  const whole = await run(new Blob([bytes]));
  const parts = ggufSplit(bytes, 16, 'stories260K');
  const files = shuffled(parts, 3).map((p) => new File([p.bytes], p.name));
  const split = await run(files, 'webgpu');
  console.log(`# stories260K in ${parts.length} parts: ${JSON.stringify(split.r.text)}; whole: ${JSON.stringify(whole.r.text)}`);
  assert.deepEqual(split.r.tokens, whole.r.tokens);
  assert.equal(split.info.n_layer, whole.info.n_layer);
  // memory you can see: the model's GPU buffers by kind (the glue's table) against the plan's own sums
  const mem = split.memory, g = mem.gpu;
  console.log(`# model.memory() on WebGPU: ${JSON.stringify(mem)}`);
  assert.equal(mem.device, 'webgpu');
  assert.equal(g.weights, split.info.weightBytes, 'weights: the plan\'s weight bytes');
  assert.equal(g.kv, split.info.kvBytes, 'KV: the plan\'s KV bytes');
  assert.ok(g.activations >= split.info.actBytes && g.params > 0, 'activations and scratch, parameters');
  assert.equal(g.total, g.weights + g.kv + g.activations + g.params);
  assert.equal(g.buffers, split.info.buffers, 'every buffer of the plan, none of another model');
  assert.ok(mem.wasmHeap <= 64 << 20, `wasm heap ${mem.wasmHeap} <= 64 MiB`);
  assert.ok(mem.load.peakInFlight >= 1 && mem.load.bytes === g.weights, JSON.stringify(mem.load));
  assert.equal(whole.memory.device, 'cpu');
  assert.equal(whole.memory.cpu.weights, whole.info.weightBytes);
  assert.ok(whole.memory.wasmHeap > whole.memory.cpu.weights, 'the CPU engine\'s weights live in the heap');
  assert.ok(whole.r.text.startsWith(', there was a little'), whole.r.text);
  await assert.rejects(lw.open(files.find((f) => f.name.includes('-00002-'))), (e) => {
    assert.equal(e.code, 'BAD_INPUT');
    assert.match(e.message, /stories260K-00002-of-00003\.gguf is part 2 of a split GGUF of 3 parts: open all of them together/);
    return true;
  });
  // a part cut inside its last tensor is refused: a middle one by the loader's layout check (its tensor would
  // overlap the next part's first), the last one as a file shorter than its tensors (the split source's own
  // read check, for tensors the loader did not see overlap, is the test above)
  const cutPart = (k) => files.map((f) => (f.name.includes(`-0000${k}-`) ? new File([f.slice(0, f.size - 64)], f.name) : f));
  for (const [k, re] of [[2, /overlap/], [3, /passes the end of the file/]]) {
    await assert.rejects(lw.open(cutPart(k), { nCtx: 32, retries: 0, device: 'webgpu' }), (e) => {
      console.log(`# part ${k} cut off: ${e.code}: ${e.message}`);
      assert.equal(e.code, 'UNSUPPORTED_MODEL');
      assert.match(e.message, re);
      return true;
    });
  }
  assert.deepEqual((await run(files)).r.tokens, whole.r.tokens, 'the page goes on working');
});
