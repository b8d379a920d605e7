// Graph-op kernels (src/webgpu/kernels-ops.h: element-wise ops, RMS_NORM, ROPE, KV_STORE, OUT_ROWS,
// GET_ROWS, GPU top-k/argmax) end to end through the wasm build: random inputs with odd sizes, the CPU
// reference is the engine's own op (src/cpu/engine-ops.c through lw__cpu_exec, inside the wasm module:
// web/lw-wasm-ops.c), the GPU kernel runs through the C HAL + JS glue on whatever adapter Dawn finds.
// Compared by normalised MSE (NMSE) with a bound per op, or bit for bit where the kernel is exact.
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/ops.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup } from '../../web/lw-node.mjs';

const ctx = await setup();
const skip = ctx.skip || false;
if (skip) console.log('SKIP: ' + skip);
const M = ctx.Module;

// NMSE bounds. f32 kernels that differ from the CPU only by a few roundings per element land near 1e-14;
// the bounds leave room for that and still fail on any real mistake (a wrong element is ~1e-3 or worse).
const BOUND = { exact: 0, ulp: 1e-11 };

let h = 0;
function handle() {
  if (!h) {
    h = M._lw_wasm_ops_new();
    assert.ok(h, 'out of memory');
    assert.equal(err(), '', 'GPU open');
  }
  return h;
}
const err = () => M.UTF8ToString(M._lw_wasm_ops_error(h));
let devInfo = null;
function info() {
  if (!devInfo) {
    const p = M._malloc(2048);
    assert.ok(M._lw_wasm_gpu_info_json(p, 2048) > 0);
    devInfo = JSON.parse(M.UTF8ToString(p));
    M._free(p);
  }
  return devInfo;
}

// Runs one case (fn returns an lw_status), awaits the GPU, returns {nmse, equal, count, maxRel}.
async function run(what, fn) {
  const c = handle();
  const st = fn(c);
  assert.equal(st, 0, `${what}: ${err()}`);
  const e = await M.lwGpu.settle();
  assert.equal(e, null, `${what}: GPU error ${e}`);
  return { c };
}
function stats(what, c) {
  const nmse = M._lw_wasm_ops_nmse(c);
  assert.ok(nmse >= 0, `${what}: ${err()}`);
  return { nmse, equal: M._lw_wasm_ops_equal(c), count: M._lw_wasm_ops_count(c), maxRel: M._lw_wasm_ops_max_rel(c) };
}
const fmt = (s) => `nmse ${s.nmse.toExponential(2)}, ${s.equal}/${s.count} identical, max rel ${s.maxRel.toExponential(2)}`;

// ---- element-wise ---------------------------------------------------------------------------------------
const ELT = { ADD: 1, SCALE: 2, SOFTCAP: 3, SWIGLU: 4, GEGLU: 5 };

async function eltwise(op, n, rows, { bRows = rows, table = 0, wg = 0, seed = 1, f0 = 0, f1 = 0, range = 4, bOnes = 0, layout = 0 } = {}) {
  const name = `${Object.keys(ELT).find((k) => ELT[k] === op)} ${rows}x${n}`;
  const { c } = await run(name, (c) => M._lw_wasm_ops_eltwise(c, op, n, rows, bRows, table, wg, seed, f0, f1, range, bOnes, layout));
  M._lw_wasm_ops_compact(c);
  return stats(name, c);
}

test('ADD: exact, also with a broadcast row', { skip }, async () => {
  for (const [n, rows, bRows] of [[1000 + 37, 7, 7], [333, 5, 1], [5, 1, 1]]) {
    const s = await eltwise(ELT.ADD, n, rows, { bRows, seed: n });
    console.log(`# add ${rows}x${n} (b rows ${bRows}): ${fmt(s)}`);
    assert.equal(s.equal, s.count, fmt(s));
  }
});

