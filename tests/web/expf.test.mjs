// musl's expf in WGSL (src/webgpu/shaders/expf-musl.wgsl: the double arithmetic of musl's algorithm carried
// out in integers) against C's expf in the same wasm module, which is musl's (Emscripten's libc), bit for bit
// (any NaN matches any NaN), over inputs aimed at the algorithm's edges (web/lw-wasm-expf.c lists the
// groups): random floats over [-110, 100], near 0, subnormal results, the overflow edge, integers and
// multiples of ln 2 / 32, specials, and about a million random bit patterns in the softmax range [-80, 0].
// WGSL's own exp() runs on the same inputs: its mismatch count shows the comparison can fail.
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/expf.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup } from '../../web/lw-node.mjs';

const ctx = await setup();
const skip = ctx.skip || false;
if (skip) console.log('SKIP: ' + skip);
const M = ctx.Module;
// Dawn may keep the process alive (web/lw-node.mjs)
after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100));

const GROUPS = ['random [-110, 100]', 'near 0', 'subnormal results', 'overflow edge / |x| >= 88',
  'integers, k ln2/32', 'specials', 'bit patterns in [-80, 0]'];

test('expf_musl gives musl expf bits', { skip }, async () => {
  const h = M._lw_wasm_expf_new();
  assert.ok(h, 'out of memory');
  const msg = () => M.UTF8ToString(M._lw_wasm_expf_error(h));
  try {
    const t0 = performance.now();
    assert.equal(M._lw_wasm_expf_run(h, 20261130, 262144, 1 << 20), 0, msg());
    const err = await M.lwGpu.settle();
    assert.equal(err || null, null, 'GPU error');
    const ms = performance.now() - t0;
    let musl = 0, plain = 0;
    for (let g = 0; g < GROUPS.length; g++) {
      const [n, bad, bp] = [0, 1, 2].map((w) => M._lw_wasm_expf_stat(h, g, w));
      assert.ok(n > 0 && bad >= 0 && bp >= 0, msg());
      console.log(`# ${GROUPS[g]}: ${n} inputs, expf_musl ${bad} differ, exp() ${bp} differ`);
      if (bad) console.log(`#   first: ${msg()}`);
      musl += bad;
      plain += bp;
    }
    const n = M._lw_wasm_expf_stat(h, -1, 0);
    console.log(`# all: ${n} inputs, expf_musl ${musl} differ from musl's expf, WGSL exp() ${plain} ` +
      `(${(100 * plain / n).toFixed(2)} %); run + read-back ${ms.toFixed(0)} ms on ` +
      `${ctx.info.vendor} ${ctx.info.architecture}`);
    assert.equal(musl, 0, 'expf_musl must give the bits of musl\'s expf');
    // the check is not vacuous: the hardware exp is off on many of these inputs
    assert.ok(plain > 0, 'WGSL exp() agreed everywhere: the comparison would not see a wrong result');
  } finally {
    M._lw_wasm_expf_free(h);
  }
});

// Exhaustive sweep, on request (LW_EXPF_SWEEP=main: every float with 2^-31 <= |x| < 104, the range where the
// double arithmetic runs, ~630 M inputs; LW_EXPF_SWEEP=all: all 2^32 bit patterns), in slices of 2^24.
const SWEEP = process.env.LW_EXPF_SWEEP;
const SLICE = 1 << 24;
const ranges = SWEEP === 'all' ? [[0, 2 ** 32]]
  : SWEEP === 'main' ? [[0x30000000, 0x42d00000], [0xb0000000, 0xc2d00000]] : [];
const sweepSkip = skip || (!ranges.length && 'set LW_EXPF_SWEEP=main or all');
test('expf_musl: exhaustive sweep (LW_EXPF_SWEEP=main|all)', { skip: sweepSkip }, async () => {
  const h = M._lw_wasm_expf_new();
  assert.ok(h, 'out of memory');
  const msg = () => M.UTF8ToString(M._lw_wasm_expf_error(h));
  try {
    const t0 = performance.now();
    let n = 0, bad = 0;
    for (const [lo, hi] of ranges) {
      for (let first = lo; first < hi; first += SLICE) {
        const count = Math.min(SLICE, hi - first);
        assert.equal(M._lw_wasm_expf_run_range(h, first >>> 0, count), 0, msg());
        const err = await M.lwGpu.settle();
        assert.equal(err || null, null, 'GPU error');
        const b = M._lw_wasm_expf_stat(h, -1, 1);
        assert.ok(b >= 0, msg());
        if (b) console.log(`# slice 0x${first.toString(16)}: ${b} differ; first: ${msg()}`);
        n += count;
        bad += b;
      }
    }
    console.log(`# sweep ${SWEEP}: ${n} inputs, expf_musl ${bad} differ from musl's expf ` +
      `(${((performance.now() - t0) / 1000).toFixed(1)} s on ${ctx.info.vendor} ${ctx.info.architecture})`);
    assert.equal(bad, 0);
  } finally {
    M._lw_wasm_expf_free(h);
  }
});
