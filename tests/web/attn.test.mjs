// Attention kernels (src/webgpu/shaders/attn-*.wgsl, src/webgpu/kernel-attn.c) end to end through the wasm
// build (web/lw-wasm-attn.c): random Q and a random KV cache in the CPU engine's layout (cells past the last
// query position hold NaN, so reading past the causal end fails), the GPU kernels through the C HAL and the
// JS glue, and the CPU engine's own LW_OP_ATTN as the reference in both of its modes (ggml's flash attention,
// and llama.cpp's KQ / softmax / KQV path): normalised MSE against each.
// Run: node --test tests/web/attn.test.mjs   (scripts/test-webgpu.sh runs it on lavapipe and SwiftShader)
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup } from '../../web/lw-node.mjs';

const ctx = await setup();
const skip = ctx.skip || false;
if (skip) console.log('SKIP: ' + skip);
const M = ctx.Module;
// one GPU context and pipeline cache for the whole run: each variant compiles once
const G = skip ? 0 : M._lw_wasm_attn_gpu_open();
if (!skip) assert.ok(G, 'lw_wasm_attn_gpu_open failed');

// NMSE bounds. The GPU computes in f32 throughout. An f32 cache: both references are f32 too and differ
// from the GPU only by summation order (~1e-13 seen). An f16 cache: the CPU's flash attention rounds Q to
// f16 and accumulates V in f16 (up to ~2e-5 from the exact result over 1000 cells, as far as it is from its
// own classic path), the classic path rounds the probabilities to f16 (~1e-7 seen).
const BOUND = { f16: { flash: 1e-4, classic: 1e-5 }, f32: { flash: 1e-10, classic: 1e-10 } };

// Problem p: f16 (cache type), nh/nkv heads, d head dim, nt tokens at pos0, swa, scale, cap (soft-cap),
// qmag (Q magnitude: larger makes the softmax peakier). Tunables o: wg, chunk, splits, minChunk,
// decodeMax, bq, bk (absent: the device's default variant). Returns {flash, classic, plan}.
async function attn(p, o) {
  o = o || {};
  const nctx = p.nctx ?? p.pos0 + p.nt + 7; // a few never-written (NaN) cells past the end
  const h = M._lw_wasm_attn_new(p.f16 ?? 1, p.nh, p.nkv, p.d, p.nt, p.pos0, nctx, p.swa ?? 0,
    p.scale ?? 1 / Math.sqrt(p.d), p.cap ?? 0, p.qmag ?? 3, p.seed ?? 1);
  if (!h) throw new Error('out of memory');
  const err = () => M.UTF8ToString(M._lw_wasm_attn_error(h));
  try {
    if (err()) throw new Error('setup: ' + err());
    const st = M._lw_wasm_attn_run(h, G, o.wg ?? 0, o.chunk ?? 0, o.splits ?? -1, o.minChunk ?? 0, o.decodeMax ?? -1,
      o.bq ?? 0, o.bk ?? 0, o.pwg ?? 0, o.rq ?? 0, o.rk ?? 0);
    if (st !== 0) throw new Error('run: ' + err());
    const gpuErr = await M.lwGpu.settle();
    if (gpuErr) throw new Error('GPU error: ' + gpuErr);
    const buf = M._malloc(1024);
    const n = M._lw_wasm_attn_plan_json(h, buf, 1024);
    const plan = n > 0 ? JSON.parse(M.UTF8ToString(buf)) : null;
    M._free(buf);
    const flash = M._lw_wasm_attn_nmse(h, 0), classic = M._lw_wasm_attn_nmse(h, 1);
    if (!(flash >= 0) || !(classic >= 0)) throw new Error('check: ' + err());
    return { flash, classic, plan };
  } finally {
    M._lw_wasm_attn_free(h);
  }
}