test('SCALE: exact', { skip }, async () => {
  const s = await eltwise(ELT.SCALE, 4099, 3, { f0: 0.1234567, seed: 3 });
  console.log(`# scale: ${fmt(s)}`);
  assert.equal(s.equal, s.count, fmt(s));
});

test('SOFTCAP: within a few ulp (WGSL tanh)', { skip }, async () => {
  // gemma 2: final logit soft-capping 30 (fp[0] = 1/30, fp[1] = 30), inputs up to +-100
  const s = await eltwise(ELT.SOFTCAP, 32000 + 13, 1, { f0: 1 / 30, f1: 30, range: 100, seed: 5 });
  console.log(`# softcap: ${fmt(s)}`);
  assert.ok(s.nmse < BOUND.ulp, fmt(s));
});

test('SWIGLU: ggml_v_expf on blocks of 16, expf on the tail, as the CPU', { skip }, async () => {
  for (const [n, rows] of [[1000 + 7, 5], [8192 + 9, 1], [13, 2]]) {
    const s = await eltwise(ELT.SWIGLU, n, rows, { range: 8, seed: n });
    console.log(`# swiglu ${rows}x${n}: ${fmt(s)}`);
    assert.ok(s.nmse < BOUND.ulp, fmt(s));
  }
});

test('GEGLU: ggml table exact; computed GELU within one f16 step', { skip }, async () => {
  // range 12: inputs on both sides of the +-10 cut-offs
  for (const table of [1, 0]) {
    const s = await eltwise(ELT.GEGLU, 6000 + 11, 5, { table, range: 12, seed: 9 });
    console.log(`# geglu (${table ? 'table' : 'computed'}): ${fmt(s)}`);
    // b = 1: the outputs are GELU's halves themselves, compared in f16 steps
    const g = await eltwise(ELT.GEGLU, 65536 + 7, 1, { table, range: 9.99, seed: 10, bOnes: 1 });
    const ulps = M._lw_wasm_ops_max_f16_ulps(h);
    console.log(`# gelu alone (${table ? 'table' : 'computed'}): ${fmt(g)}; max ${ulps} f16 steps apart`);
    if (table) {
      assert.equal(s.equal, s.count, fmt(s));
      assert.equal(g.equal, g.count, fmt(g));
    } else {
      assert.ok(ulps >= 0 && ulps <= 1, `${ulps} f16 steps`);
      assert.ok(s.nmse < 1e-9, fmt(s));
    }
  }
});

test('row strides, and b inside a (SWIGLU/GEGLU on a fused gate|up projection)', { skip }, async () => {
  for (const [op, layout, bRows] of [[ELT.ADD, 1, 5], [ELT.ADD, 1, 1], [ELT.SCALE, 1, 5], [ELT.SWIGLU, 2, 5],
    [ELT.GEGLU, 2, 5], [ELT.SWIGLU, 1, 5]]) {
    const s = await eltwise(op, 333, 5, { bRows, layout, f0: 0.5, seed: op * 10 + layout, table: 1 });
    console.log(`# op ${op} layout ${layout === 1 ? 'strided rows' : 'b in a'} (b rows ${bRows}): ${fmt(s)}`);
    assert.ok(op === ELT.SWIGLU ? s.nmse < BOUND.ulp : s.equal === s.count, fmt(s));
  }
});

test('OUT_ROWS: last row and all rows', { skip }, async () => {
  for (const last of [1, 0]) {
    const { c } = await run('out_rows', (c) => M._lw_wasm_ops_out_rows(c, 1000 + 3, 9, last, 4));
    const s = stats('out_rows', c);
    console.log(`# out_rows last=${last}: ${fmt(s)}`);
    assert.equal(s.equal, s.count, fmt(s));
  }
});

