// The FFN's gated activation folded into the down projection's mat-vec (matvec.wgsl X_GLU, used by the model
// runner for one-token steps: src/webgpu/gpu-model-fuse.c) through the wasm build (web/lw-wasm-fuse.c): one
// X_GLU dispatch over a gate|up row must give the bits of the two dispatches it replaces (the eltwise GLU,
// then the plain mat-vec), and match the CPU engine (its GLU op, then its product / the dequantized product
// in double) as the plain mat-vec does.
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/fuse.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { agreement } from './agreement.mjs';
import { TYPES, BOUND, kFor, actqOf } from './matvec-check.mjs';

const ctx = await setup();
const skip = ctx.skip || false;
if (skip) console.log('SKIP: ' + skip);
const M = ctx.Module;
const features = ctx.device ? ctx.device.features : new Set();
const GLU = { swiglu: 1, geglu: 2 };

// One case; returns { diff: elements of y whose bits differ fused vs split, hDiff: GLU elements differing
// from the CPU's, nmse: against the double reference, nmseCpu: against the CPU engine's product }.
async function glu(type, glu, rows, k, { f16 = 0, sg = 0, wg = 64, perWg = 1, blocks = 0, actq = 0, seed = 1 } = {}) {
  const h = M._lw_wasm_glu_new();
  if (!h) throw new Error('out of memory');
  const msg = () => M.UTF8ToString(M._lw_wasm_glu_error(h));
  try {
    if (M._lw_wasm_glu_run(h, TYPES[type], GLU[glu], rows, k, f16, sg, wg, perWg, blocks, actq, seed) !== 0)
      throw new Error('run: ' + msg());
    const err = await M.lwGpu.settle();
    if (err) throw new Error('GPU error: ' + err);
    const s = [0, 1, 2, 3].map((w) => M._lw_wasm_glu_stat(h, w));
    if (s.some((v) => !(v >= 0))) throw new Error('check: ' + msg());
    return { diff: s[0], hDiff: s[1], nmse: s[2], nmseCpu: s[3] };
  } finally {
    M._lw_wasm_glu_free(h);
  }
}

// Formats and variants as the runner uses them for a down projection: f32 path, whole blocks with the CPU's
// activation rounding (the runner's default), several rows per workgroup, subgroups and f16 where offered.
const CASES = [
  ['F32', {}], ['F16', { blocks: 1, actq: actqOf('F16') }], ['Q8_0', { blocks: 1, perWg: 4, actq: actqOf('Q8_0') }],
  ['Q4_0', { perWg: 2 }], ['Q4_K', { blocks: 1, actq: actqOf('Q4_K') }], ['Q6_K', { blocks: 1, perWg: 4, actq: actqOf('Q6_K') }],
  ['Q8_0', { sg: 1, perWg: 4 }], ['Q4_0', { f16: 1, sg: 1 }],
];
// GEGLU (gemma) on a few of them: its GLU is the CPU's bits (ggml's table), the mat-vec part is shared
const GEGLU = ['F32', 'Q8_0', 'Q4_0'];
for (const g of ['swiglu', 'geglu']) {
  for (const [type, opts] of CASES) {
    if (g === 'geglu' && (!GEGLU.includes(type) || (type === 'Q8_0' && !opts.actq) || (type === 'Q4_0' && !opts.f16))) continue;
    const name = `X_GLU ${g} ${type} ${JSON.stringify(opts)}`;
    test(name, { skip }, async (t) => {
      if (opts.f16 && !features.has('shader-f16')) return t.skip('no shader-f16 on this adapter');
      if (opts.sg && !features.has('subgroups')) return t.skip('no subgroups on this adapter');
      // 67 rows and k = 1120 (not a multiple of 16: the SWIGLU's exp switch at k & ~15 is crossed)
      const r = await glu(type, g, 67, kFor(type, 1024 + 96), { ...opts, seed: 5 + (opts.perWg || 1) });
      console.log(`# ${name}: ${r.diff} of 67 outputs differ in bits from GLU + mat-vec; GLU vs CPU: ` +
        `${r.hDiff} elements differ; nmse ${r.nmse.toExponential(2)} (double ref), ${r.nmseCpu.toExponential(2)} (CPU product)`);
      assert.equal(r.diff, 0, 'the fused dispatch must give the bits of the two it replaces');
      // rounded activations (actq): the CPU engine's own product up to summation order; else the double
      // reference up to the arithmetic's rounding (as tests/web/matvec.test.mjs)
      if (opts.actq) assert.ok(r.nmseCpu < 1e-9, `nmse against the CPU's product ${r.nmseCpu}`);
      else assert.ok(r.nmse < BOUND[opts.f16 ? 'f16' : 'f32'], `nmse ${r.nmse}`);
      // GEGLU with ggml's table is the CPU's bits; SWIGLU within a few ulp (kernels-ops.h), so few elements
      if (g === 'geglu') assert.equal(r.hDiff, 0);
    });
  }
}