// Runs a list of problems, checks each against both references, and returns the results.
async function check(name, cases) {
  const out = [];
  for (const [p, o, expect] of cases) {
    const t0 = performance.now();
    const r = await attn(p, o);
    const ms = performance.now() - t0;
    const b = BOUND[(p.f16 ?? 1) ? 'f16' : 'f32'];
    const what = `${name} ${JSON.stringify(p)} ${o ? JSON.stringify(o) : ''}`;
    console.log(`# ${what}: nmse flash ${r.flash.toExponential(2)} classic ${r.classic.toExponential(2)}; ` +
      `${r.plan.dispatches} dispatch(es), kernel ${r.plan.kernel[0]}, splits ${r.plan.splits}; ${ms.toFixed(0)} ms`);
    assert.ok(r.flash < b.flash, `${what}: nmse vs flash attention ${r.flash}`);
    assert.ok(r.classic < b.classic, `${what}: nmse vs the classic path ${r.classic}`);
    if (expect) expect(r.plan, what);
    out.push(r);
  }
  return out;
}

const DECODE = 0, PREFILL = 2;
const decode = (splits) => (plan, what) => {
  assert.equal(plan.kernel[0], DECODE, `${what}: decode kernel`);
  if (splits === 1) assert.equal(plan.dispatches, 1, `${what}: one split writes the output directly`);
  else assert.ok(plan.splits >= splits && plan.dispatches === 2, `${what}: ${plan.splits} splits + reduce`);
};
const prefill = (plan, what) => assert.equal(plan.kernel[0], PREFILL, `${what}: prefill kernel`);

// Three model shapes (each compiles its own pipelines; CPU drivers take seconds per pipeline):
//   A: f16 cache, head dim 64, 8 heads over 2 KV heads (GQA 4)
//   B: f32 cache, head dim 128, 7 heads (odd), no GQA
//   C: f16 cache, head dim 80 (20 vec4s: not a power of two), 6 heads over 3 KV heads (GQA 2, odd KV count)
const A = { nh: 8, nkv: 2, d: 64 }, B = { f16: 0, nh: 7, nkv: 7, d: 128 }, C = { nh: 6, nkv: 3, d: 80 };

test('decode: split-KV + reduce, GQA 1/2/4, head dims 64/80/128, f16 and f32 caches', { skip }, async () => {
  await check('decode', [
    // one split (written directly), then many (aiming at 16 splits of >= 64 cells), then chunk-sized splits
    [{ ...A, nt: 1, pos0: 10 }, null, decode(1)],
    [{ ...A, nt: 1, pos0: 1000 }, null, decode(16)],
    [{ ...A, nt: 1, pos0: 2500 }, { splits: 0 }, decode(10)],
    // 3 tokens of one call (each its own causal end)
    [{ ...B, nt: 3, pos0: 700 }, null, decode(8)],
    [{ ...C, nt: 2, pos0: 1300 }, null, decode(16)],
    [{ ...C, nt: 1, pos0: 300 }, null, decode(4)],
  ]);
});

test('decode: sliding window and soft-cap', { skip }, async () => {
  await check('decode', [
    // the window starts mid-split and only the splits covering it run
    [{ ...A, nt: 1, pos0: 1000, swa: 100 }, null, decode(2)],
    // (splits of at least 64 cells, as CPU adapters default to: GPUs take 32, which would split these 39)
    [{ ...A, nt: 3, pos0: 1000, swa: 37 }, { splits: 16, minChunk: 64 }, decode(1)],
    // Gemma-style: Q pre-scaled (scale 1), scores capped (|scores| reach ~20 here)
    [{ ...A, nt: 1, pos0: 900, scale: 1, cap: 5, qmag: 1 }, null, decode(10)],
    [{ ...B, nt: 2, pos0: 600, swa: 300, scale: 1, cap: 8, qmag: 1 }, null, decode(4)],
    [{ ...C, nt: 1, pos0: 800, swa: 500, scale: 1, cap: 5, qmag: 1 }, null, decode(8)],
  ]);
});

test('prefill: tiled flash attention, causal, GQA 1/2/4, head dims 64/80/128, f16 and f32 caches', { skip }, async () => {
  await check('prefill', [
    // 64+ tokens with D % 16 == 0 make the CPU take ggml's tiled kernel; fewer its one-chunk kernel
    [{ ...A, nt: 70, pos0: 100 }, null, prefill],
    [{ ...A, nt: 23, pos0: 0 }, null, prefill],
    [{ ...B, nt: 67, pos0: 37 }, null, prefill],
    [{ ...C, nt: 9, pos0: 50 }, null, prefill],
    [{ ...C, nt: 33, pos0: 300 }, null, prefill],
  ]);
});