// ---- RMS_NORM ---------------------------------------------------------------------------------------------
test('RMS_NORM with its weight: whole rows, per-head groups (q/k norm), no weight', { skip }, async () => {
  const i = info();
  const cases = [
    // n, group, rows, weight (0 none, 1 group-sized, 2 row-sized), eps
    [2048 + 72, 0, 5, 2, 1e-5],
    [8 * 128, 128, 3, 1, 1e-6],
    [6 * 64, 64, 2, 2, 1e-6],
    [777, 0, 1, 0, 1e-5],
  ];
  for (const sg of [0, 1]) {
    if (sg && !i.subgroups) continue;
    for (const [n, group, rows, weight, eps] of cases) {
      for (const wg of [0, 32]) {
        const name = `rms_norm ${rows}x${n} group ${group} weight ${weight} ${sg ? 'subgroups' : 'workgroup'} wg ${wg || 'default'}${wg ? ' strided rows' : ''}`;
        const pad = wg ? 5 : 0; // rows further apart than n (a slice of a fused projection)
        const { c } = await run(name, (c) => M._lw_wasm_ops_rms_norm(c, n, group, rows, weight, sg, wg, n + wg, eps, 0, pad, 2));
        M._lw_wasm_ops_compact(c);
        const s = stats(name, c);
        console.log(`# ${name}: ${fmt(s)}`);
        // the exact variant (forced: CPU adapters' default): the sum of squares is exact and the scale
        // correctly rounded (rms-norm.wgsl): the CPU's bits
        assert.equal(s.equal, s.count, fmt(s));
      }
    }
  }
});

test('residual ADD fused into RMS_NORM: the same bits as ADD then RMS_NORM', { skip }, async () => {
  const i = info();
  for (const sg of [0, 1]) {
    if (sg && !i.subgroups) continue;
    for (const [n, group, rows, weight] of [[2048 + 72, 0, 5, 2], [1000, 0, 1, 2], [4 * 96, 96, 3, 1]]) {
      const name = `add+rms_norm ${rows}x${n} group ${group} ${sg ? 'subgroups' : 'workgroup'}`;
      const { c } = await run(name, (c) => M._lw_wasm_ops_rms_norm(c, n, group, rows, weight, sg, 0, n + 1, 1e-5, 1, 0, 2));
      const s = stats(name, c);
      console.log(`# ${name}: ${fmt(s)} (norm rows then sum rows)`);
      assert.equal(s.equal, s.count, fmt(s));
    }
  }
});

// The f32 sum of squares (EXACT_SUM=0: what GPUs run by default; CPU adapters default to the exact sum, so it
// is forced here): partial sums, subgroupAdd or a tree, inverseSqrt. Every element's relative error is the
// scale's (a few 1e-7: f32 roundings of the sum, the mean and the root) plus the products' rounding; 1e-5 is
// far below any real mistake (a lost eps, weight or element: 1e-3 and more; an element not written: NaN).
test('RMS_NORM with the f32 sum (GPUs\' default): within 1e-5 of the CPU, plain and with the fused ADD', { skip }, async () => {
  const i = info();
  const cases = [
    // n, group, rows, weight (0 none, 1 group-sized, 2 row-sized), eps, fused ADD
    [4096, 0, 3, 2, 1e-5, 0],
    [2048, 0, 5, 2, 1e-6, 0],
    [2048 + 72, 0, 2, 0, 1e-5, 0],
    [8 * 128, 128, 3, 1, 1e-6, 0],
    [6 * 64, 64, 2, 2, 1e-6, 0],
    [777, 0, 1, 2, 1e-5, 0],
    [4096, 0, 3, 2, 1e-5, 1],
    [2048, 0, 2, 2, 1e-6, 1],
    [4 * 96, 96, 3, 1, 1e-5, 1],
  ];
  let same = 0, all = 0;
  for (const sg of [0, 1]) {
    if (sg && !i.subgroups) continue;
    for (const [n, group, rows, weight, eps, add] of cases) {
      for (const wg of [0, 32]) {
        const pad = wg && !add ? 3 : 0;
        const name = `f32 ${add ? 'add+' : ''}rms_norm ${rows}x${n} group ${group} weight ${weight} ${sg ? 'subgroups' : 'workgroup'} wg ${wg || 'default'}${pad ? ' strided rows' : ''}`;
        const { c } = await run(name, (c) => M._lw_wasm_ops_rms_norm(c, n, group, rows, weight, sg, wg, n + 7 * wg + add, eps, add, pad, 1));
        M._lw_wasm_ops_compact(c);
        const s = stats(name, c);
        console.log(`# ${name}: ${fmt(s)}`);
        assert.ok(s.maxRel < 1e-5, fmt(s)); // NaN (an element not written) fails too
        same += s.equal;
        all += s.count;
      }
    }
  }
  // the variant is really the f32 one: with ~1/3 of the rows' scales an ulp from the exact one, some of the
  // elements differ from the CPU's bits
  console.log(`# f32 rms_norm: ${same}/${all} identical to the CPU`);
  assert.ok(same < all, 'every element identical: the exact sum ran');
});

