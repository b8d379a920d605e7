// Mat-mat kernel (src/webgpu/shaders/matmat.wgsl, kernel-matmat.c) and kernel tunables (gpu-tune.c) end to
// end through the wasm build (web/lw-wasm-matmat.c): random weights quantized by our C quantizers, X random,
// Y[t] = W X[t] on the Dawn adapter against the CPU reference (dequantize + dot in double; web/lw-wasm-ref.c),
// as normalised MSE over every token. Every format of the GPU format table (src/webgpu/gpu-formats.c, read
// through lw_wasm_gpu_formats_json) is tested, so a format added there is covered without editing this file.
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/matmat.test.mjs (scripts/test-webgpu.sh)
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setup } from '../../web/lw-node.mjs';
import { isSwiftShader } from './adapter.mjs';
import { BOUND } from './matvec-check.mjs';
import { emulateSmx } from './smx-emulate.mjs';

const ctx = await setup();
const skip = ctx.skip || false;
if (skip) console.log('SKIP: ' + skip);
const M = ctx.Module;

// Calls a C function writing JSON into a buffer and parses it.
function cJson(fn, ...args) {
  const cap = 1 << 16, p = M._malloc(cap);
  try {
    const n = fn(...args, p, cap);
    assert.ok(n > 0, 'JSON entry point failed');
    return JSON.parse(M.UTF8ToString(p));
  } finally {
    M._free(p);
  }
}
const formats = skip ? [] : cJson(M._lw_wasm_gpu_formats_json);
const features = skip ? {} : { f16: ctx.device.features.has('shader-f16'), sg: ctx.device.features.has('subgroups') };
const slow = process.env.LW_TEST_SLOW === '1';
const swiftshader = !skip && isSwiftShader(ctx.info);
// SwiftShader without LW_TEST_SLOW=1 (its compiles made this file ~290 s of CI's 2 cores, lavapipe ~10 s):
// every format still runs the per-format kernel test there, the every-format matrices of activation rounding
// and integer products a subset (each rounding kind and block size once; integer products for 32-blocks with
// and without a minimum and two K formats), and the tune.mjs sweep (the tool's logic, not the driver's) only
// on lavapipe, which runs them all. The file prints what it left out.
const ssLight = swiftshader && !slow;
const ACTQ_SS = ['f32', 'f16', 'bf16', 'q4_0', 'q4_1', 'q2_0', 'q1_0', 'q4_K', 'iq2_xxs', 'nvfp4'];
const IDOT_SS = ['q4_0', 'q5_1', 'q4_K', 'q6_K'];

// k for a format: the smallest multiple of its block from 256 up whose chunk count (k / 8) is not a multiple
// of 6, so K steps of 48 (6 chunks) leave a partial last step whatever the block size.
const kOf = (f) => {
  let k = Math.ceil(256 / f.block) * f.block;
  while ((k / 8) % 6 === 0) k += f.block;
  return k;
};
// The variant of the per-format runs: partial tiles in all three directions for 67 rows, 37 tokens, kOf(f).
const ODD = { tm: 32, tn: 32, tk: 48, rm: 4, rn: 4 };
// Formats the slower, variant-heavy tests use (pipelines compile per format and variant: CPU drivers pay).
const FEW = ['q4_0', 'q4_K'];

function err(h) {
  return M.UTF8ToString(M._lw_wasm_matmat_error(h));
}

