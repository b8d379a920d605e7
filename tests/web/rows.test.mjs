// The token embedding table from a row store on WebGPU (issue 18; src/webgpu/gpu-model-rows.c, get-rows.wgsl
// ROW_MAP, web/lw-model.mjs rows: {embeddings: N}): with 1/8 of the rows on the GPU, 1,000 greedy tokens are
// the resident table's on a synthesized untied llama (Q8_0 rows) and stories260K, through the GPU-resident
// loop (chained steps checked afterwards, undone when their row was not resident) and through the host loop
// (each id's row loaded before its step); a prompt longer than the slots; nothing created while decoding;
// the fallback (tied embeddings) reported, a bad option refused. Hit rates and tokens/s printed (never
// asserted: lavapipe's speed is the CI machine's).
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/rows.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { GpuModel, fileSource } from '../../web/lw-model.mjs';

const ctx = await setup();
const skip = ctx.skip || false;
if (skip) console.log('SKIP: ' + skip);
const M = ctx.Module;
const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const noStories = !existsSync(stories) && `no ${stories}`;
if (noStories) console.log('SKIP (stories260K tests): ' + noStories);

function findCli() {
  const dirs = ['build/release', 'build', 'build-model'].map((d) => path.join(repoRoot(), d, 'llamaweb'));
  for (const p of [process.env.LW_CLI, ...dirs]) {
    if (!p || !existsSync(p)) continue;
    try {
      execFileSync(p, ['synth', '--list'], { stdio: 'ignore' });
      return p;
    } catch {
      // an older build without synth: try the next
    }
  }
  return null;
}
const cli = findCli();
const noCli = !cli && 'no llamaweb CLI with synth (scripts/build.sh release)';
if (noCli) console.log('SKIP (synthesized models): ' + noCli);
const tmp = mkdtempSync(path.join(process.env.LW_TMP || os.tmpdir(), 'lw-rows-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function synth(preset, type, extra = []) {
  const out = path.join(tmp, `${preset}-${type}-${extra.join('_')}.gguf`);
  if (!existsSync(out)) execFileSync(cli, ['synth', '--preset', preset, '--type', type, '--vocab', 'builtin', ...extra, '-o', out]);
  return out;
}

// n greedy ids after prompt: through GpuModel.chain (depth > 0) or one decode per id (depth 0). Returns the ids,
// tokens/s of the generation (the first id excluded: the prompt's) and the row store's counters.
async function greedy(file, prompt, n, { rows = 0, depth = 2, nBatch } = {}) {
  const g = await GpuModel.open(M, fileSource(file), { nCtx: prompt.length + n + 32, nBatch, rows: rows ? { embeddings: rows } : undefined });
  try {
    const out = [];
    let t0 = 0;
    if (depth > 0) {
      for await (const id of g.chain(prompt, 'argmax', { depth })) {
        if (!out.length) t0 = performance.now();
        out.push(id);
        if (out.length >= n) break;
      }
    } else {
      let next = await g.decode(prompt);
      t0 = performance.now();
      while (out.length < n) {
        out.push(next);
        if (out.length < n) next = await g.decode([next]);
      }
    }
    const tps = (n - 1) / (performance.now() - t0) * 1000;
    return { ids: out, tps, rows: g.rowsStats(), info: g.info() };
  } finally {
    g.free();
  }
}

// Asserts the row store's tokens are the resident table's and prints both speeds and the hit rate.
async function compare(name, file, prompt, n, slots, depth) {
  const base = await greedy(file, prompt, n, { depth });
  const r = await greedy(file, prompt, n, { rows: slots, depth });
  const s = r.rows;
  assert.equal(s.active, true, s.message);
  assert.equal(s.fallback, null);
  assert.equal(s.nSlots, slots);
  const first = base.ids.findIndex((id, i) => id !== r.ids[i]);
  assert.equal(first, -1, `${name}: tokens differ from the resident table's at ${first}`);
  assert.equal(r.ids.length, n);
  assert.ok(r.info.weightBytes <= base.info.weightBytes - s.nRows * s.rowBytes + 4096,
    `the table left the weight buffers (${base.info.weightBytes} -> ${r.info.weightBytes})`);
  console.log(`# ${name}, ${depth ? `GPU-resident loop (depth ${depth})` : 'host loop'}: ${slots} of ${s.nRows} rows resident, ` +
    `${n} tokens identical; hit rate ${(100 * s.hitRate).toFixed(1)}% (${s.hits} of ${s.lookups}, ${s.misses} misses, ` +
    `${s.warmLoads} warm, ${s.rewinds} chained steps undone, ${s.bytesRead} bytes read); ` +
    `tokens/s resident ${base.tps.toFixed(1)}, row store ${r.tps.toFixed(1)}`);
}

test('synth llama q8_0 (2048 ids, 256 rows on the GPU): 1,000 greedy tokens as the resident table', { skip: skip || noCli }, async () => {
  const file = synth('tiny', 'q8_0', ['--vocab-size', '2048']);
  const prompt = [1, 2000, 17, 1999, 512, 77, 1234];
  await compare('synth llama q8_0', file, prompt, 1000, 256, 2);
  await compare('synth llama q8_0', file, prompt, 100, 256, 0); // the host loop: each id's row loaded first
});

test('stories260K (64 of 512 rows on the GPU): 1,000 greedy tokens as the resident table', { skip: skip || noStories }, async () => {
  const g = await GpuModel.open(M, fileSource(stories), { nCtx: 64 });
  const prompt = g.tokenize('Once upon a time', true);
  g.free();
  await compare('stories260K', stories, prompt, 1000, 64, 2);
});

test('a prompt with more distinct ids than slots: steps of at most the slots, the resident tokens', { skip: skip || noStories }, async () => {
  const prompt = Array.from({ length: 150 }, (_, i) => 3 + ((i * 37) % 509)); // 150 distinct ids
  const base = await greedy(stories, prompt, 40, { depth: 0, nBatch: 64 }); // the same steps of 64 tokens
  const r = await greedy(stories, prompt, 40, { rows: 64, depth: 2 });
  assert.equal(r.rows.active, true);
  assert.deepEqual(r.ids, base.ids);
  assert.ok(r.rows.evictions > 0);
});

test('decoding through the row store creates no GPU object (invariant 2)', { skip: skip || noStories }, async () => {
  const g = await GpuModel.open(M, fileSource(stories), { nCtx: 256, rows: { embeddings: 64 } });
  try {
    let next = await g.decode([1, 403, 407]);
    next = await g.decode([next]); // first steps: read-back staging buffers may appear here (one per read in flight)
    const warm = g.chain([next], 'argmax', { depth: 3 });
    for (let i = 0; i < 8; i++) next = (await warm.next()).value;
    await warm.return();
    const before = { ...M.lwGpu.counters }, s0 = g.rowsStats();
    for (let i = 0; i < 40; i++) next = await g.decode([(next + 97 * i) % 512]); // misses and evictions
    const it = g.chain([next], 'argmax', { depth: 3 });
    for (let i = 0; i < 40; i++) await it.next();
    await it.return();
    const c = M.lwGpu.counters, s1 = g.rowsStats();
    assert.ok(s1.misses > s0.misses, 'rows were loaded while decoding');
    for (const k of ['buffers', 'stagingBuffers', 'pipelines', 'bindGroups']) assert.equal(c[k], before[k], `${k} created during decode`);
  } finally {
    g.free();
  }
});

test('fallback: tied embeddings keep the table resident, said once at open; bad options refused', { skip: skip || noCli }, async () => {
  const file = synth('tiny-qwen2', 'q8_0');
  const g = await GpuModel.open(M, fileSource(file), { nCtx: 64, rows: { embeddings: 16 } });
  try {
    assert.match(g.rowsFallback, /resident.*tied/);
    const s = g.rowsStats();
    assert.equal(s.asked, true);
    assert.equal(s.active, false);
    assert.equal(s.fallback, g.rowsFallback);
    assert.equal(g.rowsStep, 0);
    console.log(`# fallback reported: ${g.rowsFallback}`);
    const a = await g.decode([1, 5, 9]);
    g.nPast = 0;
    assert.equal(await g.decode([1, 5, 9]), a);
  } finally {
    g.free();
  }
  const h = await GpuModel.open(M, fileSource(file), { nCtx: 64 });
  try {
    assert.equal(h.rowsFallback, null, 'not asked for: nothing to report');
    assert.equal(h.rowsStats().asked, false);
  } finally {
    h.free();
  }
  await assert.rejects(GpuModel.open(M, fileSource(file), { rows: { embeddings: -1 } }), { code: 'BAD_INPUT' });
  await assert.rejects(GpuModel.open(M, fileSource(file), { rows: 8 }), { code: 'BAD_INPUT' });
});