// The norm's 8-bit output (what decode's integer mat-vecs read instead of a quantizer pass): the quant words
// the kernel wrote against this row's own rounding of the normalised row it wrote (Q8_0: d = fp16(amax / 127),
// q = round-to-even(x * (127 / amax)), the Q8_1 block sum fp16(amax / 127 * sum); Q8_K: the first element m of
// largest |x| in each 256, q = round-to-even(x * (-127 / m)), the 32-groups' quant sums), for rows that take
// the one-pass kernel (at most 8 floats per invocation) and rows that take the strided one (more).
function f16round(x) {
  const a = Math.abs(x);
  if (a === 0 || !Number.isFinite(a)) return x;
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  const step = 2 ** (Math.max(e, -14) - 10), v = a / step, f = Math.floor(v), d = v - f;
  const r = (d > 0.5 || (d === 0.5 && f % 2 === 1) ? f + 1 : f) * step;
  return Math.sign(x) * (r >= 65520 ? Infinity : r);
}
const roundEven = (v) => { const f = Math.floor(v), d = v - f; return d > 0.5 || (d === 0.5 && f % 2 !== 0) ? f + 1 : f; };
const f32bits = (x) => new Uint32Array(new Float32Array([x]).buffer)[0];
function expectQ8(d, kind) {
  const n = d.length, q = new Int32Array(n), words = new Uint32Array(n / 4 + n / 16);
  const put = (i, scale, mul) => { q[i] = Math.max(-128, Math.min(127, roundEven(Math.fround(d[i] * mul)))); };
  if (kind === 1) {
    for (let b = 0; b < n; b += 32) {
      let amax = 0;
      for (let i = b; i < b + 32; i++) amax = Math.max(amax, Math.abs(d[i]));
      const mul = amax ? Math.fround(127 / amax) : 0, dq = amax ? Math.fround(amax / 127) : 0;
      let sum = 0;
      for (let i = b; i < b + 32; i++) { put(i, 0, mul); sum += q[i]; }
      words[n / 4 + 2 * (b / 32)] = f32bits(amax ? f16round(dq) : 0);
      words[n / 4 + 2 * (b / 32) + 1] = f32bits(amax ? f16round(Math.fround(dq * sum)) : 0);
    }
  } else {
    for (let sb = 0; sb < n; sb += 256) {
      let amax = 0, m = 0;
      for (let i = sb; i < sb + 256; i++) if (Math.abs(d[i]) > amax) { amax = Math.abs(d[i]); m = d[i]; }
      const mul = amax ? Math.fround(-127 / m) : 0, scale = amax ? Math.fround(1 / mul) : 0;
      for (let g = sb; g < sb + 256; g += 32) {
        let sum = 0;
        for (let i = g; i < g + 32; i++) { put(i, scale, mul); sum += q[i]; }
        words[n / 4 + 2 * (g / 32)] = f32bits(scale);
        words[n / 4 + 2 * (g / 32) + 1] = sum >>> 0;
      }
    }
  }
  for (let i = 0; i < n; i += 4) words[i / 4] = ((q[i] & 255) | ((q[i + 1] & 255) << 8) | ((q[i + 2] & 255) << 16) | ((q[i + 3] & 255) << 24)) >>> 0;
  return words;
}
test('RMS_NORM with 8-bit output (Q8_0, Q8_K; fused ADD or not): the quants of the row it wrote, one pass and strided', { skip: skip || (!info().subgroups && 'no subgroups') }, async () => {
  for (const kind of [1, 2])
    for (const add of [0, 1])
      // (a device that allows fewer than 512 invocations per workgroup, SwiftShader's 256, runs the others)
      for (const [n, wg] of [[4096, 512], [2048, 256], [256, 32], [4096, 128]].filter(([, wg]) => wg <= info().maxComputeInvocationsPerWorkgroup)) {
        const name = `rms_norm q8 kind ${kind} n ${n} wg ${wg}${add ? ' add' : ''} (${n <= 8 * wg ? 'one pass' : 'strided'})`;
        const { c } = await run(name, (c) => M._lw_wasm_ops_rms_norm_q8(c, n, kind, wg, 7 + n + kind, add));
        const p = M._lw_wasm_ops_out_ptr(c) >> 2;
        const d = M.HEAPF32.slice(p, p + n), got = M.HEAPU32.slice(p + n, p + n + n / 4 + n / 16);
        const want = expectQ8(d, kind);
        let bad = 0, first = -1;
        for (let i = 0; i < want.length; i++) if (want[i] !== got[i]) { bad++; if (first < 0) first = i; }
        const ref = stats(name, c); // the row itself against the CPU's norm
        console.log(`# ${name}: ${bad} of ${want.length} quant words differ; row ${fmt(ref)}`);
        assert.equal(bad, 0, `first at word ${first}: ${got[first]} != ${want[first]}`);
        assert.ok(ref.nmse < 1e-12, fmt(ref));
      }
});