// One problem: rows x k weights of format f, `tokens` tokens, placed with layout {w, x, xPad, y, yPad}; runs
// each of `runs` ({f16, tm, tn, tk, rm, rn, actq: X rounded as the CPU rounds it (2: and integer products), cpu: NMSE against the CPU
// engine's own products} or {matvec: {...}}) and returns their NMSEs (throws on a failure).
async function check(f, rows, k, tokens, runs, { seed = 1, layout = {} } = {}) {
  const h = M._lw_wasm_matmat_new(f.type, rows, k, tokens, seed);
  if (!h) throw new Error('out of memory');
  try {
    if (err(h)) throw new Error('setup: ' + err(h));
    const { w = 0, x = 0, xPad = 0, y = 0, yPad = 0 } = layout;
    if (M._lw_wasm_matmat_upload(h, w, x, xPad, y, yPad) !== 0) throw new Error('upload: ' + err(h));
    let e = await M.lwGpu.settle();
    if (e) throw new Error('GPU error after upload: ' + e);
    const out = [];
    for (const r of runs) {
      const st = r.matvec
        ? M._lw_wasm_matmat_matvec(h, r.matvec.f16 ?? 0, r.matvec.sg ?? 0, r.matvec.wg ?? 0, r.matvec.rows ?? 1, r.matvec.blocks ?? 0, 0)
        : M._lw_wasm_matmat_run(h, r.f16 ?? 0, r.tm ?? 0, r.tn ?? 0, r.tk ?? 0, r.rm ?? 0, r.rn ?? 0, r.smx ? 3 : r.actq === 2 ? 2 : r.actq ? 1 : 0, r.pad ?? -1);
      if (st !== 0) throw new Error(`run ${JSON.stringify(r)}: ${err(h)}`);
      e = await M.lwGpu.settle();
      if (e) throw new Error(`GPU error, ${JSON.stringify(r)}: ${e}`);
      const nmse = r.cpu ? M._lw_wasm_matmat_nmse_cpu(h) : M._lw_wasm_matmat_nmse(h);
      if (!(nmse >= 0)) throw new Error(`check ${JSON.stringify(r)}: ${err(h)}`);
      out.push(nmse);
    }
    return out;
  } finally {
    M._lw_wasm_matmat_free(h);
  }
}

test('the format table is visible and every entry has a block layout', { skip }, () => {
  console.log(`# formats: ${formats.map((f) => f.name).join(' ')}`);
  assert.ok(formats.length >= 4, 'F32, F16, Q8_0 and Q4_0 at least');
  for (const f of formats) assert.ok(f.block % 8 === 0 && f.bytes > 0, JSON.stringify(f));
});

// Every format x arithmetic, one variant with partial row, token and K tiles, W at an odd-half-word byte
// offset (2 mod 4: every routine must read through w_u32/w_u16), X and Y at offsets with strides; nothing
// outside the Y[t] ranges may be written (lw_wasm_matmat_nmse checks the poison there).
const LAYOUT = { w: 65538, x: 4, xPad: 12, y: 3, yPad: 5 };
// CI budget: f16 for a few layouts only, every format with LW_TEST_SLOW=1 (f32 always covers every format).
const F16_FEW = ['f16', 'q4_0', 'q8_0', 'q4_K', 'iq2_xxs'];
for (const f of formats) {
  for (const f16 of [0, 1]) {
    if (f16 && process.env.LW_TEST_SLOW !== '1' && !F16_FEW.includes(f.name)) continue;
    const name = `matmat ${f.name} ${f16 ? 'f16' : 'f32'}: odd rows and tokens, partial K step, offsets and strides`;
    test(name, { skip }, async (t) => {
      if (f16 && !features.f16) return t.skip('no shader-f16 on this adapter');
      const k = kOf(f);
      const [nmse] = await check(f, 67, k, 37, [{ f16, ...ODD }], { seed: 3 + f.type + f16, layout: LAYOUT });
      console.log(`# ${name} (k=${k}): nmse ${nmse.toExponential(2)}`);
      assert.ok(nmse < BOUND[f16 ? 'f16' : 'f32'], `nmse ${nmse}`);
    });
  }
}

// Activation rounding (ACTQ, shaders/actq.wgsl): with X rounded as the CPU engine rounds it for the format,
// Y is the CPU's own product up to float summation order (the plain kernel differs from it by the 8-bit
// activation error, ~1e-5). Partial K steps of 48 make steps straddle weight blocks and 256-element blocks
// span several steps (their scales are reused).
test('activation rounding: every format matches the CPU engine\'s own products', { skip }, async () => {
  for (const f of formats) {
    if (ssLight && !ACTQ_SS.includes(f.name)) continue;
    const [plain, nmse] = await check(f, 67, kOf(f), 37, [{ ...ODD, cpu: true }, { ...ODD, actq: true, cpu: true }],
      { seed: 9 + f.type, layout: LAYOUT });
    console.log(`# ${f.name}: nmse vs the CPU's products ${nmse.toExponential(2)} rounded, ${plain.toExponential(2)} plain`);
    assert.ok(nmse < 1e-9 && (f.name === 'f32' || nmse < plain / 10), `${f.name}: ${nmse} (plain ${plain})`);
  }
});

