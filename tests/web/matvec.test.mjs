// Mat-vec kernel (src/webgpu/shaders/matvec.wgsl) end to end through the wasm build: random weights are
// quantized by our C quantizers inside the wasm module, the GPU kernel runs through the C HAL and the JS glue
// (web/lw-gpu.js) on whatever adapter Dawn finds (lavapipe, SwiftShader via VK_ICD_FILENAMES, a real GPU),
// and the result is compared with the CPU reference (dequantize + dot in double): normalised MSE.
// Run: node --test tests/web/   (scripts/test-webgpu.sh runs it on lavapipe and on SwiftShader)
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup } from '../../web/lw-node.mjs';
import { isLavapipe, isSwiftShader } from './adapter.mjs';
import { TYPES, BOUND, kFor, matvecNmse, matvecMismatch, actqOf } from './matvec-check.mjs';

const ctx = await setup();
const skip = ctx.skip || false;
if (skip) console.log('SKIP: ' + skip);
const M = ctx.Module;

let gpuInfo = null;
function info() {
  if (!gpuInfo) {
    const p = M._malloc(2048);
    const n = M._lw_wasm_gpu_info_json(p, 2048);
    assert.ok(n > 0, 'lw_wasm_gpu_info_json failed');
    gpuInfo = JSON.parse(M.UTF8ToString(p));
    M._free(p);
  }
  return gpuInfo;
}

// Runs one variant on a fresh problem; returns the NMSE (matvec-check.mjs, shared with the browser page).
const matvec = (type, rows, k, opts) => matvecNmse(M, TYPES[type], rows, k, opts);

// CI budget (2 cores, both CPU Vulkan drivers): every format runs the f32 workgroup-reduction path; the other
// variants (f16, subgroups, several rows, whole blocks) run for a few representative layouts — a plain float,
// legacy 32-blocks, K-quant super-blocks, a grid format — and for every format with LW_TEST_SLOW=1.
const SLOW = process.env.LW_TEST_SLOW === '1';
const FEW = ['F32', 'F16', 'Q4_0', 'Q8_0', 'Q4_K', 'Q6_K', 'IQ2_XXS'];
const variantTypes = Object.keys(TYPES).filter((t) => SLOW || FEW.includes(t));
// SwiftShader without LW_TEST_SLOW=1 (CI's 2 cores: ~100 s there): every format still runs the f32 test
// above, activation rounding each rounding kind and block size once (lavapipe: every format), the
// several-row shapes below every row count for Q4_0 and, for the other formats, one plain shape (2 or 8 rows
// in turn: lavapipe runs only the f16 / subgroup shapes, so each format keeps a plain one here). The file
// prints what it left out.
const ssLight = !skip && !SLOW && isSwiftShader(ctx.info);
const ACTQ_SS = ['F32', 'F16', 'BF16', 'Q4_0', 'Q4_1', 'Q2_0', 'Q1_0', 'Q4_K', 'IQ2_XXS', 'NVFP4'];
const ssRows = (type) => (type === 'Q4_0' ? [2, 4, 8] : [[2, 8][variantTypes.filter((t) => t !== 'Q4_0').indexOf(type) % 2]]);

test('device info seen from C matches the JS device', { skip }, () => {
  const i = info();
  const d = ctx.device;
  console.log(`# adapter: ${i.vendor} / ${i.architecture} / ${i.device}; f16=${i.f16} subgroups=${i.subgroups} ` +
    `(sizes ${i.subgroupMinSize}..${i.subgroupMaxSize}) timestamp=${i.timestampQuery}; ` +
    `maxStorageBufferBindingSize=${i.maxStorageBufferBindingSize}`);
  assert.equal(i.maxBufferSize, d.limits.maxBufferSize);
  assert.equal(i.maxStorageBufferBindingSize, d.limits.maxStorageBufferBindingSize);
  assert.equal(i.maxComputeInvocationsPerWorkgroup, d.limits.maxComputeInvocationsPerWorkgroup);
  assert.equal(i.maxComputeWorkgroupsPerDimension, d.limits.maxComputeWorkgroupsPerDimension);
  assert.equal(i.f16, d.features.has('shader-f16') ? 1 : 0);
  assert.equal(i.subgroups, d.features.has('subgroups') ? 1 : 0);
});