// ---- ROPE ---------------------------------------------------------------------------------------------------
// An angle of position P is only defined to an ulp, P * 2^-24 rad, and the CPU and the GPU may round the
// angle's YaRN blend or frequency-factor division differently (WGSL's fma need not be fused, its division
// is 2.5 ulp): a rotation off by that much gives an NMSE of about (P 2^-24)^2 / 10 at worst. The bound
// allows a thousandth of that on top of the near-position bound, far below any real mistake (>= 1e-4).
const ropeBound = (pos) => BOUND.ulp + 1e-3 * (pos * 2 ** -24) ** 2;

test('ROPE: normal and NeoX, partial rotation, frequency factors, YaRN, far positions', { skip }, async () => {
  const cases = [
    // heads, head dim, rotated, mode, rows, pos0, ff, yarn, base
    [4, 64, 64, 0, 3, 0, 0, 0, 10000],
    [3, 128, 128, 2, 5, 17, 0, 0, 1000000],
    [2, 80, 48, 0, 2, 100, 0, 0, 10000],    // partial rotation (phi-style)
    [2, 96, 32, 2, 3, 9, 0, 0, 10000],      // NeoX partial
    [4, 64, 64, 0, 2, 4000, 1, 0, 500000],  // llama 3 frequency factors
    [2, 64, 64, 2, 3, 30000, 0, 1, 10000],  // YaRN
    [2, 128, 128, 0, 2, 131000, 0, 0, 10000], // angles near 1.3e5 rad
  ];
  for (const [nh, hd, nr, mode, rows, pos0, ff, yarn, base] of cases) {
    const name = `rope ${mode ? 'neox' : 'normal'} ${nh}x${hd} rot ${nr} pos ${pos0}${ff ? ' ff' : ''}${yarn ? ' yarn' : ''}`;
    const { c } = await run(name, (c) => M._lw_wasm_ops_rope(c, nh, hd, nr, mode, rows, pos0, ff, yarn, hd + pos0, base, 0));
    const s = stats(name, c);
    const bound = ropeBound(pos0 + rows);
    console.log(`# ${name}: ${fmt(s)} (bound ${bound.toExponential(1)})`);
    assert.ok(s.nmse < bound, fmt(s));
    if (!ff) { // the host's sin/cos table (as models run it: gpu-model-rope.c): the CPU's bits
      const tname = `${name} host table`;
      const { c: ct } = await run(tname, (c) => M._lw_wasm_ops_rope(c, nh, hd, nr, mode, rows, pos0, 2, yarn, hd + pos0, base, 0));
      const st = stats(tname, ct);
      console.log(`# ${tname}: ${fmt(st)}`);
      assert.equal(st.equal, st.count, fmt(st));
    }
  }
});

