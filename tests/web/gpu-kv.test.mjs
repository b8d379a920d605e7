// The WebGPU engine's quantized KV cache (kvType 'q8_0': src/webgpu/kernels-attn.h's block layout, written by
// kv-store.wgsl with the CPU's quantize_row_q8_0 rounding, read by attn-decode.wgsl and attn-prefill.wgsl)
// against the wasm CPU engine with a q8_0 cache (CpuEngine, llama.cpp's type_k/v), on synthetic models with
// heads of 32 (written by the native CLI: llamaweb synth): the prompt runs through the prefill attention, the
// one-token steps after it through the decode attention (with the cache split over workgroups past 64
// cells), both engines fed the CPU's greedy ids. The GPU's logits must lie much nearer the CPU's q8_0 run
// than its f16 run (the cache holds the CPU's quants, not merely something close). Also: the memory the plan
// reports (36 bytes per 32 elements), q4_0 refused with BAD_INPUT, and heads that are not whole blocks
// (stories260K's 8, the tiny llama's 16) refused by the plan.
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

const ctx = await setup();
const M = ctx.Module;
const cli = [process.env.LW_CLI, ...['build/release', 'build', 'build-model', 'build-demo'].map((d) => path.join(repoRoot(), d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const skip = ctx.skip ? ctx.skip : typeof M._lw_wasm_cpum_open !== 'function' ? 'this wasm build has no CPU engine'
  : !cli ? 'no native llamaweb CLI (scripts/build.sh, or LW_CLI)' : false;
if (skip) console.log('SKIP: ' + skip);
const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const tmp = mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-gpu-kv-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function synth(preset, type) {
  const out = path.join(tmp, `${preset}-${type}.gguf`);
  if (!existsSync(out)) execFileSync(cli, ['synth', '--preset', preset, '--type', type, '--vocab', 'builtin', '-o', out], { stdio: 'ignore' });
  return readFileSync(out);
}

// max |a - b| / range(b) of one row
function rel(a, b) {
  let lo = Infinity, hi = -Infinity, d = 0;
  for (let i = 0; i < b.length; i++) {
    lo = Math.min(lo, b[i]), hi = Math.max(hi, b[i]);
    d = Math.max(d, Math.abs(a[i] - b[i]));
  }
  return d / (hi - lo);
}

// The prompt, then n one-token steps fed the CPU q8_0 run's greedy ids: how often the GPU's argmax is the
// CPU's, and the GPU's largest logit difference from the CPU's q8_0 and f16 runs.
async function compare(bytes, prompt, n, gpuOpts = {}) {
  const nCtx = prompt.length + n + 8;
  const g = await GpuModel.open(M, bytesSource(bytes), { nCtx, kvType: 'q8_0', ...gpuOpts });
  const cq = await CpuEngine.open(M, bytesSource(bytes), { nCtx, kvType: 'q8_0' });
  const cf = await CpuEngine.open(M, bytesSource(bytes), { nCtx, kvType: 'f16' });
  try {
    let gr = await g.decode(prompt, 'logits'), qr = await cq.decode(prompt, 'logits'), fr = await cf.decode(prompt, 'logits');
    let same = 0, worstQ = 0, worstF = 0, prefillQ = 0;
    for (let i = 0; i < n; i++) {
      if (gr.id === qr.id) same++;
      const q = rel(gr.logits, qr.logits);
      if (i === 0) prefillQ = q;
      worstQ = Math.max(worstQ, q);
      worstF = Math.max(worstF, rel(gr.logits, fr.logits));
      if (i + 1 < n) {
        const next = qr.id;
        gr = await g.decode([next], 'logits');
        qr = await cq.decode([next], 'logits');
        fr = await cf.decode([next], 'logits');
      }
    }
    return { rate: same / n, worstQ, worstF, prefillQ, info: g.info(), cpuInfo: cq.info() };
  } finally {
    g.free();
    cq.free();
    cf.free();
  }
}

// tiny-256: llama, 8/2 heads of 32 (the rope_qkv and norm mat-vec RoPE fusions, off for a quantized cache);
// tiny-qwen3: q/k norms; tiny-gemma2: soft-capping and a sliding window of 16 (the window crosses blocks of
// cells in both kernels); f16 weights, so the mat-vecs add no 8-bit rounding of their own.
const CASES = [['tiny-256', 'f16'], ['tiny-qwen3', 'f16'], ['tiny-gemma2', 'f16']];
for (const [preset, type] of CASES) {
  test(`q8_0 KV cache, WebGPU vs the CPU engine's q8_0 cache: ${preset} ${type}`, { skip }, async () => {
    const bytes = synth(preset, type);
    // 40 prompt tokens (prefill: more than the decode kernel's 4), then 100 steps: past 64 cells the decode
    // attention splits the cache over workgroups (and the reduce merges them)
    const prompt = Array.from({ length: 40 }, (_, i) => 1 + ((i * 37 + 11) % 200));
    const r = await compare(bytes, prompt, 100);
    console.log(`# ${preset} ${type} q8_0 cache: ${(100 * r.rate).toFixed(1)} % of 100 greedy tokens agree; logits within ` +
      `${(100 * r.worstQ).toFixed(4)} % of their range of the CPU's q8_0 run (after the prompt ${(100 * r.prefillQ).toFixed(4)} %), ` +
      `${(100 * r.worstF).toFixed(4)} % of its f16 run; ${r.info.stepDispatches} dispatches per token`);
    assert.equal(r.info.kvType, 'q8_0');
    // 36 bytes per 32 elements where f16 takes 64
    const f = await GpuModel.open(M, bytesSource(bytes), { nCtx: r.info.n_ctx });
    const f16Bytes = f.info().kvBytes;
    f.free();
    assert.equal(r.info.kvBytes * 64, f16Bytes * 36, `KV bytes of the plan (${r.info.kvBytes}; f16: ${f16Bytes})`);
    assert.ok(r.rate >= 0.97, `agreement ${r.rate}`);
    assert.ok(r.worstQ < 0.004, `logits differ by ${r.worstQ} of their range`);
    assert.ok(r.worstQ < r.worstF / 2, `nearer the CPU's q8_0 run (${r.worstQ}) than its f16 run (${r.worstF})`);
  });
}

test('q8_0 KV cache: the GPU kernels real GPUs run (integer mat-vecs, no exact kernels) agree too', { skip }, async () => {
  const bytes = synth('tiny-256', 'q8_0');
  const prompt = Array.from({ length: 12 }, (_, i) => 1 + ((i * 53 + 7) % 200));
  const r = await compare(bytes, prompt, 24, { exact: false, tune: { matvec: { '*': { idot: 1, exact: 0, rope: 1 } } } });
  console.log(`# tiny-256 q8_0, integer mat-vecs, q8_0 cache: ${(100 * r.rate).toFixed(1)} % agree, logits within ` +
    `${(100 * r.worstQ).toFixed(4)} % (f16 run: ${(100 * r.worstF).toFixed(4)} %)`);
  assert.ok(r.rate >= 0.9, `agreement ${r.rate}`);
  assert.ok(r.worstQ < 0.02, `logits differ by ${r.worstQ} of their range`);
});

test('q8_0 KV cache: refusals', { skip }, async () => {
  const bytes = synth('tiny-256', 'f16');
  // q4_0 has no WebGPU kernels: BAD_INPUT before anything is opened (device 'auto' then takes the CPU)
  await assert.rejects(GpuModel.open(M, bytesSource(bytes), { kvType: 'q4_0' }), (e) => e instanceof LlamawebError && e.code === 'BAD_INPUT' &&
    /CPU engine/.test(e.message));
  await assert.rejects(GpuModel.open(M, bytesSource(bytes), { kvType: 'q5_1' }), (e) => e instanceof LlamawebError && e.code === 'BAD_INPUT');
  // heads of 16 (the tiny llama) are not whole 32-element blocks: the plan refuses them
  await assert.rejects(GpuModel.open(M, bytesSource(synth('tiny', 'f16')), { kvType: 'q8_0' }), (e) => e instanceof LlamawebError &&
    /multiples of 32/.test(e.message));
  if (!existsSync(stories)) {
    console.log(`# SKIP stories260K (heads of 8: refused): ${stories} absent`);
    return;
  }
  await assert.rejects(GpuModel.open(M, fileSource(stories), { kvType: 'q8_0' }), (e) => e instanceof LlamawebError &&
    /multiples of 32/.test(e.message));
});
