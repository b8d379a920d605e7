// The WebGPU engine's quantized KV caches (kvType 'q8_0' / 'q4_0': src/webgpu/kernels-attn.h's block layouts,
// written by kv-store.wgsl with the CPU's quantize_row_q8_0 / quantize_row_q4_0 rounding, read by
// attn-decode.wgsl and attn-prefill.wgsl) against the wasm CPU engine with a cache of the same type
// (CpuEngine, llama.cpp's type_k/v), on synthetic models with heads of 32 (written by the native CLI: llamaweb
// synth): the prompt runs through the prefill attention, the one-token steps after it through the decode
// attention (with the cache split over workgroups past 64 cells), both engines fed the CPU's greedy ids. The
// GPU's logits must lie much nearer the CPU's run with the same cache type than its f16 run (the cache holds
// the CPU's quants, not merely something close), and its greedy tokens agree with that run's wherever the
// step is not a near tie. Also: the memory the plan reports (36 / 20 bytes per 32 elements), an unknown type
// refused with BAD_INPUT, and heads that are not whole blocks (stories260K's 8, the tiny llama's 16) refused
// by the plan.
// Cost: the file runs on lavapipe and SwiftShader in CI, where pipeline compiles dominate. Lavapipe (and any
// other adapter) runs the whole matrix (tiny-256, tiny-qwen3, tiny-gemma2 x q8_0, q4_0, 100 decode steps each,
// and the integer mat-vec case for both types: ~17 s on 2 cores); on SwiftShader, whose compiles take ~10 s
// per model's set (82 s for the q8_0 cases alone), the model cases run only with LW_TEST_SLOW=1 (their logic
// does not depend on the driver; the refusals run on both).
// Skips (visibly) without the wasm build, a WebGPU adapter or the native CLI.
// Run: LW_WASM_DIR=... LW_CLI=build/release/llamaweb node --test tests/web/gpu-kv.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { CpuEngine, GpuModel, LlamawebError, bytesSource, fileSource } from '../../web/lw-model.mjs';
import { isSwiftShader } from './adapter.mjs';