for (const type of Object.keys(TYPES)) {
  for (const f16 of [0, 1]) {
    for (const sg of [0, 1]) {
      if ((f16 || sg) && !variantTypes.includes(type)) continue;
      const name = `matvec ${type} ${f16 ? 'f16' : 'f32'} ${sg ? 'subgroups' : 'workgroup'} reduction`;
      test(name, { skip }, async (t) => {
        const i = info();
        if (f16 && !i.f16) return t.skip('no shader-f16 on this adapter');
        if (sg && !i.subgroups) return t.skip('no subgroups on this adapter');
        // odd row counts and k not a multiple of the workgroup's stride exercise the loop tails
        const nmse = await matvec(type, 67, kFor(type, 1024 + 96), { f16, sg, seed: 7 + f16 * 2 + sg });
        console.log(`# ${name}: nmse ${nmse.toExponential(3)}`);
        assert.ok(nmse < BOUND[f16 ? 'f16' : 'f32'], `nmse ${nmse}`);
      });
    }
  }
}

// Activation rounding (ACTQ): x rounded as the CPU engine rounds it for the format (8-bit blocks, f16, bf16)
// before the products, so the GPU's result is the CPU's own product up to float summation order, where the
// plain kernel differs from it by the activation quantization error. Every format, f32 path, whole blocks.
test('activation rounding: every format matches the CPU engine\'s own product', { skip }, async () => {
  const i = info();
  const worst = { plain: Infinity, actq: 0 };
  for (const type of Object.keys(TYPES)) {
    if (ssLight && !ACTQ_SS.includes(type)) continue;
    const k = kFor(type, 1024 + 96), sg = i.subgroups ? 1 : 0;
    const plain = await matvec(type, 67, k, { blocks: 1, seed: 11, cpu: true });
    const nmse = await matvec(type, 67, k, { blocks: 1, sg, rows: 4, actq: actqOf(type), seed: 11, cpu: true });
    // the staged variant (weights copied to workgroup memory per K step, scales per step): a tile of 64 words
    // makes several steps, some blocks straddling the 2-byte alignment
    const staged = await matvec(type, 67, k, { sg, rows: 4, actq: actqOf(type), stage: 64, seed: 11, cpu: true });
    console.log(`# ${type}: nmse vs the CPU's product ${nmse.toExponential(2)} rounded, ${staged.toExponential(2)} staged, ` +
      `${plain.toExponential(2)} plain`);
    // (Q4_1/Q5_1 pair with Q8_1, whose rounded block sum the CPU multiplies by the weights' minimum: the
    // kernel adds that rounding's difference, actq_min_corr; without it they stayed 1.8e-7 apart)
    const bound = 1e-9;
    assert.ok(nmse < bound && (type === 'F32' || nmse < plain / 10), `${type}: nmse ${nmse} against the CPU product (plain ${plain})`);
    assert.ok(staged < bound, `${type} staged: nmse ${staged} against the CPU product`);
    if (type !== 'F32') worst.plain = Math.min(worst.plain, plain);
    worst.actq = Math.max(worst.actq, nmse);
  }
  console.log(`# worst rounded ${worst.actq.toExponential(2)}, best plain ${worst.plain.toExponential(2)}`);
});