// Integer products (shaders/matmat-q8.wgsl, "idot"): the formats paired with 8-bit activation blocks of 32
// as signed-byte tiles and dot4I8Packed. Their blocks' integer sums are the CPU's, so the results are its
// products up to float summation order. Odd rows and tokens, K steps of one and of two blocks (the last one
// partial), the offsets and strides of LAYOUT; other formats are refused.
// The K formats (Q4_K, Q5_K, Q6_K) pair with Q8_K super-blocks of 256: K steps of one super-block, integer
// scales (and mins) per sub-block.
const IDOT = ['q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl', 'q4_K', 'q5_K', 'q6_K'];
test('integer products (idot): the CPU engine\'s own products for its formats, refused for others', { skip }, async () => {
  for (const f of formats) {
    if (!IDOT.includes(f.name)) {
      if (!['q2_K', 'f32'].includes(f.name)) continue;
      await assert.rejects(check(f, 16, kOf(f), 4, [{ tm: 64, tn: 64, tk: 32, rm: 4, rn: 4, actq: 2, cpu: true }]), /integer/);
      continue;
    }
    if (ssLight && !IDOT_SS.includes(f.name)) continue;
    const big = f.block === 256;
    const k = kOf(f) + (big ? 256 : 32 * 3); // 32-blocks: an odd number, so the 64-wide step ends half full
    const runs = big
      ? [{ tm: 32, tn: 32, tk: 256, rm: 4, rn: 4, actq: 2, cpu: true }, { tm: 16, tn: 64, tk: 256, rm: 2, rn: 8, actq: 2, cpu: true },
        { tm: 32, tn: 32, tk: 32, rm: 4, rn: 4, actq: 1, cpu: true }]
      : [{ tm: 32, tn: 32, tk: 32, rm: 4, rn: 4, actq: 2, cpu: true }, { tm: 64, tn: 16, tk: 64, rm: 8, rn: 2, actq: 2, cpu: true },
        { tm: 32, tn: 32, tk: 32, rm: 4, rn: 4, actq: 1, cpu: true }];
    const [a, b, fl] = await check(f, 67, k, 37, runs, { seed: 31 + f.type, layout: LAYOUT });
    console.log(`# ${f.name} idot (k=${k}): nmse vs the CPU's products ${a.toExponential(2)} / ${b.toExponential(2)}, f32 tiles ${fl.toExponential(2)}`);
    assert.ok(a < 1e-9 && b < 1e-9, `${f.name}: ${a} / ${b}`);
  }
});

// The matrix units (shaders/matmat-smx.wgsl, "smx": WebGPU subgroup matrices, i8 x i8 -> i32 16 x 16 x 32):
// X rounded as the CPU rounds it for the format, then X (per token) and W (per row) as 16-bit fixed point in
// two signed-byte digits (smx-prep.wgsl), three integer products per fragment and K step, scales once at the
// end. Against the CPU engine's own products the error is that of a 15-bit mantissa relative to a token's /
// row's largest value (nmse ~1e-9 on these random data; the unrounded X would differ by the 8-bit blocks'
// ~1e-5), so the bound is SMX_BOUND. Every
// quantized format. Only GPUs list such configurations (lavapipe and SwiftShader list none): elsewhere the
// variant must be refused with a reason, as for the float formats everywhere. Partial tiles in every
// direction (67 rows, 37 tokens, K steps that end part full), the offsets and strides of LAYOUT, several
// tilings.
const SMX_BOUND = 1e-7;
const smxInfo = skip ? null : cJson(M._lw_wasm_gpu_info_json).smx;
const hasSmx = !!smxInfo && smxInfo[0] === 16 && smxInfo[1] === 16 && smxInfo[2] === 32;
test('matrix units (smx): every quantized format against the reference on GPUs that have them, refused elsewhere', { skip }, async () => {
  console.log(`# subgroup matrices i8 16x16x32: ${hasSmx ? 'yes' : 'no (the variant must be refused)'}`);
  for (const f of formats) {
    const quantized = f.block % 32 === 0;
    if (!quantized || !hasSmx) {
      if (!quantized || FEW.includes(f.name))
        await assert.rejects(check(f, 16, kOf(f), 4, [{ tm: 64, tn: 64, tk: 64, rm: 2, rn: 2, smx: true }]), /subgroup matri/);
      continue;
    }
    const k = kOf(f) + f.block * (f.block === 256 ? 1 : 3); // an odd number of 32-blocks: 64-wide steps end half full
    // (pad: tile rows padded, copies assigned row first)
    const runs = [{ tm: 128, tn: 128, tk: 32, rm: 4, rn: 2, smx: true, cpu: true }, { tm: 32, tn: 32, tk: 32, rm: 1, rn: 1, smx: true, cpu: true },
      { tm: 128, tn: 32, tk: 32, rm: 4, rn: 1, smx: true, cpu: true }, { tm: 16, tn: 64, tk: 96, rm: 1, rn: 2, smx: true, cpu: true },
      { tm: 128, tn: 128, tk: 32, rm: 4, rn: 2, pad: 4, smx: true, cpu: true }, { tm: 16, tn: 64, tk: 96, rm: 1, rn: 2, pad: 8, smx: true, cpu: true }];
    const r = await check(f, 67, k, 37, runs, { seed: 57 + f.type, layout: LAYOUT });
    const [plain] = await check(f, 67, k, 37, [{ ...ODD, cpu: true }], { seed: 57 + f.type, layout: LAYOUT });
    console.log(`# ${f.name} smx (k=${k}): nmse vs the CPU's products ${r.map((v) => v.toExponential(2)).join(' / ')} (f32 tiles, X unrounded: ${plain.toExponential(2)})`);
    // Q4_1 / Q5_1: the CPU multiplies the weight minimum by its Q8_1 block sum kept in f16, the digits by the
    // sum of the rounded x (measured 1.4e-7)
    const bound = ['q4_1', 'q5_1'].includes(f.name) ? 1e-6 : SMX_BOUND;
    for (const v of r) assert.ok(v < bound, `${f.name}: ${r}`);
  }
});

