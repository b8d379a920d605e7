// Whole-model prefill on the matrix units where the adapter has none (CI's lavapipe): the subgroup-matrix
// kernels emulated in plain WGSL (tests/web/smx-emulate.mjs), so the GPU runner's part of them runs for real
// — the prep buffer sized for the largest batched piece, a prep pass (X's digits with the first piece, each
// piece's W digits) and a mat-mat per piece or per part of one whose digits would exceed a binding, the grid — on synthetic llamas (written by the native CLI: llamaweb synth), against the CPU
// engine and the same model without the matrix units.
// On GPUs that list the units the emulation is not needed (model.test.mjs and matmat.test.mjs run the real
// ones); elsewhere than lavapipe only with LW_TEST_SLOW=1 (CPU drivers take ~10-50 s per emulated kernel).
// Run: LW_WASM_DIR=... LW_CLI=build/release/llamaweb VK_ICD_FILENAMES=... node --test tests/web/smx-model.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { CpuEngine, GpuModel, fileSource } from '../../web/lw-model.mjs';
import { emulateSmx } from './smx-emulate.mjs';

const ctx = await setup();
after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100)); // Dawn keeps the process alive
const cli = [process.env.LW_CLI, ...['build/release', 'build', 'build-model', 'build-demo'].map((d) => path.join(repoRoot(), d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const lavapipe = !ctx.skip && /llvmpipe|lavapipe/i.test(`${ctx.info.device} ${ctx.info.description}`);
const hasSmx = !ctx.skip && ctx.device.features.has('chromium-experimental-subgroup-matrix');
const skip = ctx.skip || (!cli && 'no native llamaweb CLI (scripts/build.sh, or LW_CLI)') ||
  (hasSmx && 'the device has the matrix units (model.test.mjs runs them)') ||
  (!lavapipe && process.env.LW_TEST_SLOW !== '1' && 'lavapipe only (LW_TEST_SLOW=1: every adapter)') || false;
if (skip) console.log('SKIP: ' + skip);
const tmp = mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-smx-model-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

const PROMPT = Array.from({ length: 45 }, (_, i) => 1 + ((i * 37) % 250));
const nmse = (a, b) => {
  let e = 0, n = 0;
  for (let i = 0; i < b.length; i++) e += (a[i] - b[i]) ** 2, n += b[i] ** 2;
  return e / n;
};
// The prompt's last logits on the GPU (one step).
async function gpuLogits(M, file, opts) {
  // exact: false: CPU adapters otherwise take steps this short on the exact mat-vecs
  const g = await GpuModel.open(M, fileSource(file), { nCtx: 96, nBatch: 64, exact: false, ...opts });
  try {
    const d0 = M.lwGpu.counters.dispatches;
    const logits = (await g.decode(PROMPT, 'logits')).logits;
    return { logits, dispatches: M.lwGpu.counters.dispatches - d0 };
  } finally {
    g.free();
  }
}
// The same on the CPU engine of the same module (X rounded to 8-bit blocks as the matrix units' prep does).
async function cpuLogits(M, file) {
  const buf = readFileSync(file);
  const e = await CpuEngine.open(M, { size: buf.length, read: async (o, n) => buf.subarray(o, o + n).slice() }, { nCtx: 96, nBatch: 64 });
  try {
    return (await e.decode(PROMPT, 'logits')).logits;
  } finally {
    e.free();
  }
}

// Q4_K with 512 KiB bindings: the gate and up products' digits (1536 x 256 x 2 bytes) exceed a binding, so
// they run in two parts of at most 896 rows (a prep and a mat-mat each), the others whole; Q8_0
// (LW_TEST_SLOW=1) with the adapter's limits. Random weights make these models' logits move ~1e-4 (nmse)
// between the GPU and the CPU engine whatever the mat-mat (every product's 8-bit rounding of x amplifies
// small differences: tests/web/smx-precision.mjs), so the bound is relative: the matrix units' run is no
// further from the CPU engine than the other tiles' run (a misplaced part, digit or scale is nmse ~1).
const CASES = [['q4_K', 'tiny-256', { maxStorageBufferBindingSize: 512 << 10 }], ...(process.env.LW_TEST_SLOW === '1' ? [['q8_0', 'tiny', null]] : [])];
for (const [type, preset, caps] of CASES) {
  test(`${type}: prefill through the emulated matrix units is as near the CPU engine as the other tiles${caps ? ' (512 KiB bindings)' : ''}`, { skip }, async () => {
    const file = path.join(tmp, `${preset}-${type}.gguf`);
    execFileSync(cli, ['synth', '--preset', preset, '--type', type, '-o', file], { stdio: 'ignore' });
    const M = ctx.Module;
    const cpu = await cpuLogits(M, file);
    M.lwGpu.capLimits(caps);
    try {
      const plain = await gpuLogits(M, file, { tune: { [`matmat.${type}.smx`]: 0 } });
      const restore = emulateSmx(M);
      let smx, whole = null;
      try {
        smx = await gpuLogits(M, file, {});
        if (caps) { // the same products in one part each: the same bits (rows are independent)
          M.lwGpu.capLimits(null);
          whole = await gpuLogits(M, file, {});
        }
      } finally {
        restore();
      }
      assert.ok(restore.rewritten > 0, 'the matrix units\' kernels were built');
      const a = nmse(smx.logits, cpu), b = nmse(plain.logits, cpu);
      console.log(`# ${type}: logits nmse vs the CPU engine: matrix units ${a.toExponential(2)}, other tiles ${b.toExponential(2)} ` +
        `(to each other ${nmse(smx.logits, plain.logits).toExponential(2)}); ${smx.dispatches} dispatches` +
        (whole ? `, ${whole.dispatches} with whole products` : ''));
      assert.ok(a < 2 * b + 1e-7 && nmse(smx.logits, plain.logits) > 0, `${a} vs ${b}`);
      if (whole) {
        assert.ok(smx.dispatches > whole.dispatches, 'products in parts');
        assert.deepEqual(smx.logits, whole.logits, 'parts give the bits of whole products');
      }
    } finally {
      M.lwGpu.capLimits(null);
    }
  });
}