// The integer mat-vec (matvec-q8.wgsl, what GPUs run): x rounded to 8 bits once by its own pass
// (actq-quant.wgsl), dot4I8Packed over the weights' integer codes, the CPU's block terms in f32. Its result is
// the CPU engine's own product up to float summation order, for every format that has integer codes, with
// and without subgroups, one and several rows per workgroup, k with a tail past the workgroup's stride.
const IDOT_TYPES = ['Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'IQ4_NL', 'Q4_K', 'Q5_K', 'Q6_K'];
test('integer mat-vec: every format with integer codes matches the CPU engine\'s own product', { skip }, async () => {
  const i = info();
  for (const type of IDOT_TYPES) {
    const k = kFor(type, 1024 + 96);
    const out = [];
    for (const [sg, rows, wg] of [[0, 1, 64], [i.subgroups ? 1 : 0, 4, 128], [0, 3, 32]]) {
      const nmse = await matvec(type, 67, k, { sg, rows, wg, actq: actqOf(type), idot: 1, seed: 13 + rows, cpu: true });
      const plain = await matvec(type, 67, k, { sg, rows, wg, blocks: 1, seed: 13 + rows, cpu: true });
      assert.ok(nmse < 1e-9 && nmse < plain / 10, `${type} sg ${sg} rows ${rows}: nmse ${nmse} against the CPU product (unrounded x: ${plain})`);
      out.push(nmse.toExponential(2));
    }
    if (type === 'Q4_0' || type === 'Q8_0') { // two blocks per step (idot 2: whole-word loads); k of 34 blocks
      for (const [sg, rows, wg] of [[0, 1, 64], [i.subgroups ? 1 : 0, 2, 128], [0, 3, 32]]) {
        const nmse = await matvec(type, 67, 1088, { sg, rows, wg, actq: 1, idot: 2, seed: 17 + rows, cpu: true });
        assert.ok(nmse < 1e-9, `${type} pairs sg ${sg} rows ${rows}: nmse ${nmse} against the CPU product`);
        out.push('pairs ' + nmse.toExponential(2));
      }
      // eight blocks per step (idot 3: 16-byte loads); k of 5 octets, so lanes idle or loop depending on wg
      for (const [sg, rows, wg] of [[0, 1, 2], [i.subgroups ? 1 : 0, 4, 16], [0, 3, 4], [i.subgroups ? 1 : 0, 2, 64]]) {
        const nmse = await matvec(type, 67, 1280, { sg, rows, wg, actq: 1, idot: 3, seed: 19 + rows, cpu: true });
        assert.ok(nmse < 1e-9, `${type} octets sg ${sg} rows ${rows} wg ${wg}: nmse ${nmse} against the CPU product`);
        out.push('octets ' + nmse.toExponential(2));
      }
    }
    console.log(`# ${type}: integer mat-vec nmse vs the CPU's product ${out.join(' / ')}`);
  }
});

// The CPU-order kernel (matvec-exact.wgsl): every row bit-identical to the CPU engine's product, in its generic
// order (TQ1_0, TQ2_0, IQ1_S, IQ1_M, the IQ2 / IQ3 grids), ggml's x86 lanes (Q3_K, Q5_K, Q6_K) or llama.cpp's
// repacked gemv and gemm orders (Q2_K, Q4_K), over one and several super-blocks (the repacked orders chain
// fmaf over them) and with 1 or several rows per workgroup. The float-summing kernel differs in most rows,
// which keeps the check honest.
test('exact order: the CPU engine\'s bits in every row', { skip }, async () => {
  const cases = [['TQ1_0', 0], ['TQ2_0', 0], ['IQ1_S', 0], ['IQ1_M', 0], ['IQ2_XXS', 0], ['IQ2_XS', 0], ['IQ2_S', 0],
    ['IQ3_XXS', 0], ['IQ3_S', 0], ['Q3_K', 0], ['Q5_K', 0], ['Q6_K', 0], ['Q2_K', 1], ['Q4_K', 1]];
  for (const [type, repacked] of cases) {
    for (const k of [256, 768, 2304]) {
      for (const rows of [1, 4]) {
        const bad = await matvecMismatch(M, TYPES[type], 67, k, { exact: 1, rows, repacked, seed: 3 + rows });
        assert.equal(bad, 0, `${type} k=${k} rows=${rows}: ${bad} of 67 rows differ from the CPU's bits`);
      }
    }
    if (repacked) { // the gemm order of tokens in groups of 4 (exact = 2)
      const bad = await matvecMismatch(M, TYPES[type], 67, 768, { exact: 2, rows: 4, repacked: 2, seed: 9 });
      assert.equal(bad, 0, `${type} gemm order: ${bad} of 67 rows differ from the CPU's bits`);
      const other = await matvecMismatch(M, TYPES[type], 67, 768, { exact: 1, rows: 4, repacked: 2, seed: 9 });
      assert.ok(other > 0, `${type}: the gemv order matched the gemm order's bits in every row`);
    }
    const float = await matvecMismatch(M, TYPES[type], 67, 2304, { blocks: 1, rows: 4, actq: actqOf(type), repacked, seed: 5 });
    console.log(`# ${type}: exact kernel 0 of 67 rows differ at k 256/768/2304; float-summing kernel ${float} of 67`);
    assert.ok(float > 0, `${type}: the float kernel matched every row too (the check would not see a wrong order)`);
  }
});

// (lavapipe compiles these ~6x slower than SwiftShader: there, without LW_TEST_SLOW=1, only the shapes that
// use its shader-f16 or subgroups; SwiftShader, the other driver of scripts/test-webgpu.sh, runs the plain ones)
const plainElsewhere = !skip && !SLOW && isLavapipe(ctx.info);
test('several rows per workgroup (x chunks shared; a partial last group), whole blocks per invocation', { skip }, async () => {
  const i = info();
  for (const type of variantTypes) {
    for (const rows of ssLight ? ssRows(type) : [2, 4, 8]) {
      const sg = rows === 4 && i.subgroups ? 1 : 0, f16 = rows === 8 && i.f16 ? 1 : 0;
      if (plainElsewhere && !sg && !f16) continue;
      for (const blocks of [0, 1]) {
        const nmse = await matvec(type, 67, kFor(type, 512 + 32 * blocks), { rows, sg, f16, blocks, wg: 128, seed: rows });
        assert.ok(nmse < BOUND[f16 ? 'f16' : 'f32'], `${type} rows=${rows} sg=${sg} f16=${f16} blocks=${blocks}: ${nmse}`);
      }
      // staged weight tiles of 64 and 256 words (several K steps, and one step for the whole row)
      for (const stage of [64, 256]) {
        const nmse = await matvec(type, 67, kFor(type, 512), { rows, sg, f16, stage, wg: 128, seed: rows + stage });
        assert.ok(nmse < BOUND[f16 ? 'f16' : 'f32'], `${type} rows=${rows} sg=${sg} f16=${f16} stage=${stage}: ${nmse}`);
      }
    }
  }
});

test('weights streamed from a host source (not through the wasm heap) give the same result', { skip }, async () => {
  for (const type of ['Q4_0', 'Q8_0', 'F16']) {
    const a = await matvec(type, 33, 512, { seed: 3 });
    const b = await matvec(type, 33, 512, { seed: 3, viaHost: true });
    assert.ok(b < BOUND.f32, `${type}: nmse ${b}`);
    assert.equal(a, b, `${type}: heap upload ${a} vs streamed ${b}`);
  }
  // from a Blob (a File in the browser), in many small chunks (1001 bytes asked: rounded to 1000)
  const a = await matvec('Q4_0', 33, 512, { seed: 3 });
  const b = await matvec('Q4_0', 33, 512, { seed: 3, viaHost: 'blob', chunk: 1001 });
  assert.equal(a, b, `heap upload ${a} vs Blob in 1000-byte chunks ${b}`);
  // an odd byte count (Q4_0 blocks are 18 bytes: 3 blocks = 54) is padded to a multiple of 4 on upload
  const odd = await matvec('Q4_0', 3, 32, { seed: 5, viaHost: true });
  assert.ok(odd < BOUND.f32, `odd-sized weights: nmse ${odd}`);
});

test('f32/f16 rows of 4 mod 8 elements (a partial last block: stories260K ffn_down has k = 172)', { skip }, async () => {
  for (const type of ['F32', 'F16']) {
    for (const f16 of [0, info().f16]) {
      const nmse = await matvec(type, 21, 172, { f16, seed: 13 });
      assert.ok(nmse < BOUND[f16 ? 'f16' : 'f32'], `${type} f16=${f16}: nmse ${nmse}`);
    }
  }
});

test('workgroup sizes and a grid over 65535 rows', { skip }, async () => {
  for (const wg of [16, 128, 256]) {
    const nmse = await matvec('Q8_0', 40, 256, { wg, seed: wg });
    assert.ok(nmse < BOUND.f32, `wg ${wg}: nmse ${nmse}`);
  }
  // 70000 rows need a second grid dimension (maxComputeWorkgroupsPerDimension is 65535 here)
  const big = await matvec('Q4_0', 70000, 32, { seed: 11, wg: 16 }); // small workgroups: SwiftShader pays per invocation
  assert.ok(big < BOUND.f32, `70000 rows: nmse ${big}`);
});

test('closing one HAL context leaves the objects of another alone', { skip }, async () => {
  const h = M._lw_wasm_matvec_new(TYPES.Q8_0, 5, 64, 9);
  try {
    assert.equal(M._lw_wasm_matvec_upload(h, 0), 0);
    await M.lwGpu.settle();
    gpuInfo = null;
    info(); // opens and destroys a second context in between
    assert.equal(M._lw_wasm_matvec_run(h, 0, 0, 64, 1, 0), 0, M.UTF8ToString(M._lw_wasm_matvec_error(h)));
    assert.equal(await M.lwGpu.settle(), null);
    const nmse = M._lw_wasm_matvec_nmse(h);
    assert.ok(nmse >= 0 && nmse < BOUND.f32, `nmse ${nmse}: ${M.UTF8ToString(M._lw_wasm_matvec_error(h))}`);
  } finally {
    M._lw_wasm_matvec_free(h);
  }
});

test('steps after warm-up create no GPU objects (invariant 2)', { skip }, async () => {
  const h = M._lw_wasm_matvec_new(TYPES.Q4_0, 64, 256, 4);
  try {
    assert.equal(M._lw_wasm_matvec_upload(h, 0), 0);
    await M.lwGpu.settle();
    // warm-up: the variant's pipeline + bind group, the read-back staging buffer
    assert.equal(M._lw_wasm_matvec_bench(h, 0, 0, 64, 1, 0, 1), 0);
    assert.equal(await M.lwGpu.settle(), null);
    const before = { ...M.lwGpu.counters };
    for (let step = 0; step < 5; step++) {
      assert.equal(M._lw_wasm_matvec_bench(h, 0, 0, 64, 1, 0, 3), 0, M.UTF8ToString(M._lw_wasm_matvec_error(h)));
      assert.equal(await M.lwGpu.settle(), null);
    }
    const c = M.lwGpu.counters;
    assert.equal(c.buffers, before.buffers);
    assert.equal(c.stagingBuffers, before.stagingBuffers);
    assert.equal(c.pipelines, before.pipelines);
    assert.equal(c.bindGroups, before.bindGroups);
    assert.equal(c.dispatches - before.dispatches, 15);
    assert.equal(c.submits - before.submits, 5);
    assert.equal(c.bytesRead - before.bytesRead, 5 * 64 * 4);
    const nmse = M._lw_wasm_matvec_nmse(h);
    assert.ok(nmse >= 0 && nmse < BOUND.f32, `nmse ${nmse}`);
  } finally {
    M._lw_wasm_matvec_free(h);
  }
});

test('a broken variant is reported, not crashed on', { skip }, async () => {
  const h = M._lw_wasm_matvec_new(TYPES.Q4_0, 4, 32, 1);
  try {
    assert.equal(M._lw_wasm_matvec_upload(h, 0), 0);
    const st = M._lw_wasm_matvec_run(h, 0, 0, 48, 1, 0); // not a power of two: refused by C before the GPU
    assert.notEqual(st, 0);
    assert.match(M.UTF8ToString(M._lw_wasm_matvec_error(h)), /workgroup size 48/);
  } finally {
    M._lw_wasm_matvec_free(h);
  }
});

if (ssLight) {
  console.log(`# SwiftShader subset (LW_TEST_SLOW=1: all): activation rounding skips ${Object.keys(TYPES).filter((t) => !ACTQ_SS.includes(t)).join(' ')} ` +
    `(lavapipe runs them); several rows per workgroup only ${variantTypes.map((t) => `${t} ${ssRows(t).join('/')}`).join(', ')} rows`);
}

// Dawn for Node may keep the process alive (and must not be torn down by GC first): exit explicitly once
// the runner has printed its summary.
after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100));