// The same kernels where the adapter has no matrix units (CI's lavapipe and SwiftShader): their subgroup-matrix
// calls emulated in plain WGSL (tests/web/smx-emulate.mjs), so the prep pass, the mat-mat's tiles, register
// pipelining, grid and epilogue run as written and meet the CPU engine's products; the arithmetic of the units
// themselves is checked on GPUs that have them (the test above). Tilings with one, two and more vec4s of a
// tile per invocation, one to four fragments per subgroup, partial tiles in every direction.
// The emulated kernels take lavapipe 10-50 s each to compile (the whole case ~270 s on 2 cores, SwiftShader
// ~85 s), so CI runs them on SwiftShader only (the logic is the driver's no more than the arithmetic is), the
// default tiling for two formats and three more tilings for Q4_0; LW_TEST_SLOW=1: every tiling for five
// formats on every adapter.
test('matrix units emulated on a CPU adapter: the smx kernels against the CPU engine\'s products', {
  skip: skip || (hasSmx && 'the device has them: the test above') || (!swiftshader && !slow && 'SwiftShader only (LW_TEST_SLOW=1: every adapter)'),
}, async () => {
  const restore = emulateSmx(M);
  try {
    // (pad: tile rows padded, the copies assigned row first; within SwiftShader's 32 KiB)
    const all = [{ tm: 128, tn: 128, tk: 32, rm: 4, rn: 2 }, { tm: 128, tn: 32, tk: 32, rm: 4, rn: 1 }, { tm: 16, tn: 64, tk: 96, rm: 1, rn: 2 },
      { tm: 32, tn: 64, tk: 64, rm: 1, rn: 2, pad: 4 }, { tm: 64, tn: 64, tk: 64, rm: 2, rn: 2 }, { tm: 32, tn: 32, tk: 32, rm: 1, rn: 1 }].map((r) => ({ ...r, smx: true, cpu: true }));
    for (const name of slow ? ['q4_0', 'q4_K', 'q6_K', 'q8_0', 'iq2_xxs'] : ['q4_0', 'q4_K']) {
      const f = formats.find((x) => x.name === name);
      if (!f) continue;
      const runs = slow ? all : name === 'q4_0' ? all.slice(0, 4) : all.slice(0, 1);
      const k = kOf(f) + f.block * (f.block === 256 ? 1 : 3);
      const r = await check(f, 67, k, 37, runs, { seed: 91 + f.type, layout: LAYOUT });
      console.log(`# ${f.name} smx emulated (k=${k}): nmse vs the CPU's products ${r.map((v) => v.toExponential(2)).join(' / ')}`);
      for (const v of r) assert.ok(v < SMX_BOUND, `${f.name}: ${r}`);
    }
  } finally {
    restore();
  }
  assert.ok(restore.rewritten > 0, 'the emulation compiled the kernels');
});

test('the default variant (lw__gpu_matmat_default) and one mat-vec per token agree with the reference', { skip }, async () => {
  for (const name of FEW) {
    const f = formats.find((x) => x.name === name);
    if (!f) continue;
    const [mm, mv] = await check(f, 80, kOf(f), 37, [{}, { matvec: {} }], { seed: 21, layout: LAYOUT });
    const bound = BOUND[features.f16 ? 'f16' : 'f32'];
    console.log(`# ${name} default variant: matmat nmse ${mm.toExponential(2)}, matvec per token ${mv.toExponential(2)}`);
    assert.ok(mm < bound && mv < bound, `${f.name}: matmat ${mm}, matvec ${mv}`);
  }
});