test('ROPE fused with KV_STORE into an f16 cache: as ROPE then KV_STORE', { skip }, async () => {
  const cases = [
    [4, 64, 64, 0, 3, 5, 0, 0, 10000],
    [2, 128, 128, 2, 2, 30, 1, 0, 500000],
    [3, 96, 32, 2, 3, 9, 0, 1, 10000],   // NeoX partial (odd n_rot / 2 words straddle), YaRN
    [2, 80, 48, 0, 1, 100, 0, 0, 10000],
  ];
  for (const [nh, hd, nr, mode, rows, pos0, ff, yarn, base] of cases) {
    const name = `rope->f16 cache ${mode ? 'neox' : 'normal'} ${nh}x${hd} rot ${nr} pos ${pos0}${ff ? ' ff' : ''}${yarn ? ' yarn' : ''}`;
    const { c } = await run(name, (c) => M._lw_wasm_ops_rope(c, nh, hd, nr, mode, rows, pos0, ff, yarn, hd + pos0, base, 1));
    M._lw_wasm_ops_kv_widen(c);
    const s = stats(name, c);
    console.log(`# ${name}: ${fmt(s)} (whole cache)`);
    // f16 rounding of values within a few f32 ulp: identical but for rare rounding-boundary cases
    assert.ok(s.nmse < 1e-9 && s.equal >= s.count - 4, fmt(s));
  }
});

test('attention epilogue in one dispatch: ROPE(Q), ROPE(K) into the cache, V into the cache', { skip }, async () => {
  const cases = [
    // heads, kv heads, head dim, rotated, mode, rows, pos0, ff, f16 cache, one fused qkv input
    [8, 2, 64, 64, 0, 3, 5, 0, 1, 0],
    [4, 4, 128, 128, 2, 2, 30, 1, 1, 0],
    [6, 2, 80, 48, 2, 1, 100, 0, 1, 0],
    [8, 2, 64, 64, 0, 3, 5, 1, 0, 0],
    [3, 1, 96, 32, 2, 2, 9, 0, 0, 0],
    [8, 2, 64, 64, 0, 3, 5, 0, 1, 1],
    [4, 2, 128, 64, 2, 4, 17, 1, 0, 1],
  ];
  for (const [nh, nkv, hd, nr, mode, rows, pos0, ff, kv16, one] of cases) {
    const name = `rope_qkv ${mode ? 'neox' : 'normal'} ${nh}/${nkv} heads x ${hd} rot ${nr} pos ${pos0}${ff ? ' ff' : ''} ${kv16 ? 'f16' : 'f32'} cache${one ? ' fused qkv input' : ''}`;
    const { c } = await run(name, (c) => M._lw_wasm_ops_rope_qkv(c, nh, nkv, hd, nr, mode, rows, pos0, ff, kv16, hd + pos0, 10000, one));
    M._lw_wasm_ops_qkv_widen(c);
    const s = stats(name, c);
    console.log(`# ${name}: ${fmt(s)} (q_out, K cache, V cache)`);
    assert.ok(s.nmse < BOUND.ulp, fmt(s));
  }
});