test('prefill: sliding window and soft-cap', { skip }, async () => {
  await check('prefill', [
    [{ ...A, nt: 70, pos0: 100, swa: 32 }, null, prefill],
    [{ ...A, nt: 30, pos0: 5, scale: 1, cap: 5, qmag: 1 }, null, prefill],
    [{ ...B, nt: 20, pos0: 0, swa: 7 }, null, prefill],
    [{ ...B, nt: 67, pos0: 300, swa: 50, scale: 1, cap: 10, qmag: 1 }, null, prefill],
    [{ ...C, nt: 9, pos0: 50, swa: 20, scale: 1, cap: 5, qmag: 1 }, null, prefill],
  ]);
});

test('real model shapes: Gemma 2 (head dim 256, GQA 2, soft-cap 50, window), Qwen 2.5 (GQA 7), GQA 16', { skip }, async () => {
  const gemma = { nh: 4, nkv: 2, d: 256, scale: 1, cap: 50, qmag: 0.2 }; // Q pre-scaled by 1/16 as Gemma's
  const qwen = { nh: 14, nkv: 2, d: 128 }, wide = { f16: 0, nh: 16, nkv: 1, d: 64 };
  await check('shapes', [
    [{ ...gemma, nt: 1, pos0: 1500, swa: 1024 }, null, decode(16)],
    [{ ...gemma, nt: 70, pos0: 100, swa: 64 }, null, prefill],
    [{ ...qwen, nt: 1, pos0: 1200 }, null, decode(16)],
  ]);
  if (!process.env.LW_TEST_SLOW) return; // more pipelines: seconds each on CPU drivers
  await check('shapes (slow)', [
    [{ ...qwen, nt: 40, pos0: 100 }, null, prefill],
    [{ ...wide, nt: 2, pos0: 900 }, null, decode(14)],
    [{ ...wide, nt: 20, pos0: 100, swa: 50 }, null, prefill],
  ]);
});

test('either kernel for any token count: decode of 8 tokens, prefill of 1, a smaller tile', { skip }, async () => {
  const p = { ...A, nt: 8, pos0: 500, swa: 200 };
  const [a] = await check('decode of 8', [[p, { decodeMax: 8 }, decode(4)]]);
  const [b] = await check('prefill of 8', [[p, { decodeMax: 0 }, prefill]]);
  const [c] = await check('prefill of 1', [[{ ...A, nt: 1, pos0: 999 }, { decodeMax: 0 }, prefill]]);
  // tiles of 8 rows x 16 cells: a tile holds 2 tokens of the 4-head group
  await check('prefill, 8 x 16 tiles', [[{ ...A, nt: 70, pos0: 100, swa: 32 }, { bq: 8, bk: 16 }, prefill]]);
  assert.ok(a.flash > 0 && b.flash > 0 && c.flash > 0);
});

