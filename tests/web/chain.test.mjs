// The GPU-resident decode loop (GpuModel.chain over lw__gpu_model_decode_next / rewind): each step's input id
// is the previous step's output on the GPU and steps run ahead of the ids handed out. Checked against the
// one-step loop that waits for every read-back: the same ids (greedy and seeded draws) at every depth, a
// stop leaves nPast and the draws' generator as that loop leaves them (what follows is the same too), the
// context's end, and no GPU object created while chaining.
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/chain.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { GpuModel, fileSource } from '../../web/lw-model.mjs';
import { nativeCli } from './native-cli.mjs';

const ctx = await setup();
const skip = ctx.skip || false;
if (skip) console.log('SKIP: ' + skip);
const M = ctx.Module;
const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');

// stories260K, else a synthetic model from the native CLI (llamaweb synth), else none
function model() {
  if (existsSync(stories)) return stories;
  const cli = nativeCli;
  if (!cli) return null;
  const tmp = mkdtempSync(path.join(process.env.LW_TMP || os.tmpdir(), 'lw-chain-'));
  after(() => rmSync(tmp, { recursive: true, force: true }));
  const out = path.join(tmp, 'tiny-q4_0.gguf');
  execFileSync(cli, ['synth', '--preset', 'tiny', '--type', 'q4_0', '--vocab', 'builtin', '-o', out]);
  return out;
}
const file = skip ? null : model();
if (!skip && !file) console.log('SKIP: neither ../shared/models/stories260K.gguf nor a native llamaweb to synthesize a model');

// n ids after prompt ids by the one-step loop (each decode waits for its id)
async function plain(g, ids, n, out) {
  const r = [];
  for (let id = await g.decode(ids, out); r.length < n; id = await g.decode([id], out)) { r.push(id); if (r.length === n) break; }
  return r;
}
async function chained(g, ids, n, out, depth) {
  const r = [];
  for await (const id of g.chain(ids, out, { depth })) { r.push(id); if (r.length === n) break; }
  return r;
}

test('chain: the ids, nPast and draws of the one-step loop at depths 1-4; no GPU objects per step', { skip: skip || !file }, async () => {
  const g = await GpuModel.open(M, fileSource(file), { nCtx: 128 });
  try {
    const ids = g.tokenize('Once upon a time', true);
    const sampled = { temp: 0.9, topK: 40, topP: 0.95, seed: 11 };
    for (const out of ['argmax', sampled]) {
      g.nPast = 0;
      if (out !== 'argmax') g.setSampling(out);
      const want = await plain(g, ids, 24, out);
      const wantPast = g.nPast;
      // and what follows a stop after 24 ids: 8 more after decoding the 24th
      const wantNext = await plain(g, [want[23]], 8, out);
      for (const depth of [1, 2, 4]) {
        g.nPast = 0;
        if (out !== 'argmax') g.setSampling(out);
        const c0 = { ...M.lwGpu.counters };
        const got = await chained(g, ids, 24, out, depth);
        const c1 = M.lwGpu.counters;
        assert.deepEqual(got, want, `${JSON.stringify(out)} depth ${depth}: ids`);
        assert.equal(g.nPast, wantPast, `depth ${depth}: nPast after the stop`);
        for (const k of ['buffers', 'pipelines', 'bindGroups', 'querySets'])
          assert.equal(c1[k] - c0[k], 0, `depth ${depth}: ${k} created while chaining`);
        assert.deepEqual(await chained(g, [got[23]], 8, out, depth), wantNext, `${JSON.stringify(out)} depth ${depth}: after the stop`);
      }
    }
  } finally {
    g.free();
  }
});

test('chain: runs up to the context\'s end, then the one-step loop\'s error', { skip: skip || !file }, async () => {
  // each loop on its own model: a decode past the context's end leaves its model failed
  const run = async (loop) => {
    const g = await GpuModel.open(M, fileSource(file), { nCtx: 32 });
    const ids = g.tokenize('Once upon a time', true), got = [];
    let err = null;
    try { await loop(g, ids, got); } catch (e) { err = e; }
    const nPast = g.nPast;
    g.free();
    return { ids, got, err, nPast };
  };
  const a = await run(async (g, ids, got) => { for (let id = await g.decode(ids); ; id = await g.decode([id])) got.push(id); });
  const b = await run(async (g, ids, got) => { for await (const id of g.chain(ids, 'argmax', { depth: 3 })) got.push(id); });
  assert.ok(a.err, 'the one-step loop stops at the context end');
  assert.equal(a.got.length, 32 - a.ids.length + 1, 'ids until the context is full');
  assert.deepEqual(b.got, a.got);
  assert.ok(b.err && b.err.message === a.err.message, `the same error: ${b.err && b.err.message}`);
  assert.equal(b.nPast, a.nPast);
});