// The attention epilogue's per-head Q/K norms (qwen3, gemma3): the device's default (the exact limbs on CPU
// adapters) and the f32 sums that GPUs default to (forced), both within the epilogue's usual bound (an NMSE
// of 1e-11: an rms relative error ~3e-6; the f32 sums land near 4e-15, a wrong scale near 1e-6).
test('attention epilogue with per-head Q/K norms: exact (CPU adapters) and f32 sums (GPUs)', { skip }, async () => {
  const cases = [
    // heads, kv heads, head dim, rotated, mode, rows, pos0, ff, f16 cache
    [8, 2, 128, 128, 2, 3, 5, 0, 0],
    [4, 2, 64, 64, 0, 2, 17, 1, 0],
    [6, 3, 128, 64, 2, 1, 100, 0, 1],
  ];
  for (const qknorm of [1, 2]) {
    for (const [nh, nkv, hd, nr, mode, rows, pos0, ff, kv16] of cases) {
      const name = `rope_qkv + ${qknorm === 1 ? 'default' : 'f32'} q/k norms ${mode ? 'neox' : 'normal'} ${nh}/${nkv} heads x ${hd} rot ${nr} pos ${pos0}${ff ? ' ff' : ''} ${kv16 ? 'f16' : 'f32'} cache`;
      const { c } = await run(name, (c) => M._lw_wasm_ops_rope_qkv(c, nh, nkv, hd, nr, mode, rows, pos0, ff, kv16, hd + pos0 + qknorm, 10000, 1, qknorm));
      M._lw_wasm_ops_qkv_widen(c);
      const s = stats(name, c);
      console.log(`# ${name}: ${fmt(s)} (q_out, K cache, V cache)`);
      assert.ok(s.nmse < BOUND.ulp, fmt(s));
    }
  }
});

// ---- KV_STORE ---------------------------------------------------------------------------------------------
test('KV_STORE: f16 cache bit for bit (round to nearest even, subnormals, overflow), f32 exact', { skip }, async () => {
  for (const f16 of [1, 0]) { // (also the cache's LW_TYPE: 1 F16, 0 F32)
    for (const [rowLen, rows, cell0, cells] of [[8 * 64, 5, 3, 11], [2 * 80 + 2, 1, 20, 21], [6, 7, 0, 7]]) {
      const name = `kv_store ${f16 ? 'f16' : 'f32'} row ${rowLen} rows ${rows} at ${cell0}/${cells}`;
      const { c } = await run(name, (c) => M._lw_wasm_ops_kv_store(c, f16, rowLen, rows, cell0, cells, rowLen + cell0));
      if (f16) M._lw_wasm_ops_kv_widen(c);
      const eq = M._lw_wasm_ops_equal(c), n = M._lw_wasm_ops_count(c);
      console.log(`# ${name}: ${eq}/${n} identical`);
      assert.equal(eq, n, `${name}: ${err()}`);
    }
  }
});

// Q8_0 / Q4_0: the GPU's block layouts (kernels-attn.h) hold the values of the CPU's ggml blocks, element for
// element (quantize_row_q8_0 / quantize_row_q4_0: every quant and fp16 scale; the blocks of ties put
// x * id + 8.5 on integers, where a fused fma would truncate differently: 225 of their 6200 elements in a C
// check of this generator; lavapipe and SwiftShader evaluate WGSL's fma() unfused, so on them these blocks
// check the rounding but cannot see a fusion)
test('KV_STORE: q8_0 and q4_0 caches hold the CPU quantizers\' values bit for bit', { skip }, async () => {
  for (const [kv, type] of [['q8_0', 8], ['q4_0', 2]]) { // (the LW_TYPE)
    for (const [rowLen, rows, cell0, cells] of [[8 * 64, 5, 3, 11], [3 * 32, 1, 20, 21], [32, 7, 0, 7]]) {
      const name = `kv_store ${kv} row ${rowLen} rows ${rows} at ${cell0}/${cells}`;
      const { c } = await run(name, (c) => M._lw_wasm_ops_kv_store(c, type, rowLen, rows, cell0, cells, rowLen + cell0 + type));
      M._lw_wasm_ops_kv_widen(c);
      const eq = M._lw_wasm_ops_equal(c), n = M._lw_wasm_ops_count(c);
      console.log(`# ${name}: ${eq}/${n} identical`);
      assert.equal(eq, n, `${name}: ${err()}`);
    }
  }
});