// The GPU tiles: register blocks of rq rows x rk cells of scores (and rq rows of P V) per invocation, with
// 128 or 256 invocations (pwg). Every path of the blocked kernel: one score block per invocation (NB = pwg)
// and fewer (idle invocations), several softmax invocations per row and more than a row has quads of cells
// (idle ones), P V quads per invocation dividing the head or not (head dim 80), tiles holding several
// tokens of a GQA group (GQA 4: 16 in 64-row tiles; GQA 8: 2 in 16-row tiles, 4 in 32-row ones with
// LW_TEST_SLOW), a last tile only partly filled, prompts starting at 0 and later, sliding windows that start inside a K tile, soft-cap. Tiles as
// large as the H200's defaults (64 x 32 rows x cells for head dim 64: 34 KiB) do not fit the 32 KiB of
// workgroup memory CPU drivers offer; these have their blocks, invocations and rows, fewer cells.
test('prefill: register-blocked GPU tiles, GQA 1/4/8, head dims 64/80/128, window, soft-cap', { skip }, async () => {
  const g8 = { nh: 8, nkv: 1, d: 64 }, b1 = { ...B, nh: 2, nkv: 2 }; // GQA 8; GQA 1 (f32 cache, 128)
  // the 8B default's blocks (64 rows, 4 x 2 per invocation, 128 invocations) with 16-cell tiles
  const t8b = { pwg: 128, bq: 64, bk: 16, rq: 4, rk: 2 };
  // 4 x 4 blocks as the 1B default has (half the invocations compute scores at 16 cells)
  const t1b = { pwg: 128, bq: 64, bk: 16, rq: 4, rk: 4 };
  const t32 = { pwg: 128, bq: 32, bk: 32, rq: 2, rk: 4 }; // 32 rows: 16 x 8 score blocks = 128
  const t256 = { pwg: 256, bq: 64, bk: 16, rq: 2, rk: 2 }; // 4 softmax invocations per row
  const tidle = { pwg: 128, bq: 16, bk: 8, rq: 1, rk: 1 }; // 8 softmax invocations per row of 2 quads
  // five pipelines (CPU drivers take seconds each); LW_TEST_SLOW=1 adds four more
  await check('prefill tiles', [
    [{ ...A, nt: 70, pos0: 100 }, t8b, prefill],          // 280 rows: last tile 24 of 64
    [{ ...A, nt: 16, pos0: 0 }, t8b, prefill],            // exactly one tile, from the first cell
    [{ ...A, nt: 45, pos0: 13, swa: 21 }, t1b, prefill],  // window starts inside K tiles
    [{ ...A, nt: 30, pos0: 5, scale: 1, cap: 5, qmag: 1 }, t1b, prefill],
    [{ ...g8, nt: 9, pos0: 0, swa: 5, scale: 1, cap: 8, qmag: 1 }, tidle, prefill], // 2 tokens per tile
    [{ ...g8, nt: 37, pos0: 60 }, tidle, prefill],
    [{ ...C, nt: 20, pos0: 3, swa: 40 }, t256, prefill],  // 20 quads over 8 P V invocations per row group
    [{ ...b1, nt: 50, pos0: 200, swa: 64, scale: 1, cap: 10, qmag: 1 }, { pwg: 128, bq: 16, bk: 16, rq: 1, rk: 2 }, prefill],
  ]);
  // the plan reports what ran
  const [r] = await check('prefill tiles (plan)', [[{ ...A, nt: 71, pos0: 9 }, t8b, prefill]]);
  assert.deepEqual([r.plan.pwg, r.plan.bq, r.plan.bk, r.plan.rq, r.plan.rk], [128, 64, 16, 4, 2]);
  assert.equal(r.plan.grid[0][0], Math.ceil(71 * 4 / 64));
  if (!process.env.LW_TEST_SLOW) return;
  await check('prefill tiles (slow)', [
    [{ ...g8, nt: 37, pos0: 60 }, t32, prefill],          // 4 tokens per tile, 5 of the last partly
    [{ ...C, nt: 33, pos0: 70 }, t32, prefill],
    [{ ...b1, nt: 67, pos0: 37 }, { pwg: 128, bq: 32, bk: 16, rq: 2, rk: 2 }, prefill],
    [{ ...A, nt: 70, pos0: 100 }, t256, prefill],
  ]);
});

