// Long generations on WebGPU (Node + Dawn) through a full context, with counters that must not grow:
// stories260K (../shared; else a synthetic llama from `llamaweb synth`) in a 256-cell context (CI: 64); each
// generate() runs until it stops with reason 'context' (the clear stop), then the context-full policy of
// llama.cpp's examples: keep the first n_keep ids, drop half of the rest, and generate on from the kept ids
// (reusePrefix: the kept first n_keep cells stay, the moved half is decoded again at its new cells).
// Counters at the first shift and at the end: GPU objects created (buffers, staging buffers, pipelines,
// bind groups: none after the first generation), the wasm heap's size, and the JS heap after a full
// garbage collection (within 2 MiB). CI: 120 tokens; LW_TEST_SLOW=1: 10,000.
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/long-run.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { Llamaweb } from '../../web/llamaweb.mjs';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');
const ctx = await setup();
const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const cli = ['build/release', 'build'].map((d) => path.join(repoRoot(), d, 'llamaweb')).concat(process.env.LW_CLI || []).find((p) => p && existsSync(p));
// SwiftShader compiles every pipeline slowly (~30 s for a model): there only with LW_TEST_SLOW=1 (lavapipe runs it)
const slowDriver = !ctx.skip && /swiftshader/i.test(ctx.info && ctx.info.architecture || '') && process.env.LW_TEST_SLOW !== '1';
const skip = ctx.skip || (slowDriver && 'SwiftShader (slow pipeline compilation; LW_TEST_SLOW=1 runs it)') || (!existsSync(stories) && !cli && 'neither ../shared/models/stories260K.gguf nor a native CLI (synth)') || false;
if (skip) console.log('SKIP: ' + skip);
const tmp = mkdtempSync(path.join(process.env.LW_TMP || os.tmpdir(), 'lw-long-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

const slow = process.env.LW_TEST_SLOW && process.env.LW_TEST_SLOW !== '0';
const TARGET = slow ? 10000 : 120, N_CTX = slow ? 256 : 64, N_KEEP = 16; // CI: a few seconds, 3+ shifts

function modelBytes() {
  if (existsSync(stories)) return { bytes: readFileSync(stories), name: 'stories260K' };
  const file = path.join(tmp, 'tiny.gguf');
  execFileSync(cli, ['synth', '--preset', 'tiny', '--type', 'q8_0', '--vocab', 'builtin', '--layers', '2', '-o', file]);
  return { bytes: readFileSync(file), name: 'synthetic tiny llama' };
}

const objects = (c) => c.buffers + c.stagingBuffers + c.pipelines + c.bindGroups + c.querySets;
const jsHeap = () => { gc(); gc(); return process.memoryUsage().heapUsed; };

test(`${TARGET} sampled tokens through full-context stops and context shifts: no growth`, { skip, timeout: 1800000 }, async () => {
  const { bytes, name } = modelBytes();
  const M = ctx.Module;
  const lw = new Llamaweb(M, ctx.device, { device: 'webgpu' });
  const m = await lw.open(new Blob([bytes]), { nCtx: N_CTX });
  try {
    let ids = m.tokenize('Once upon a time', true); // what the cells will hold, in order
    let generated = 0, shifts = 0, first = null;
    const t0 = performance.now();
    while (generated < TARGET) {
      const r = await m.generate(ids, { maxTokens: Infinity, sampling: { temp: 1, seed: 1000 + shifts }, reusePrefix: true });
      assert.equal(r.reason, 'context', `generation ${shifts} stopped by ${r.reason}, not by the full context`);
      generated += r.tokens.length;
      // the cells: the prompt, then the generated ids (the last was sampled, not decoded: it goes on after
      // the shift); keep N_KEEP, drop half of the rest
      const cells = ids.concat(r.tokens);
      const rest = cells.slice(N_KEEP);
      ids = cells.slice(0, N_KEEP).concat(rest.slice(Math.floor(rest.length / 2)));
      shifts++;
      if (shifts === 1) first = { c: { ...M.lwGpu.counters }, heap: M.HEAPU8.length, js: jsHeap() };
    }
    const secs = (performance.now() - t0) / 1000;
    const end = { c: { ...M.lwGpu.counters }, heap: M.HEAPU8.length, js: jsHeap() };
    console.log(`# ${name}: ${generated} tokens in ${secs.toFixed(1)} s (${(generated / secs).toFixed(0)} tokens/s), ${shifts} context shifts of ${N_CTX} cells`);
    console.log(`# after shift 1 / end: GPU objects ${objects(first.c)} / ${objects(end.c)}, wasm heap ${first.heap} / ${end.heap} bytes, JS heap ${(first.js / 1048576).toFixed(2)} / ${(end.js / 1048576).toFixed(2)} MiB, dispatches ${first.c.dispatches} / ${end.c.dispatches}`);
    assert.ok(shifts >= 3);
    assert.equal(objects(end.c), objects(first.c), 'GPU objects created after the first generation');
    assert.equal(end.heap, first.heap, 'the wasm heap grew');
    assert.ok(end.js <= first.js + 2 * 1048576, `the JS heap grew by ${((end.js - first.js) / 1048576).toFixed(2)} MiB`);
  } finally {
    m.free();
  }
});