test('register blocks and tiles of many shapes (rm, rn not powers of two; one row or one token per tile)', { skip }, async () => {
  const shapes = [
    [48, 20, 32, 3, 5], // 16 x 4 invocations
    [8, 64, 48, 1, 8], // 8 x 8
    [1, 32, 8, 1, 1], // a tile of one row
    [32, 1, 24, 1, 1], // a tile of one token
    [128, 32, 32, 8, 4], // 16 x 8, 23 KiB of workgroup memory
  ];
  const f = formats.find((x) => x.name === 'q4_0');
  const runs = shapes.map(([tm, tn, tk, rm, rn]) => ({ tm, tn, tk, rm, rn }));
  const nmse = await check(f, 131, kOf(f), 37, runs, { seed: 5 });
  for (const [i, v] of nmse.entries()) assert.ok(v < BOUND.f32, `${JSON.stringify(runs[i])}: nmse ${v}`);
});

test('bad variants and shapes are refused with a message, before the GPU', { skip }, async () => {
  const f = formats.find((x) => x.name === 'q8_0');
  const h = M._lw_wasm_matmat_new(f.type, 16, 64, 4, 1);
  try {
    assert.equal(M._lw_wasm_matmat_upload(h, 0, 0, 0, 0, 0), 0, err(h));
    await M.lwGpu.settle();
    const cases = [
      [[0, 64, 64, 12, 4, 4], /template's rules/], // tk not a multiple of 8
      [[0, 64, 60, 32, 4, 8], /template's rules/], // rn does not divide tn
      [[0, 256, 256, 32, 4, 4], /invocations per workgroup/], // 4096 invocations
      [[0, 256, 256, 256, 16, 16], /workgroup memory/], // 264 KiB of tiles
    ];
    if (!features.f16) cases.push([[1, 64, 64, 32, 4, 4], /shader-f16/]);
    for (const [args, re] of cases) {
      assert.notEqual(M._lw_wasm_matmat_run(h, ...args), 0, JSON.stringify(args));
      assert.match(err(h), re);
    }
  } finally {
    M._lw_wasm_matmat_free(h);
  }
  // k not a multiple of the block
  const g = M._lw_wasm_matmat_new(f.type, 16, 48, 4, 1);
  try {
    assert.match(err(g), /bad shape/);
  } finally {
    M._lw_wasm_matmat_free(g);
  }
});

test('tune JSON overrides assemble the variants; refused JSON says why', { skip }, async () => {
  const q4 = formats.find((x) => x.name === 'q4_0');
  const variants = (json, type) => {
    const n = M.lengthBytesUTF8(json) + 1, q = M._malloc(n);
    M.stringToUTF8(json, q, n);
    try {
      return cJson(M._lw_wasm_tune_variants, q, type);
    } finally {
      M._free(q);
    }
  };
  const d = variants('', q4.type);
  assert.deepEqual(d.overrides, {});
  assert.equal(d.matmat.f16, 0); // f16 is opt-in (slower where measured)
  const j = '{"matmat": {"*": {"tn": 32, "tk": 64}, "q4_0": {"tm": 32, "rm": 2}}, "matvec": {"Q4_0": {"wg": 128, "rows": 4, "sg": false}}}';
  const v = variants(j, q4.type);
  assert.deepEqual(
    { tm: v.matmat.tm, tn: v.matmat.tn, tk: v.matmat.tk, rm: v.matmat.rm },
    { tm: 32, tn: 32, tk: 64, rm: 2 });
  assert.deepEqual({ wg: v.matvec.wg, rows: v.matvec.rows, sg: v.matvec.sg }, { wg: 128, rows: 4, sg: 0 });
  // "*" applies to the other formats, the q4_0 entry does not
  const f16 = formats.find((x) => x.name === 'f16');
  const o = variants(j, f16.type);
  assert.equal(o.matmat.tn, 32);
  assert.equal(o.matmat.tm, variants('', f16.type).matmat.tm); // (GPUs' q4_0 default tiles are integer products')
  assert.equal(o.matvec.wg, d.matvec.wg);
  // the overrides come back as the same JSON form
  assert.deepEqual(v.overrides, { matvec: { q4_0: { wg: 128, rows: 4, sg: 0 } }, matmat: { q4_0: { tm: 32, rm: 2 }, '*': { tn: 32, tk: 64 } } });
  for (const [bad, re] of [['{"matmat": {"q4_0": {"tk": 12}}}', /out of range/], ['{"matvec": {"q4_0": {"warp": 1}}}', /unknown matvec key/],
    ['{"matvec": {"q9_9": {}}}', /unknown format/], ['{"matvec": {"q4_0": {"wg": 64}}', /expected/]]) {
    assert.match(variants(bad, q4.type).error, re, bad);
  }
  // the tuned variant runs and is right
  const [nmse] = await check(q4, 40, 256, 12, [{ f16: 0, tm: v.matmat.tm, tn: v.matmat.tn, tk: v.matmat.tk, rm: v.matmat.rm, rn: v.matmat.rn }]);
  assert.ok(nmse < BOUND.f32, `tuned variant: nmse ${nmse}`);
});

test('node web/tune.mjs sweeps this device and prints JSON that gpu-tune.c accepts', { skip: skip || (ssLight && 'SwiftShader: lavapipe runs it (LW_TEST_SLOW=1: here too)') }, () => {
  const tune = fileURLToPath(new URL('../../web/tune.mjs', import.meta.url));
  const r = spawnSync(process.execPath, [tune, '--type', 'q4_0,q8_0', '--rows', '64', '--k', '256', '--tokens', '8', '--quick', '--reps', '1', '--f16', '0'],
    { encoding: 'utf8', timeout: 300000 });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  for (const name of ['q4_0', 'q8_0']) {
    assert.ok(out.matvec[name] && out.matmat[name], `${name} in ${r.stdout}`);
    assert.equal(out.matmat[name].f16, 0);
  }
  assert.match(r.stderr, /q8_0 +matmat t=64x64x32 r=4x4 f16=0 .* GFLOP\/s/);
  // C reads it back and assembles the winning variants
  const json = r.stdout.trim(), n = M.lengthBytesUTF8(json) + 1, q = M._malloc(n);
  M.stringToUTF8(json, q, n);
  try {
    const v = cJson(M._lw_wasm_tune_variants, q, formats.find((x) => x.name === 'q8_0').type);
    assert.equal(v.error, undefined, v.error);
    assert.deepEqual({ tm: v.matmat.tm, tn: v.matmat.tn, tk: v.matmat.tk }, { tm: out.matmat.q8_0.tm, tn: out.matmat.q8_0.tn, tk: out.matmat.q8_0.tk });
    assert.equal(v.matvec.wg, out.matvec.q8_0.wg);
  } finally {
    M._free(q);
  }
});

test('bench steps after warm-up create no GPU objects (invariant 2)', { skip }, async () => {
  const f = formats.find((x) => x.name === 'q4_0');
  const h = M._lw_wasm_matmat_new(f.type, 64, 256, 16, 4);
  try {
    assert.equal(M._lw_wasm_matmat_upload(h, 0, 0, 0, 0, 0), 0, err(h));
    assert.equal(M._lw_wasm_matmat_bench(h, 0, 32, 16, 32, 4, 2, 0, -1, 1), 0, err(h));
    assert.equal(await M.lwGpu.settle(), null);
    const before = { ...M.lwGpu.counters };
    for (let step = 0; step < 3; step++) {
      assert.equal(M._lw_wasm_matmat_bench(h, 0, 32, 16, 32, 4, 2, 0, -1, 2), 0, err(h));
      assert.equal(await M.lwGpu.settle(), null);
    }
    const c = M.lwGpu.counters;
    for (const key of ['buffers', 'stagingBuffers', 'pipelines', 'bindGroups']) assert.equal(c[key], before[key], key);
    assert.equal(c.dispatches - before.dispatches, 6);
    const nmse = M._lw_wasm_matmat_nmse(h);
    assert.ok(nmse >= 0 && nmse < BOUND.f32, `nmse ${nmse}: ${err(h)}`);
  } finally {
    M._lw_wasm_matmat_free(h);
  }
});

if (ssLight) {
  const left = (all, kept) => all.filter((n) => !kept.includes(n)).join(' ');
  console.log(`# SwiftShader subset (lavapipe runs all; LW_TEST_SLOW=1 here too): activation rounding skips ${left(formats.map((f) => f.name), ACTQ_SS)}; ` +
    `integer products skip ${left(IDOT, IDOT_SS)}; the tune.mjs sweep skipped`);
}

after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100));