const ctx = await setup();
const M = ctx.Module;
const cli = [process.env.LW_CLI, ...['build/release', 'build', 'build-model', 'build-demo'].map((d) => path.join(repoRoot(), d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const skip = ctx.skip ? ctx.skip : typeof M._lw_wasm_cpum_open !== 'function' ? 'this wasm build has no CPU engine'
  : !cli ? 'no native llamaweb CLI (scripts/build.sh, or LW_CLI)' : false;
if (skip) console.log('SKIP: ' + skip);
const SLOW = process.env.LW_TEST_SLOW === '1';
const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const tmp = mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-gpu-kv-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function synth(preset, type) {
  const out = path.join(tmp, `${preset}-${type}.gguf`);
  if (!existsSync(out)) execFileSync(cli, ['synth', '--preset', preset, '--type', type, '--vocab', 'builtin', '-o', out], { stdio: 'ignore' });
  return readFileSync(out);
}

// Bytes per 32-element block of the GPU's layouts, and each preset's K (or V) row: 2 KV heads of 32.
const BLOCK_BYTES = { q8_0: 36, q4_0: 20 };
const KV_ROW = { 'tiny-256': 64, 'tiny-qwen3': 64, 'tiny-gemma2': 64 };

// max |a - b| / range(b) of one row, and max |a - b|
function rel(a, b) {
  let lo = Infinity, hi = -Infinity, d = 0;
  for (let i = 0; i < b.length; i++) {
    lo = Math.min(lo, b[i]), hi = Math.max(hi, b[i]);
    d = Math.max(d, Math.abs(a[i] - b[i]));
  }
  return { r: d / (hi - lo), d };
}

// The prompt, then n one-token steps fed the CPU run's greedy ids (cache type kv on both engines): how often
// the GPU's argmax is the CPU's (rate), the same over the steps that are not near ties (decisive: the CPU's
// logit of its own top exceeds its logit of the GPU's top by more than twice the largest logit difference
// between the engines at that step, so no difference of that size could swap them), and the GPU's largest
// logit difference from the CPU's run of that type and from its f16 run.
async function compare(bytes, kv, prompt, n, gpuOpts = {}) {
  const nCtx = prompt.length + n + 8;
  const g = await GpuModel.open(M, bytesSource(bytes), { nCtx, kvType: kv, ...gpuOpts });
  const cq = await CpuEngine.open(M, bytesSource(bytes), { nCtx, kvType: kv });
  const cf = await CpuEngine.open(M, bytesSource(bytes), { nCtx, kvType: 'f16' });
  try {
    let gr = await g.decode(prompt, 'logits'), qr = await cq.decode(prompt, 'logits'), fr = await cf.decode(prompt, 'logits');
    let same = 0, ties = 0, worstQ = 0, worstF = 0, prefillQ = 0;
    for (let i = 0; i < n; i++) {
      const q = rel(gr.logits, qr.logits);
      if (gr.id === qr.id) same++;
      else if (qr.logits[qr.id] - qr.logits[gr.id] <= 2 * q.d) ties++;
      if (i === 0) prefillQ = q.r;
      worstQ = Math.max(worstQ, q.r);
      worstF = Math.max(worstF, rel(gr.logits, fr.logits).r);
      if (i + 1 < n) {
        const next = qr.id;
        gr = await g.decode([next], 'logits');
        qr = await cq.decode([next], 'logits');
        fr = await cf.decode([next], 'logits');
      }
    }
    return { rate: same / n, decisive: same / (n - ties), ties, worstQ, worstF, prefillQ, info: g.info(), cpuInfo: cq.info() };
  } finally {
    g.free();
    cq.free();
    cf.free();
  }
}

// tiny-256: llama, 8/2 heads of 32 (the rope_qkv and norm mat-vec RoPE fusions, off for a quantized cache);
// tiny-qwen3: q/k norms; tiny-gemma2: soft-capping and a sliding window of 16 (the window crosses blocks of
// cells in both kernels); f16 weights, so the mat-vecs add no 8-bit rounding of their own.
const PRESETS = ['tiny-256', 'tiny-qwen3', 'tiny-gemma2'];
const STEPS = 100;
const models = SLOW || skip || !isSwiftShader(ctx.info);
if (!models)
  console.log('# SKIP on SwiftShader: the q8_0 / q4_0 model cases (tiny-256, tiny-qwen3, tiny-gemma2, the integer ' +
    'mat-vecs) run on lavapipe; LW_TEST_SLOW=1 runs them here too');
const modelSkip = skip || (!models && 'SwiftShader without LW_TEST_SLOW=1 (lavapipe runs these)');
// greedy agreement summed over the presets, per cache type (the bar of the last model test)
const total = { q8_0: { same: 0, n: 0 }, q4_0: { same: 0, n: 0 } };
// logits within this share of their range of the CPU's run with the same cache (measured on lavapipe and
// SwiftShader, all presets: q8_0 <= 0.06 %, q4_0 <= 0.51 %, against 0.45-0.82 % and 4.9-18 % from the f16
// run; a 4-bit step is 16 times an 8-bit one, so a quant the engines round apart, from an activation an f16
// ulp apart upstream, moves the logits further)
const BOUND = { q8_0: 0.004, q4_0: 0.015 };
for (const kv of ['q8_0', 'q4_0']) {
  for (const preset of PRESETS) {
    test(`${kv} KV cache, WebGPU vs the CPU engine's ${kv} cache: ${preset} f16, ${STEPS} steps`, { skip: modelSkip }, async () => {
      const bytes = synth(preset, 'f16');
      // 40 prompt tokens (prefill: more than the decode kernel's 4), then the steps: past 64 cells the decode
      // attention splits the cache over workgroups (and the reduce merges them)
      const prompt = Array.from({ length: 40 }, (_, i) => 1 + ((i * 37 + 11) % 200));
      const r = await compare(bytes, kv, prompt, STEPS);
      total[kv].same += Math.round(r.rate * STEPS);
      total[kv].n += STEPS;
      console.log(`# ${preset} f16 ${kv} cache: ${(100 * r.rate).toFixed(1)} % of ${STEPS} greedy tokens agree (${r.ties} near ties; ` +
        `${(100 * r.decisive).toFixed(1)} % of the others); logits within ${(100 * r.worstQ).toFixed(4)} % of their range of the ` +
        `CPU's ${kv} run (after the prompt ${(100 * r.prefillQ).toFixed(4)} %), ${(100 * r.worstF).toFixed(4)} % of its f16 run; ` +
        `${r.info.stepDispatches} dispatches per token`);
      assert.equal(r.info.kvType, kv);
      assert.equal(r.cpuInfo.kvType, kv);
      // K and V of every layer: n_ctx cells of the row's blocks, 36 (q8_0) or 20 (q4_0) bytes each
      const want = 2 * r.info.n_layer * r.info.n_ctx * (KV_ROW[preset] / 32) * BLOCK_BYTES[kv];
      assert.equal(r.info.kvBytes, want, `KV bytes of the plan (${r.info.kvBytes}; ${want} expected)`);
      assert.ok(r.decisive >= 0.995, `agreement ${r.decisive} where no near tie (${r.rate} of all)`);
      assert.ok(r.rate >= 0.97, `agreement ${r.rate}`);
      assert.ok(r.worstQ < BOUND[kv], `logits differ by ${r.worstQ} of their range`);
      assert.ok(r.worstQ < r.worstF / 2, `nearer the CPU's ${kv} run (${r.worstQ}) than its f16 run (${r.worstF})`);
    });
  }
}

// Over the three presets: the bar for a quantized cache's greedy tokens, at least 99.5 % of them the CPU's
// (a case alone may part once at a near tie: 99 of 100).
test('greedy agreement over the presets: at least 99.5 % per cache type', { skip: modelSkip }, () => {
  for (const kv of ['q8_0', 'q4_0']) {
    const t = total[kv];
    console.log(`# ${kv} cache: ${t.same} of ${t.n} greedy tokens agree (${(100 * t.same / t.n).toFixed(2)} %)`);
    assert.equal(t.n, PRESETS.length * STEPS, `${kv}: every preset ran`);
    assert.ok(t.same >= 0.995 * t.n, `${kv}: ${t.same} of ${t.n}`);
  }
});

// The integer mat-vecs (and no exact kernels) real GPUs run: their own 8-bit activation rounding, so looser.
for (const kv of ['q8_0', 'q4_0']) {
  test(`${kv} KV cache: the GPU kernels real GPUs run (integer mat-vecs, no exact kernels) agree too`, { skip: modelSkip }, async () => {
    const bytes = synth('tiny-256', 'q8_0');
    const prompt = Array.from({ length: 12 }, (_, i) => 1 + ((i * 53 + 7) % 200));
    const r = await compare(bytes, kv, prompt, 24, { exact: false, tune: { matvec: { '*': { idot: 1, exact: 0, rope: 1 } } } });
    console.log(`# tiny-256 q8_0, integer mat-vecs, ${kv} cache: ${(100 * r.rate).toFixed(1)} % agree (${r.ties} near ties), logits ` +
      `within ${(100 * r.worstQ).toFixed(4)} % (f16 run: ${(100 * r.worstF).toFixed(4)} %)`);
    assert.ok(r.rate >= 0.9, `agreement ${r.rate}`);
    assert.ok(r.worstQ < 0.02, `logits differ by ${r.worstQ} of their range`);
  });
}

test('quantized KV caches: refusals', { skip }, async () => {
  const bytes = synth('tiny-256', 'f16');
  // a type the engines do not know: BAD_INPUT before anything is opened
  await assert.rejects(GpuModel.open(M, bytesSource(bytes), { kvType: 'q5_1' }), (e) => e instanceof LlamawebError && e.code === 'BAD_INPUT');
  // heads of 16 (the tiny llama) are not whole 32-element blocks: the plan refuses them
  for (const kv of ['q8_0', 'q4_0'])
    await assert.rejects(GpuModel.open(M, bytesSource(synth('tiny', 'f16')), { kvType: kv }), (e) => e instanceof LlamawebError &&
      /multiples of 32/.test(e.message));
  if (!existsSync(stories)) {
    console.log(`# SKIP stories260K (heads of 8: refused): ${stories} absent`);
    return;
  }
  await assert.rejects(GpuModel.open(M, fileSource(stories), { kvType: 'q4_0' }), (e) => e instanceof LlamawebError &&
    /multiples of 32/.test(e.message));
});
