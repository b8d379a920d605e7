// Whole models on WebGPU (src/webgpu/gpu-model.c through web/lw-wasm-model.c and web/lw-model.mjs) against
// the CPU engine built into the same wasm module: stories260K's greedy text, greedy top-1 agreement over
// many tokens on tiny synthetic models of each architecture, decode-time creation counters, and (with
// LW_TEST_BIG=1) a token embedding larger than a 128 MiB binding.
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/model.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { GpuModel, CpuModel, fileSource } from '../../web/lw-model.mjs';
import { agreement as agreementOf } from './agreement.mjs';
import { isSwiftShader } from './adapter.mjs';

const ctx = await setup();
const skip = ctx.skip || false;
if (skip) console.log('SKIP: ' + skip);
const M = ctx.Module;
const features = ctx.device ? ctx.device.features : new Set();
const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');

// The native CLI writes synthetic models (llamaweb synth); tests that need one skip without it.
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
const tmp = mkdtempSync(path.join(process.env.LW_TMP || os.tmpdir(), 'lw-model-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function synth(preset, type, extra = []) {
  const out = path.join(tmp, `${preset}-${type}-${extra.join('_')}.gguf`);
  if (!existsSync(out)) execFileSync(cli, ['synth', '--preset', preset, '--type', type, '--vocab', 'builtin', ...extra, '-o', out]);
  return out;
}

// Greedy agreement of file's model on the GPU and the CPU (agreement.mjs).
const agreement = (file, prompt, n, opts = {}) => agreementOf(M, readFileSync(file), prompt, n, opts);

test('stories260K: the same greedy text as the CPU engine (and llama.cpp)', { skip: skip || (!existsSync(stories) && 'no ../shared') }, async () => {
  const c0 = { ...M.lwGpu.counters };
  const g = await GpuModel.open(M, fileSource(stories), { nCtx: 256 });
  try {
    // invariant 1: the weights were streamed from the host source, not written from the wasm heap
    const streamed = M.lwGpu.counters.bytesStreamed - c0.bytesStreamed, fromHeap = M.lwGpu.counters.bytesWritten - c0.bytesWritten;
    const wb = g.info().weightBytes;
    assert.ok(streamed > 0.9 * wb && streamed <= wb, `streamed ${streamed} of ${wb} weight bytes`);
    assert.ok(fromHeap < 4096, `${fromHeap} bytes written from the heap at load`);
    const ids = g.tokenize('Once upon a time', true);
    assert.deepEqual(ids, [1, 403, 407, 261, 378]);
    let next = await g.decode(ids);
    assert.equal(next, 432, 'first token after the prompt (llama.cpp: 432 ",")');
    const out = [];
    for (let i = 0; i < 64; i++) {
      out.push(next);
      next = await g.decode([next]);
    }
    const dec = new TextDecoder();
    const text = out.map((id) => dec.decode(g.pieceBytes(id), { stream: true })).join('');
    console.log(`# stories260K on WebGPU: Once upon a time${text}`);
    assert.match(text, /^, there was a little girl named Lily\. She loved to play outside/);
    // the CPU engine in the same module: identical ids
    const c = CpuModel.open(M, readFileSync(stories), 256);
    try {
      let cn = c.decode(ids);
      const cpu = [];
      for (let i = 0; i < 64; i++) {
        cpu.push(cn);
        cn = c.decode([cn]);
      }
      assert.deepEqual(out, cpu);
    } finally {
      c.free();
    }
  } finally {
    g.free();
  }
});

test('decoding creates no GPU objects after the first step (invariant 2)', { skip: skip || (!existsSync(stories) && 'no ../shared') }, async () => {
  const g = await GpuModel.open(M, fileSource(stories), { nCtx: 128, submitEvery: 16 });
  try {
    let next = await g.decode([1, 403, 407]);
    next = await g.decode([next]); // first decode step: read-back staging buffers etc. may appear here
    const before = { ...M.lwGpu.counters }, i0 = g.info();
    for (let i = 0; i < 10; i++) next = await g.decode([next]);
    const c = M.lwGpu.counters, i1 = g.info();
    assert.equal(c.buffers, before.buffers, 'buffers created during decode');
    assert.equal(c.stagingBuffers, before.stagingBuffers, 'staging buffers created during decode');
    assert.equal(c.pipelines, before.pipelines, 'pipelines created during decode');
    assert.equal(c.bindGroups, before.bindGroups, 'bind groups created during decode');
    assert.equal(i1.buffers, i0.buffers);
    assert.equal(i1.pipelines, i0.pipelines);
    assert.equal(i1.bindGroups, i0.bindGroups);
    const perStep = (c.dispatches - before.dispatches) / 10;
    assert.equal(perStep, i1.stepDispatches + 2, 'dispatches per step: the graph + the two argmax passes');
    assert.equal(c.bytesRead - before.bytesRead, 10 * 4, 'each step reads back the token id only');
    // submit every 16 dispatches: ceil(per step / 16) command buffers per step, plus the read-back's copy
    assert.equal((c.submits - before.submits) / 10, Math.ceil(perStep / 16) + 1);
    console.log(`# stories260K: ${i1.stepDispatches} dispatches per token (${(i1.stepDispatches / i1.n_layer).toFixed(1)} per layer), ` +
      `${i1.buffers} buffers, ${i1.pipelines} pipelines, ${i1.bindGroups} bind groups`);
  } finally {
    g.free();
  }
});

// Tiny synthetic models of every architecture the graph builders have (random weights: the margins between
// the best tokens are small, a harder test than a trained model). Both engines use an f32 KV cache here: with
// an f16 cache the CPU (as llama.cpp's flash attention) also rounds Q and the V sums to f16, which the GPU
// does not, and that difference grows with the context (measured on tiny f32 over 1000 tokens: logits 1e-3
// apart at the first token, 2.7e-2 at the 800th; with f32 caches 2.6e-6 throughout, 1000/1000 greedy).
// The mat-vec and mat-mat kernels round activations as the CPU engine does for each weight format (8-bit
// blocks for quantized weights, f16 for F16: shaders/actq.wgsl), so quantized models agree to float rounding
// too (before that rounding: q4_0 98.2 %, q8_0 99.3 % over 1000 tokens, logits ~2 % of their range apart).
// Other kernels (norms, attention) still sum in their own orders, so now and then an activation lands on the
// other side of an 8-bit rounding boundary and a near-tie goes the other way (tiny-phi3 q8_0: 99.5 %).
// LW_TEST_SLOW=1: every architecture in f32/f16/q8_0/q4_0 and every weight format (below), 1000 tokens each
// (LW_AGREE_TOKENS overrides).
const SLOW = !!process.env.LW_TEST_SLOW;
// The one-block llama-3.2-1b cases (rows of 2048 and 8192) take SwiftShader 1-4 min each (lavapipe 15-35 s):
// without LW_TEST_SLOW=1 they run on lavapipe only, the other driver of scripts/test-webgpu.sh.
const big1b = (preset) => preset === 'llama-3.2-1b' && !skip && !SLOW && isSwiftShader(ctx.info) &&
  'the one-block 1B runs on lavapipe (LW_TEST_SLOW=1: here too)';
// SwiftShader without LW_TEST_SLOW=1 (its pipeline compiles and decode steps made this file ~500 s of CI's
// 2 cores, lavapipe's run ~70 s) runs a subset. What it catches that lavapipe cannot is its own compiler, no
// shader-f16 (f32 arithmetic, f16 caches packed by hand), subgroups of 4 and 1 GiB bindings; so there: every
// architecture once (f16 weights), the f32 model, and one case of each fused kernel path (the GPUs' norms, the
// norm prologue for Q8_0 and for the K formats with its shape keys, RoPE in the Q|K|V mat-vec with its shape
// keys, RoPE in the decode attention past one split). The other weight formats and the other cases of those
// paths run on lavapipe (every format's kernels also in matvec / matmat.test.mjs on both drivers); the file
// prints the skipped cases in one line.
const ssLight = !skip && !SLOW && isSwiftShader(ctx.info);
const ssSkipped = [];
const subset = (label, keep) => {
  if (!ssLight || keep) return false;
  ssSkipped.push(label);
  return 'SwiftShader runs a subset, lavapipe this one (LW_TEST_SLOW=1: here too)';
};
const ARCHS = ['tiny', 'tiny-qwen2', 'tiny-qwen3', 'tiny-phi3', 'tiny-gemma2', 'tiny-gemma3'];
// Every weight format of the GPU table in at least one file: the 32-element-block types on `tiny`, the rest
// on `tiny-256`, whose rows are whole 256-blocks (on `tiny`, 64-element rows make llama-quantize fall back
// from the K, IQ, TQ and FP4 types to legacy ones, which would test those instead); q3_k/q4_k/q5_k/mxfp4/
// nvfp4 are synth's one-type-for-every-weight options (their file types mix in others).
const FILE_TYPES = ['bf16', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl', 'q2_0'];
const FILE_TYPES_256 = ['q1_0', 'q2_k', 'q3_k_m', 'q4_k_m', 'q5_k_m', 'q6_k', 'q3_k', 'q4_k', 'q5_k', 'iq2_xxs', 'iq2_xs',
  'iq2_s', 'iq3_xxs', 'iq3_s', 'iq1_s', 'iq1_m', 'iq4_xs', 'tq1_0', 'tq2_0', 'mxfp4', 'nvfp4'];
const CASES = SLOW ? [...ARCHS.flatMap((a) => ['f32', 'f16', 'q8_0', 'q4_0'].map((t) => [a, t])), ...FILE_TYPES.map((t) => ['tiny', t]),
  ...FILE_TYPES_256.map((t) => ['tiny-256', t])]
  : [...ARCHS.map((a) => [a, 'f16']), ['tiny', 'f32'], ['tiny', 'q8_0'], ['tiny-qwen3', 'q4_0'], ['tiny-gemma3', 'q4_k_m']];
for (const [preset, type] of CASES) {
  test(`greedy agreement WebGPU vs CPU: ${preset} ${type}`, { skip: skip || (!cli && 'llamaweb CLI not built (LW_CLI)') ||
    subset(`${preset} ${type}`, type === 'f16' || (preset === 'tiny' && type === 'f32')) }, async () => {
    const file = synth(preset, type);
    const n = Number(process.env.LW_AGREE_TOKENS || (SLOW ? 1000 : 24));
    // (bf16 counts as quantized here: its activations are rounded to 8-bit significands, so one that lands on
    // the other side of a rounding moves the logits as much as an 8-bit quant does)
    const quant = !['f32', 'f16'].includes(type), exact = type === 'f32';
    const r = await agreement(file, [1, 5, 9, 200, 37], n, exact ? { kvF32: true, f16: 0 } : { kvF32: true });
    console.log(`# ${preset} ${type}: ${(100 * r.rate).toFixed(1)} % of ${n} greedy tokens agree, logits within ` +
      `${(100 * r.worst).toFixed(4)} % of their range; ${r.info.stepDispatches} dispatches per token`);
    // quantized: the GPU's norms and attention sum in other orders than the CPU, so once in a while an
    // activation within an ulp of an 8-bit rounding boundary rounds to the neighbouring quant and that
    // step's logits move by up to ~1.3 % of their range (1000 tokens, every architecture); otherwise 1e-7
    assert.ok(r.worst < (exact ? 1e-4 : quant ? 0.02 : 0.003), `logits differ by ${r.worst} of their range`);
    assert.ok(r.rate >= (exact || quant || n >= 1000 ? 0.995 : 0.9), `agreement ${r.rate}`);
  });
}

// The kernels real GPUs run by default, forced on this CPU adapter: integer mat-vecs over x rounded once per
// step (matvec-q8.wgsl; the GLU then runs once in its own pass instead of in the down projection's loads).
// Same bar as the float kernels: they compute the CPU's product up to float summation order.
const GPU_CASES = SLOW ? [['tiny', 'q4_0'], ['tiny', 'q8_0'], ['tiny', 'q4_1'], ['tiny', 'q5_0'], ['tiny', 'iq4_nl'], ['tiny-256', 'q4_k_m'],
  ['tiny-256', 'q5_k_m'], ['tiny-256', 'q6_k'], ['tiny-qwen3', 'q4_0'], ['tiny-gemma3', 'q8_0']] : [['tiny', 'q4_0'], ['tiny-256', 'q4_k_m']];
for (const [preset, type] of GPU_CASES) {
  // (SwiftShader: the integer mat-vecs run in the cases below, the split decode attention's rounding reduce in
  // the decode attention's RoPE case)
  test(`greedy agreement WebGPU vs CPU, integer mat-vecs: ${preset} ${type}`, { skip: skip || (!cli && 'llamaweb CLI not built (LW_CLI)') ||
    subset(`integer mat-vecs ${preset} ${type}`) }, async () => {
    const file = synth(preset, type);
    const n = Number(process.env.LW_AGREE_TOKENS || (SLOW ? 1000 : 24));
    // (300 tokens: past 256 cells the decode attention splits the cache on this adapter, and its reduce also
    // rounds the output for the output projection: attn-reduce.wgsl Q8_OUT)
    const r = await agreement(file, [1, 5, 9, 200, 37], Math.max(n, SLOW ? n : 300), { kvF32: true, tune: { matvec: { '*': { idot: 1, exact: 0 } } } });
    console.log(`# ${preset} ${type} integer mat-vecs: ${(100 * r.rate).toFixed(1)} % of ${Math.max(n, SLOW ? n : 300)} greedy tokens agree, logits within ` +
      `${(100 * r.worst).toFixed(4)} % of their range; ${r.info.stepDispatches} dispatches per token`);
    assert.match(JSON.stringify(r.variants.matvec), /idot 1/, 'the integer mat-vec ran');
    assert.ok(r.worst < 0.02, `logits differ by ${r.worst} of their range`);
    assert.ok(r.rate >= 0.995, `agreement ${r.rate}`);
  });
}

// The prompt's products on the matrix units (matmat-smx.wgsl, tune key "smx"; only GPUs that list i8 16x16x32
// subgroup matrices, e.g. the H200 through Dawn): prompts of 64 tokens so the mat-mats run, then decode.
const smxInfo = skip ? null : JSON.parse((() => { const p = M._malloc(4096); try { M._lw_wasm_gpu_info_json(p, 4096); return M.UTF8ToString(p); } finally { M._free(p); } })()).smx;
const hasSmx = !!smxInfo && smxInfo[2] === 32;
for (const [preset, type] of [['tiny', 'q4_0'], ['tiny-256', 'q4_k_m']]) {
  test(`greedy agreement WebGPU vs CPU, matrix units: ${preset} ${type}`, { skip: skip || (!cli && 'llamaweb CLI not built (LW_CLI)') || (!hasSmx && 'no i8 subgroup matrices on this device') }, async () => {
    const file = synth(preset, type);
    const prompt = Array.from({ length: 64 }, (_, i) => 1 + ((i * 37) % 200));
    const r = await agreement(file, prompt, 64, { kvF32: true, tune: { matmat: { '*': { smx: 1 } } } });
    console.log(`# ${preset} ${type} matrix units: ${(100 * r.rate).toFixed(1)} % of 64 greedy tokens agree, logits within ${(100 * r.worst).toFixed(4)} % of their range`);
    assert.match(JSON.stringify(r.variants.matmat), /smx 1/, 'the subgroup-matrix mat-mat ran');
    assert.ok(r.worst < 0.02, `logits differ by ${r.worst} of their range`);
    assert.ok(r.rate >= 0.995, `agreement ${r.rate}`);
  });
}

// The norms GPUs run (the f32 sum; with Q8_0 readers, rows of at least 8 floats per invocation round their 8-bit
// blocks in the same pass, rms-norm.wgsl Q8_QUADS), forced on this CPU adapter (exact: false) with the integer
// mat-vecs: the 2048-wide rows of a one-block llama-3.2-1b take that path at the 128 invocations CPU adapters use
// Rows of at most 8 floats per invocation (tiny: 256 wide) take the one-pass norm instead, rounding Q8_0 in it.
// The one-block llama-3.2-1b also runs its Q4_0 mat-vecs eight blocks a step (matvec-q8.wgsl OCT, rows of 2048
// and 8192: 16-byte loads). ("norm": 0 keeps the norms' own dispatches, which the Q4_0 / Q8_0 mat-vecs would
// otherwise take into their prologue in one-token steps: the next test.)
for (const [preset, type, extra, oct] of [['llama-3.2-1b', 'q4_0', ['--layers', '1', '--vocab-size', '512'], 0],
  ['llama-3.2-1b', 'q4_0', ['--layers', '1', '--vocab-size', '512'], 1], ['tiny', 'q4_0', [], 0]]) {
  const label = `${preset} ${type}${extra.length ? ', one block' : ''}${oct ? ', eight-block steps' : ''}`;
  test(`greedy agreement WebGPU vs CPU, the GPUs' norms and integer mat-vecs: ${label}`, { skip: skip || (!cli && 'llamaweb CLI not built (LW_CLI)') || big1b(preset) }, async () => {
    const file = synth(preset, type, extra);
    const prompt = Array.from({ length: 8 }, (_, i) => 1 + ((i * 37) % 200));
    const r = await agreement(file, prompt, 24, { exact: false, tune: { matvec: { '*': { idot: 1, exact: 0, oct, norm: 0 } } } });
    console.log(`# ${label} f32 norms, integer mat-vecs: ${(100 * r.rate).toFixed(1)} % of 24 greedy tokens agree, ` +
      `logits within ${(100 * r.worst).toFixed(4)} % of their range`);
    assert.match(JSON.stringify(r.variants.matvec), /idot 1/, 'the integer mat-vecs ran');
    if (oct) assert.match(JSON.stringify(r.variants.matvec), /oct 1/, 'the eight-block steps ran');
    assert.ok(r.worst < 0.02, `logits differ by ${r.worst} of their range`);
    assert.ok(r.rate >= 0.95, `agreement ${r.rate}`);
  });
}

// The RMS norm (and the residual add before it) in the prologue of the Q4_0 / Q8_0 integer mat-vec that reads
// it, in one-token steps (matvec-q8-norm.wgsl, tune key "norm"), and the gate|up one also computing SwiGLU and
// rounding it for the down projection (GLU_OUT): the same agreement with the CPU engine, and three dispatches
// fewer per block (the attention and FFN norms, the GLU's quantizer) than with the norms' own dispatches.
// (The llama-3.2-1b block: rows of 2048, 256 invocations a workgroup; tiny: rows of 64.)
// Q4_K / Q5_K weights (x rounded as Q8_K in the prologue, sub-blocks of 32 in the loop): every Q4_K projection
// whose norm it reads alone, so 2 fewer per block where all are Q4_K or Q5_K (synth's q4_k, q5_k) and at least the
// FFN's in a Q4_K_M file (whose Q6_K attn_v blocks keep separate projections and the norm). Their GLU_OUT is
// opt-in ("glu": 1 for the format): SwiGLU rounded in Q8_0-style blocks of 32 with the group words the K formats'
// down projection reads, one more dispatch fewer per block, but not the CPU's Q8_K bits (a looser agreement below).
for (const [preset, type, extra] of [['llama-3.2-1b', 'q4_0', ['--layers', '1', '--vocab-size', '512']],
  ['tiny', 'q8_0', []], ['tiny-qwen2', 'q4_0', []], ['tiny-256', 'q4_k', []], ['tiny-256', 'q5_k', []], ['tiny-256', 'q4_k_m', ['--layers', '4']]]) {
  const label = `${preset} ${type}${extra.length ? `, ${extra[1]} block(s)` : ''}`;
  test(`greedy agreement WebGPU vs CPU, norms in the mat-vecs' prologue: ${label}`, { skip: skip || (!cli && 'llamaweb CLI not built (LW_CLI)') || big1b(preset) ||
    subset(`prologue ${label}`, preset === 'tiny' || type === 'q4_k') }, async () => {
    const file = synth(preset, type, extra);
    const prompt = Array.from({ length: 8 }, (_, i) => 1 + ((i * 37) % 200));
    const kq = /^q[45]_k/.test(type);
    const tune = (norm, kglu = 0) => ({ exact: false, kvF32: true, tune: { matvec: { '*': { idot: 1, exact: 0, norm, glu: 1, rope: 0 },
      q4_k: { glu: kglu }, q5_k: { glu: kglu } } } });
    const r = await agreement(file, prompt, 24, tune(1)), off = await agreement(file, prompt, 2, tune(0));
    console.log(`# ${label}, norms in the prologue: ${(100 * r.rate).toFixed(1)} % of 24 greedy tokens agree, ` +
      `logits within ${(100 * r.worst).toFixed(4)} % of their range; ${r.info.stepDispatches} dispatches per token (${off.info.stepDispatches} with the norms' own)`);
    const fewer = off.info.stepDispatches - r.info.stepDispatches;
    if (type === 'q4_k_m') assert.ok(fewer >= r.info.n_layer, `${fewer} dispatches fewer, at least one per block`);
    else assert.equal(fewer, (/^q[45]_k$/.test(type) ? 2 : 3) * r.info.n_layer, 'dispatches fewer per block');
    assert.ok(r.worst < 0.02, `logits differ by ${r.worst} of their range`);
    assert.ok(r.rate >= 0.95, `agreement ${r.rate}`);
    if (kq) { // the K formats' opt-in GLU_OUT: one dispatch fewer per block than with the quantizer
      const g = await agreement(file, prompt, 24, { ...tune(1, 1), labels: true });
      console.log(`# ${label}, K-format GLU_OUT: ${(100 * g.rate).toFixed(1)} % of 24 greedy tokens agree, ` +
        `logits within ${(100 * g.worst).toFixed(4)} % of their range; ${g.info.stepDispatches} dispatches per token`);
      assert.match(g.labels.join(';'), /matvec-q8-norm [^;]*glu/, 'the K-format GLU_OUT variant ran');
      assert.equal(r.info.stepDispatches - g.info.stepDispatches, r.info.n_layer, 'one fewer per block');
      assert.ok(g.worst < 0.03, `logits differ by ${g.worst} of their range`);
      assert.ok(g.rate >= 0.85, `agreement ${g.rate} (Q8_0-style blocks, not the CPU's Q8_K)`);
    }
    if (preset === 'tiny') {
      // the kernel's other shapes (tune keys npre: the first weights loaded before the prologue; nwg, nrows:
      // workgroup size and rows per row group; nwg 512: the GLU one as 16 row groups of 4 rows, the Q|K|V one
      // 512 x 4): only the loads' order and the row blocking change, so the same greedy tokens and, within
      // float rounding, the same logits
      const shape = (k) => ({ exact: false, kvF32: true, tune: { matvec: { '*': { idot: 1, exact: 0, norm: 1, glu: 1, rope: 0, ...k } } } });
      const maxInv = JSON.parse((() => { const p = M._malloc(4096); try { M._lw_wasm_gpu_info_json(p, 4096); return M.UTF8ToString(p); } finally { M._free(p); } })()).maxComputeInvocationsPerWorkgroup;
      // ngrid: fewer workgroups than tiles, each looping over its tiles after one prologue (TILES)
      for (const k of [{ npre: 1 }, { nwg: 64, nrows: 2 }, ...(maxInv >= 512 ? [{ nwg: 512 }] : []), { ngrid: 1 }, { ngrid: 3, nwg: 64, nrows: 2 }]) {
        const s = await agreement(file, prompt, 24, { ...shape(k), labels: true });
        console.log(`# ${label}, prologue shape ${JSON.stringify(k)}: ${(100 * s.rate).toFixed(1)} % agree, logits within ${(100 * s.worst).toFixed(4)} %`);
        const want = k.npre ? /matvec-q8-norm [^;]* pre/ : k.ngrid === 1 ? /matvec-q8-norm [^;]*add glu tiles/ : k.ngrid ? /matvec-q8-norm [^;]*wg64 r2 add tiles/
          : k.nwg === 512 ? /matvec-q8-norm [^;]*wg512 r4 add glu/ : /matvec-q8-norm [^;]*wg64 r2/;
        assert.match(s.labels.join(';'), want, `the ${JSON.stringify(k)} variant ran (${s.labels})`);
        assert.equal(s.rate, r.rate, `the same greedy tokens with ${JSON.stringify(k)}`);
        assert.ok(Math.abs(s.worst - r.worst) < 1e-4, `logits ${s.worst} vs ${r.worst} with ${JSON.stringify(k)}`);
      }
    }
  });
}

// The attention block's RoPE and KV store as the epilogue of the Q|K|V mat-vec with its norm in the prologue
// (matvec-q8-norm.wgsl ROPE_OUT, tune key matvec "rope"; NORMAL RoPE pairs): the lane holding a pair's two
// sums rotates them and writes Q, the K and V cache cells as rope_qkv would, so the same values (the same f32
// sums and RoPE products: the same greedy tokens and logits as with rope_qkv's dispatch) and one dispatch
// fewer per block. f16 and f32 caches; the one-block 1B has no residual add before its Q|K|V norm, the
// two-block tiny one has (then 9 storage bindings: devices allowing fewer keep rope_qkv, said below).
for (const [preset, type, kvF32] of [['llama-3.2-1b', 'q4_0', false], ['tiny', 'q8_0', true], ['tiny', 'q4_0', false], ['tiny-256', 'q4_k', false]]) {
  const extra = preset === 'llama-3.2-1b' ? ['--layers', '1', '--vocab-size', '512'] : [];
  const label = `${preset} ${type}${extra.length ? ', one block' : ''}, ${kvF32 ? 'f32' : 'f16'} cache`;
  test(`greedy agreement WebGPU vs CPU, RoPE and KV store in the Q|K|V mat-vec: ${label}`, { skip: skip || (!cli && 'llamaweb CLI not built (LW_CLI)') || big1b(preset) ||
    subset(`Q|K|V RoPE ${label}`, preset === 'tiny' && type === 'q4_0') }, async () => {
    const file = synth(preset, type, extra);
    const prompt = Array.from({ length: 8 }, (_, i) => 1 + ((i * 37) % 200));
    const tune = (rope) => ({ exact: false, kvF32, tune: { matvec: { '*': { idot: 1, exact: 0, rope } } } });
    const n = 24;
    const r = await agreement(file, prompt, n, tune(1)), off = await agreement(file, prompt, n, tune(0));
    const limit = JSON.parse((() => { const p = M._malloc(4096); try { M._lw_wasm_gpu_info_json(p, 4096); return M.UTF8ToString(p); } finally { M._free(p); } })());
    const fewer = (off.info.stepDispatches - r.info.stepDispatches) / r.info.n_layer;
    console.log(`# ${label}, RoPE in the Q|K|V mat-vec: ${(100 * r.rate).toFixed(1)} % of ${n} greedy tokens agree ` +
      `(${(100 * off.rate).toFixed(1)} % without), logits within ${(100 * r.worst).toFixed(6)} % of their range ` +
      `(${(100 * off.worst).toFixed(6)} %); ${r.info.stepDispatches} dispatches per token (${off.info.stepDispatches} without); ` +
      `device storage bindings ${JSON.stringify(limit.maxStorageBuffersPerShaderStage)}`);
    assert.ok(fewer > 0, 'dispatches fewer');
    if (!extra.length && limit.maxStorageBuffersPerShaderStage >= 9) assert.equal(fewer, 1, 'one dispatch fewer per block');
    assert.equal(r.rate, off.rate, 'the same greedy tokens');
    assert.ok(Math.abs(r.worst - off.worst) < 1e-6, `the same logits (${r.worst} vs ${off.worst} of their range)`);
    if (preset === 'tiny' && type === 'q4_0') {
      // the Q|K|V kernel's own shape (tune keys qnwg / qnrows): only its row blocking changes
      const q = await agreement(file, prompt, n, { exact: false, kvF32, labels: true, tune: { matvec: { '*': { idot: 1, exact: 0, rope: 1, qnwg: 64, qnrows: 2 } } } });
      assert.match(q.labels.join(';'), /matvec-q8-norm [^;]*wg64 r2[^;]* rope/, `the Q|K|V shape ran (${q.labels})`);
      assert.equal(q.info.stepDispatches, r.info.stepDispatches, 'the same dispatches');
      assert.equal(q.rate, r.rate, 'the same greedy tokens with qnwg 64, qnrows 2');
      assert.ok(Math.abs(q.worst - r.worst) < 1e-4, `logits ${q.worst} vs ${r.worst}`);
      // and a grid of one workgroup looping over the tiles (qngrid: TILES with the RoPE epilogue)
      const t = await agreement(file, prompt, n, { exact: false, kvF32, labels: true, tune: { matvec: { '*': { idot: 1, exact: 0, rope: 1, qnwg: 64, qnrows: 2, qngrid: 1 } } } });
      assert.match(t.labels.join(';'), /matvec-q8-norm [^;]*wg64 r2[^;]* rope[^;]* tiles/, `the tiled Q|K|V ran (${t.labels})`);
      assert.equal(t.rate, r.rate, 'the same greedy tokens with qngrid 1');
      assert.ok(Math.abs(t.worst - r.worst) < 1e-4, `logits ${t.worst} vs ${r.worst}`);
    }
  });
}

// The attention block's RoPE and KV store in the decode kernel's prologue in one-token steps (attn-decode.wgsl
// ROPE, tune key attn "rope"), and with one split its output rounded for the output projection (Q8_OUT, head
// dims of a multiple of 32): the same agreement with the CPU engine as with rope_qkv's own dispatch (the same
// arithmetic), one dispatch fewer per block (without the fold a call of one split rounds its output as well, so
// the output projection's integer mat-vec needs no quantizer either way: the decode label says q8). 60 steps after a prompt of 8 take the tiny models' decode kernel past one split (CPU adapters:
// splits of at least 64 cells), where the reduce does the rounding.
// (Opt-in, so CI runs two of the cases; LW_TEST_SLOW=1 all five.)
const ATTN_ROPE_CASES = [['llama-3.2-1b', 'q4_0', true], ['tiny', 'q8_0', false], ['tiny', 'f16', false],
  ['tiny-phi3', 'q8_0', false], ['tiny-gemma2', 'f16', false]];
for (const [preset, type, q8] of SLOW ? ATTN_ROPE_CASES : ATTN_ROPE_CASES.slice(0, 2)) {
  const extra = preset === 'llama-3.2-1b' ? ['--layers', '1', '--vocab-size', '512'] : [];
  const label = `${preset} ${type}${extra.length ? ', one block' : ''}`;
  test(`greedy agreement WebGPU vs CPU, RoPE and KV store in the decode attention: ${label}`, { skip: skip || (!cli && 'llamaweb CLI not built (LW_CLI)') || big1b(preset) }, async () => {
    const file = synth(preset, type, extra);
    const prompt = Array.from({ length: 8 }, (_, i) => 1 + ((i * 37) % 200));
    const tune = (rope) => ({ exact: false, tune: { matvec: { '*': { idot: 1, exact: 0, rope: 0 } }, attn: { '*': { rope } } } });
    const n = q8 ? 24 : 60; /* the one-block 1B (slow on SwiftShader) stays within one split */
    const r = await agreement(file, prompt, n, tune(1)), off = await agreement(file, prompt, n, tune(0));
    const short = await agreement(file, prompt, 2, tune(1)), shortOff = await agreement(file, prompt, 2, { ...tune(0), labels: true });
    const fewer = (shortOff.info.stepDispatches - short.info.stepDispatches) / r.info.n_layer;
    console.log(`# ${label}, RoPE in the attention: ${(100 * r.rate).toFixed(1)} % of ${n} greedy tokens agree ` +
      `(${(100 * off.rate).toFixed(1)} % without), logits within ${(100 * r.worst).toFixed(4)} % of their range ` +
      `(${(100 * off.worst).toFixed(4)} %); ${short.info.stepDispatches} dispatches per token ` +
      `(${shortOff.info.stepDispatches} without), ${r.info.stepDispatches} after ${n + 8} tokens (${off.info.stepDispatches})`);
    assert.equal(fewer, 1, 'dispatches fewer per block');
    if (q8) assert.match(shortOff.labels.join(';'), /attn-decode [^;]* q8/, 'the unfused one-split call rounds its output');
    if (!q8) assert.equal(off.info.stepDispatches - r.info.stepDispatches, r.info.n_layer, 'one fewer per block past one split');
    assert.ok(r.worst < off.worst + 0.002, `logits differ by ${r.worst} of their range (${off.worst} without)`);
    assert.ok(r.rate >= off.rate - 1 / n, `agreement ${r.rate} (${off.rate} without)`);
    assert.ok(r.rate >= 0.9, `agreement ${r.rate}`);
  });
}

// The decode kernel's loads in flight (tune keys attn "vb": V cells, "kb": K quads per invocation at a time)
// only change when each load is issued, not the sums' order: the same greedy tokens and logits. The split
// policy's keys ("splits", "mchunk") change how the cells are cut, so the sums' order: the same tokens, the
// logits within float rounding. 60 steps after a prompt of 8 take the tiny model past one split; "one" (and
// "chunk") as large as the span keep it in one split, whose call also rounds the output for the output
// projection's integer mat-vec (Q8_OUT, head dims of a multiple of 32: the 1B case of the test before this
// one): no reduce, one dispatch fewer per block.
// (SwiftShader: attn.test.mjs runs these keys' kernels against the reference)
test('greedy agreement WebGPU vs CPU, the decode attention\'s loads in flight and splits: tiny q8_0', { skip: skip || (!cli && 'llamaweb CLI not built (LW_CLI)') ||
  subset('decode attention loads in flight and splits tiny q8_0') }, async () => {
  const file = synth('tiny', 'q8_0', []);
  const prompt = Array.from({ length: 8 }, (_, i) => 1 + ((i * 37) % 200));
  const run = (k) => agreement(file, prompt, 60, { exact: false, labels: true, tune: { matvec: { '*': { idot: 1, exact: 0 } }, attn: { '*': k } } });
  const base = await run({});
  for (const [k, same] of [[{ vb: 2, kb: 2 }, true], [{ vb: 16 }, true], [{ splits: 4, mchunk: 16 }, false], [{ one: 128, chunk: 128 }, false]]) {
    const r = await run(k);
    console.log(`# tiny q8_0, attention ${JSON.stringify(k)}: ${(100 * r.rate).toFixed(1)} % agree (${(100 * base.rate).toFixed(1)} % by default), ` +
      `logits within ${(100 * r.worst).toFixed(6)} % (${(100 * base.worst).toFixed(6)} %); ${r.labels.filter((l) => l.startsWith('attn-decode')).join(', ')}`);
    if (k.vb) assert.match(r.labels.join(';'), new RegExp(`attn-decode [^;]*vb${k.vb} kb${k.kb ?? 0}`), `the ${JSON.stringify(k)} variant ran`);
    if (k.one) {
      assert.match(r.labels.join(';'), /attn-decode [^;]*c128/, 'the one-split variant ran');
      // (tiny's head dim of 16 has no 8-bit attention output: then the quantizer's dispatch stays either way)
      if (/attn-reduce [^;]* q8/.test(base.labels.join(';'))) assert.match(r.labels.join(';'), /attn-decode [^;]*c128[^;]* q8/, 'the one-split call rounded its output');
      assert.equal(base.info.stepDispatches - r.info.stepDispatches, r.info.n_layer, 'no reduce: one dispatch fewer per block');
    }
    assert.equal(r.rate, base.rate, `the same greedy tokens with ${JSON.stringify(k)}`);
    assert.ok(Math.abs(r.worst - base.worst) < (same ? 1e-9 : 1e-4), `logits ${r.worst} vs ${base.worst} with ${JSON.stringify(k)}`);
  }
});

test('a token embedding larger than one 128 MiB binding (split by rows)', { skip: skip || (!cli && 'llamaweb CLI not built') || (!process.env.LW_TEST_BIG && 'set LW_TEST_BIG=1 (writes a ~300 MB model)') }, async () => {
  // the Llama 3.2 1B shape cut to one block: 128256 x 2048 Q8_0 = 266 MiB of embedding, tied to the output,
  // so on lavapipe both the row gather and the output mat-vec run over three pieces
  const file = synth('llama-3.2-1b', 'q8_0', ['--layers', '1', '--vocab-size', '128256']);
  const r = await agreement(file, [1, 5, 9, 70000, 128000], 12, { nCtx: 64 });
  console.log(`# big vocab: ${(100 * r.rate).toFixed(1)} % of 12 agree, logits within ${(100 * r.worst).toFixed(3)} % of their range, ${r.info.weightBytes} bytes of weights`);
  // Q8_0: the CPU rounds activations to 8 bits (see above); the logits bound is the real check, near-ties of
  // random weights may go either way (measured: 11 of 12, logits within 1.0 % of their range)
  assert.ok(r.worst < 0.03, `logits differ by ${r.worst} of their range`);
  assert.ok(r.rate >= 0.75, `agreement ${r.rate}`);
});

if (ssSkipped.length) console.log(`# SwiftShader: ${ssSkipped.length} model cases skipped (lavapipe runs them; LW_TEST_SLOW=1 runs them here too): ${ssSkipped.join(', ')}`);

after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100));
