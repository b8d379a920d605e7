// The wasm CPU engine's KV cache types (web/lw-model.mjs CpuEngine, kvType; lw_context_params type_k/v)
// under Node: on a synthetic Qwen3 (heads of 32, written by the native CLI: llamaweb synth), each cache type
// (f16, f32, and llama.cpp's quantized q8_0 and q4_0) reaches the engine (its info, its context bytes smaller
// by exactly what the blocks save) and gives logits near the f16 cache's, q4_0 less near; the misuses have
// codes: an unknown type, on either engine (BAD_INPUT before anything is opened), a head size that is not whole
// blocks (UNSUPPORTED_MODEL).
// Skips (visibly) without the wasm build or the native CLI.
// Run: LW_WASM_DIR=... LW_CLI=build/release/llamaweb node --test tests/web/cpu-kv.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadModule, repoRoot } from '../../web/lw-node.mjs';
import { CpuEngine, GpuModel, LlamawebError } from '../../web/lw-model.mjs';

const M = await loadModule();
const cli = [process.env.LW_CLI, ...['build/release', 'build', 'build-model', 'build-demo'].map((d) => path.join(repoRoot(), d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const skip = !M ? 'build/wasm not built (scripts/build-wasm.sh)' : typeof M._lw_wasm_cpum_open !== 'function' ? 'this wasm build has no CPU engine'
  : !cli ? 'no native llamaweb CLI (scripts/build.sh, or LW_CLI)' : false;
if (skip) console.log('SKIP: ' + skip);
const tmp = mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-cpu-kv-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function synth(preset) {
  const out = path.join(tmp, `${preset}.gguf`);
  execFileSync(cli, ['synth', '--preset', preset, '--type', 'q8_0', '-o', out], { stdio: 'ignore' });
  const buf = readFileSync(out);
  return { file: out, source: { size: buf.length, read: async (o, n) => buf.subarray(o, Math.min(buf.length, o + n)).slice() } };
}
const PROMPT = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], N = 24;

// Logits of the prompt's last token and of N single steps after it (each fed the f16 run's greedy ids, so
// every cache type sees the same tokens), and the engine's info.
async function logits(source, kvType, feed = null) {
  const e = await CpuEngine.open(M, source, { nCtx: 256, kvType });
  try {
    const rows = [], ids = [];
    let r = await e.decode(PROMPT, 'logits');
    for (let i = 0; i < N; i++) {
      rows.push(r.logits);
      ids.push(r.id);
      if (i + 1 < N) r = await e.decode([feed ? feed[i] : r.id], 'logits');
    }
    return { rows, ids, info: e.info() };
  } finally {
    e.free();
  }
}
// max |a - b| / range(b) over every row
function maxRel(a, b) {
  let worst = 0;
  for (let r = 0; r < a.length; r++) {
    let lo = Infinity, hi = -Infinity, d = 0;
    for (let i = 0; i < b[r].length; i++) {
      lo = Math.min(lo, b[r][i]), hi = Math.max(hi, b[r][i]);
      d = Math.max(d, Math.abs(a[r][i] - b[r][i]));
    }
    worst = Math.max(worst, d / (hi - lo));
  }
  return worst;
}

test('each KV cache type reaches the engine: context bytes, logits near the f16 cache\'s', { skip }, async () => {
  const m = synth('tiny-qwen3');
  const ref = await logits(m.source, 'f16');
  assert.equal(ref.info.kvType, 'f16');
  const runs = { f16: ref }, worst = {};
  for (const kv of ['f32', 'q8_0', 'q4_0']) {
    runs[kv] = await logits(m.source, kv, ref.ids);
    assert.equal(runs[kv].info.kvType, kv);
    worst[kv] = maxRel(runs[kv].rows, ref.rows);
  }
  const bytes = Object.fromEntries(Object.entries(runs).map(([k, r]) => [k, r.info.contextBytes]));
  console.log(`# tiny-qwen3, 256 cells: max|diff|/range vs f16 ${JSON.stringify(worst)}; context bytes ${JSON.stringify(bytes)}`);
  // measured here 1.1e-2 / 1.4e-2 / 1.0e-1 (random weights through Qwen3's q/k norms; a cache read wrongly is
  // ~1); the native engine's synthetic llamas: 2e-4 / 3e-3 / 3e-2 (tests/test-engine.c)
  assert.ok(worst.f32 > 0 && worst.f32 < 3e-2 && worst.q8_0 > 0 && worst.q8_0 < 3e-2 && worst.q4_0 > worst.q8_0 && worst.q4_0 < 2.5e-1,
    JSON.stringify(worst));
  // K and V of 2 layers, 2 KV heads of 32, 256 cells: f16 2 bytes an element, q8_0 34 and q4_0 18 per 32
  const cells = 2 * 2 * 2 * 32 * 256;
  assert.equal(bytes.f16 - bytes.q8_0, cells * 2 - (cells / 32) * 34);
  assert.equal(bytes.f16 - bytes.q4_0, cells * 2 - (cells / 32) * 18);
  assert.equal(bytes.f32 - bytes.f16, cells * 2);
});

test('bad KV cache types have codes', { skip }, async () => {
  const m = synth('tiny-qwen3');
  await assert.rejects(CpuEngine.open(M, m.source, { kvType: 'q5_1' }), (e) => e instanceof LlamawebError && e.code === 'BAD_INPUT');
  // the WebGPU engine refuses an unknown type too, before any GPU work (no device needed to see it; its q8_0
  // and q4_0 caches: tests/web/gpu-kv.test.mjs)
  await assert.rejects(GpuModel.open(M, m.source, { kvType: 'q5_1' }), (e) => e instanceof LlamawebError && e.code === 'BAD_INPUT');
  // heads of 16 (the tiny llama: dim 64, 4 heads) are not whole 32-element blocks
  const t = synth('tiny');
  await assert.rejects(CpuEngine.open(M, t.source, { kvType: 'q4_0' }), (e) => e instanceof LlamawebError && /multiples of 32/.test(e.message));
});