// The CPU-order kernel (attn-exact.wgsl): every output element bit-identical to the CPU engine's flash
// attention (its dot lanes, musl's expf, the online softmax chains in cell order), for one and several query
// tokens, several 256-cell chunks, GQA, a sliding window, f32 caches of any head dim and f16 caches of head
// dims that are multiples of 64 (FMAs in integers on CPU adapters). The split-KV kernel is shown to differ.
test('exact: the CPU engine\'s bits in every element', { skip }, async () => {
  const cases = [
    { f16: 0, nh: 4, nkv: 4, d: 64, nt: 1, pos0: 40 },
    { f16: 0, nh: 8, nkv: 2, d: 32, nt: 1, pos0: 600 },
    { f16: 0, nh: 4, nkv: 2, d: 80, nt: 5, pos0: 300 },
    { f16: 0, nh: 4, nkv: 1, d: 128, nt: 3, pos0: 20, swa: 16 },
    { f16: 1, nh: 4, nkv: 2, d: 64, nt: 2, pos0: 520 },
    { f16: 1, nh: 2, nkv: 2, d: 128, nt: 1, pos0: 70 },
  ];
  for (const p of cases) {
    const nctx = p.pos0 + p.nt + 7;
    const h = M._lw_wasm_attn_new(p.f16, p.nh, p.nkv, p.d, p.nt, p.pos0, nctx, p.swa ?? 0, 1 / Math.sqrt(p.d), 0, 3, 5);
    const err = () => M.UTF8ToString(M._lw_wasm_attn_error(h));
    try {
      assert.equal(err(), '');
      assert.equal(M._lw_wasm_attn_run_exact(h, G, 0), 0, err());
      assert.ok(!(await M.lwGpu.settle()), "GPU error");
      const bad = M._lw_wasm_attn_mismatch(h);
      assert.ok(bad >= 0, err());
      assert.equal(M._lw_wasm_attn_run(h, G, 0, 0, -1, 0, -1, 0, 0, 0, 0, 0), 0, err());
      assert.ok(!(await M.lwGpu.settle()), "GPU error");
      const split = M._lw_wasm_attn_mismatch(h);
      console.log(`# exact ${JSON.stringify(p)}: ${bad} elements differ; split-KV kernel ${split}`);
      assert.equal(bad, 0, `${JSON.stringify(p)}: ${bad} elements differ from the CPU's bits`);
      assert.ok(split > 0, 'the split-KV kernel matched every element too: the check would not see a wrong order');
    } finally {
      M._lw_wasm_attn_free(h);
    }
  }
});

test('steps after warm-up create no GPU objects (invariant 2)', { skip }, async () => {
  const h = M._lw_wasm_attn_new(1, 8, 2, 64, 1, 700, 710, 0, 0.125, 0, 3, 5);
  try {
    assert.equal(M._lw_wasm_attn_run(h, G, 0, 0, -1, 0, -1, 0, 0, 0, 0, 0), 0, M.UTF8ToString(M._lw_wasm_attn_error(h)));
    assert.equal(await M.lwGpu.settle(), null);
    assert.equal(M._lw_wasm_attn_bench(h, 1), 0); // read-back staging
    assert.equal(await M.lwGpu.settle(), null);
    const before = { ...M.lwGpu.counters };
    for (let step = 0; step < 4; step++) {
      assert.equal(M._lw_wasm_attn_bench(h, 3), 0, M.UTF8ToString(M._lw_wasm_attn_error(h)));
      assert.ok(!(await M.lwGpu.settle()), "GPU error");
    }
    const c = M.lwGpu.counters;
    for (const k of ['buffers', 'stagingBuffers', 'pipelines', 'bindGroups']) assert.equal(c[k], before[k], k);
    assert.equal(c.dispatches - before.dispatches, 4 * 3 * 2); // decode + reduce per call
    const nmse = M._lw_wasm_attn_nmse(h, 1);
    assert.ok(nmse >= 0 && nmse < BOUND.f16.classic, `nmse ${nmse}`);
  } finally {
    M._lw_wasm_attn_free(h);
  }
});

test('variants that do not suit the device are refused with a reason', { skip }, async () => {
  await assert.rejects(attn({ ...A, nt: 1, pos0: 10 }, { wg: 48 }), /workgroup size 48/);
  await assert.rejects(attn({ ...A, nt: 70, pos0: 10 }, { bq: 48 }), /rows per tile/);
  await assert.rejects(attn({ ...A, nt: 70, pos0: 10 }, { pwg: 128, bq: 64, bk: 16, rq: 3 }), /register blocks/);
  // a tile of 256 x 256 (~400 KiB of workgroup memory: more than any device offers)
  await assert.rejects(attn({ ...A, nt: 70, pos0: 10 }, { pwg: 256, bq: 256, bk: 256, rq: 4, rk: 4 }), /workgroup memory/);
  // a chunk whose score memory exceeds the device's workgroup memory
  await assert.rejects(attn({ ...A, nt: 1, pos0: 10 }, { chunk: 65536 }), /workgroup memory/);
});

// Dawn for Node may keep the process alive (and must not be torn down by GC first): exit explicitly once
// the runner has printed its summary.
after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100));