// Whole models through the fusions against the CPU engine in the same module: greedy ids with the CPU's
// choices fed to both (teacher forcing), and the largest logit difference relative to the logits' range. Both
// engines on f32 KV caches (see model.test.mjs).
const cli = [process.env.LW_CLI, ...['build/release', 'build'].map((d) => path.join(repoRoot(), d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const noCli = !cli && 'llamaweb CLI not built (LW_CLI)';
// Whether the adapter runs on the CPU (as lw__gm_cpu_adapter decides from its names).
function cpuAdapter() {
  const p = M._malloc(2048);
  try {
    if (M._lw_wasm_gpu_info_json(p, 2048) <= 0) throw new Error('lw_wasm_gpu_info_json failed');
    const i = JSON.parse(M.UTF8ToString(p));
    return /llvmpipe|swiftshader/i.test([i.vendor, i.architecture, i.device, i.description].join(' '));
  } finally {
    M._free(p);
  }
}
async function agree(preset, type, extra, n, opts = {}) {
  const tmp = mkdtempSync(path.join(process.env.LW_TMP || os.tmpdir(), 'lw-fuse-'));
  try {
    const file = path.join(tmp, 'm.gguf');
    execFileSync(cli, ['synth', '--preset', preset, '--type', type, ...extra, '--vocab', 'builtin', '-o', file]);
    const r = await agreement(M, readFileSync(file), [1, 5, 9, 200, 37], n, { nCtx: 64, kvF32: true, ...opts });
    console.log(`# ${preset} ${type}: ${Math.round(r.rate * n)} of ${n} greedy tokens agree, logits within ` +
      `${(100 * r.worst).toFixed(5)} % of their range; ${r.info.stepDispatches} dispatches per token (${r.info.n_layer} blocks)`);
    return { rate: r.rate, worst: r.worst, steps: r.info.stepDispatches };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

// The fallback: a Q4_K_M file gives attn_v Q6_K in some blocks (llama.cpp's use_more_bits: blocks 2 and 3 of
// 4) and Q4_K in the others, so only blocks 0 and 1 get one Q|K|V mat-vec; the others keep three.
test('mixed weight types (Q4_K_M: attn_v Q6_K in blocks 2, 3): separate projections there, CPU agreement', { skip: skip || noCli }, async () => {
  const r = await agree('tiny-256', 'q4_k_m', ['--layers', '4'], 8);
  // fused blocks 8 (norm, Q|K|V, rope_qkv, attention, O, norm, gate|up, down + SWIGLU), separate ones 10
  // (Q, K, V), outside 5 (embedding, two OUT_ROWS, final norm, output); on CPU adapters the GLU keeps its
  // own dispatch by default (lw__gpu_model_params.glu_fold): one more per block
  const glu = cpuAdapter() ? 1 : 0;
  assert.equal(r.steps, 2 * (8 + glu) + 2 * (10 + glu) + 5);
  assert.ok(r.worst < 0.03, `logits differ by ${r.worst} of their range`);
  assert.ok(r.rate >= 0.9, `agreement ${r.rate}`);
});

// f32 weights and f32 arithmetic: every fusion at once (Q|K|V with the per-head norms in rope_qkv, biases,
// the SCALE of Q, gate|up with the GLU in the down mat-vec) must leave the CPU's logits to float rounding.
for (const preset of ['tiny-qwen2', 'tiny-qwen3', 'tiny-phi3', 'tiny-gemma2', 'tiny-gemma3']) {
  test(`f32 ${preset}: the fused plan agrees with the CPU to float rounding`, { skip: skip || noCli }, async () => {
    const r = await agree(preset, 'f32', [], 12, { f16: 0 });
    assert.ok(r.worst < 1e-4, `logits differ by ${r.worst} of their range`);
    assert.ok(r.rate >= 0.99, `agreement ${r.rate}`);
  });
}

after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100));