// ---- GET_ROWS ---------------------------------------------------------------------------------------------
function gpuFormats() {
  const p = M._malloc(4 * 64);
  const n = M._lw_wasm_ops_gpu_formats(p, 64);
  const out = Array.from(M.HEAP32.subarray(p >> 2, (p >> 2) + n));
  M._free(p);
  return out;
}

test('GET_ROWS: every format of the GPU table, tables split into parts', { skip }, async () => {
  const types = gpuFormats();
  assert.ok(types.length >= 4, `GPU format table: ${types}`);
  for (const type of types) {
    const block = M._lw_wasm_ops_block(type);
    const n = block * (block >= 256 ? 3 : 7); // odd multiples of the block
    // 3 parts: row bases and byte offsets inside each part's binding (one part: the 1B-shape test below);
    // few rows, because the IQ quantizers that make the tables are slow in wasm
    for (const parts of [3]) {
      const name = `get_rows type ${type} n ${n} parts ${parts}`;
      const { c } = await run(name, (c) => M._lw_wasm_ops_get_rows(c, type, n, 19, 11, parts, type + 1));
      const s = stats(name, c);
      console.log(`# ${name}: ${fmt(s)}`);
      assert.equal(s.equal, s.count, fmt(s));
    }
  }
});

test('GET_ROWS: a 1B-shape Q4_0 embedding (128256 x 2048, 148 MB) split under the binding limit', { skip }, async () => {
  const { c } = await run('get_rows big', (c) => M._lw_wasm_ops_get_rows_big(c, 2048, 128256, 5));
  const s = stats('get_rows big', c);
  const parts = M._lw_wasm_ops_parts();
  console.log(`# get_rows 128256 x 2048 Q4_0 in ${parts} part(s) (maxStorageBufferBindingSize ${info().maxStorageBufferBindingSize}): ${fmt(s)}`);
  if (info().maxStorageBufferBindingSize < 147763200) assert.ok(parts >= 2, `${parts} parts`);
  assert.equal(s.equal, s.count, fmt(s));
});

// ---- sampling ---------------------------------------------------------------------------------------------
test('GPU argmax and top-k agree with the CPU sampler (ties, -inf, odd vocab sizes)', { skip }, async () => {
  const cases = [
    // n, k, ties, wg, per
    [32000, 1, 0, 0, 0],
    [151936 + 7, 1, 5, 0, 0],
    [262144, 64, 3, 0, 0],   // the default variant's capacity with k = 64
    [50257, 40, 8, 128, 32],
    [37, 37, 2, 0, 0],
    [1000, 5, 40, 32, 4],
  ];
  for (const [n, k, dup, wg, per] of cases) {
    const name = `topk n ${n} k ${k} ties ${dup} wg ${wg || 'default'} per ${per || 'default'}`;
    const { c } = await run(name, (c) => M._lw_wasm_ops_topk(c, n, k, dup, wg, per, n + k));
    const bad = M._lw_wasm_ops_topk_check(c);
    console.log(`# ${name}: ${bad} failures; first id ${M._lw_wasm_ops_topk_id(c, 0)}`);
    assert.equal(bad, 0, `${name}: ${err()}`);
  }
});

test('top-k plans refuse what one merge cannot hold', { skip }, async () => {
  const c = handle();
  const st = M._lw_wasm_ops_topk(c, 4 * 1024 * 1024, 64, 0, 0, 0, 1);
  assert.notEqual(st, 0);
  assert.match(err(), /exceed one merge/);
});

after(() => {
  if (h) M._lw_wasm_ops_free(h);
  setTimeout(() => process.exit(process.exitCode ?? 0), 100);
});
