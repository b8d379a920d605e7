// WebAssembly SIMD (simd128) quantized dots (src/cpu/quant-dot-wasm.c) against the scalar references they
// replace, inside the wasm module (web/lw-wasm-simd.c): every kernel must give the reference's float bits on
// random blocks and quantized rows of many lengths and seeds. Prints ns per 4096-long row, simd128 vs scalar
// (information only). Needs the wasm build only, no GPU or WebGPU adapter.
// Run: LW_WASM_DIR=<dir> node --test tests/web/simd128.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadModule } from '../../web/lw-node.mjs';

const M = await loadModule();
const skip = !M ? 'wasm module not built (scripts/build-wasm.sh)' : !M._lw_wasm_simd_count ? 'module without lw-wasm-simd.c' : false;
if (skip) console.log('SKIP: ' + skip);

const cases = skip ? [] : Array.from({ length: M._lw_wasm_simd_count() }, (_, i) => M.UTF8ToString(M._lw_wasm_simd_name(i)));

test('module is built with simd128', { skip }, () => {
  assert.equal(M._lw_wasm_simd_built(), 1);
});

test('every simd128 dot gives the reference bits', { skip }, () => {
  const p = M._malloc(4);
  const failed = [];
  for (let i = 0; i < cases.length; i++) {
    const bad = M._lw_wasm_simd_check(i, 60, p);
    const rows = M.HEAP32[p >> 2];
    assert.ok(bad >= 0, `${cases[i]}: no simd128 twin (${bad})`);
    assert.ok(rows >= 60, `${cases[i]}: only ${rows} rows compared`);
    if (bad) failed.push(`${cases[i]}: ${bad}/${rows} rows differ`);
  }
  M._free(p);
  assert.deepEqual(failed, []);
});

const FDOTS = ['f32', 'f32 gemm', 'f16', 'f16 gemm'];

test('f32 / f16 dots of the engine give the reference bits', { skip }, () => {
  const p = M._malloc(4);
  const failed = [];
  for (let k = 0; k < FDOTS.length; k++) {
    const bad = M._lw_wasm_simd_check_f(k, 60, p);
    assert.ok(bad >= 0, `${FDOTS[k]}: no simd128 version (${bad})`);
    assert.equal(M.HEAP32[p >> 2], 60);
    if (bad) failed.push(`${FDOTS[k]}: ${bad}/60 rows differ`);
  }
  M._free(p);
  assert.deepEqual(failed, []);
});

test('fast decode kernels near the references; prompt kernels with their bits per token', { skip }, () => {
  const p = M._malloc(8);
  const failed = [];
  for (let i = 0; i < 4; i++) {
    const name = M.UTF8ToString(M._lw_wasm_simd_fast_name(i));
    const bad = M._lw_wasm_simd_check_fast(i, 40, p);
    const [compared, differ] = M.HEAP32.subarray(p >> 2, (p >> 2) + 2);
    assert.ok(bad >= 0, `${name}: no simd128 decode or prompt kernel (${bad})`);
    assert.ok(compared >= 40 * 2, `${name}: only ${compared} results compared`);
    if (bad) failed.push(`${name}: ${bad} of ${compared} results off (${differ} prompt results not the decode bits)`);
  }
  M._free(p);
  assert.deepEqual(failed, []);
});

test('emulated fmaf: the double-rounding case (halfway in double, exact sum above it)', { skip }, () => {
  const p = M._malloc(12);
  assert.equal(M._lw_wasm_simd_halfway(p), 0, 'no such blocks found');
  const [ref, simd, naive] = M.HEAPF32.subarray(p >> 2, (p >> 2) + 3);
  M._free(p);
  assert.equal(ref, 4194304.5, 'libc fmaf rounds the exact sum');
  assert.equal(naive, 4194304, 'the double sum alone rounds the other way (the case is real)');
  assert.equal(simd, ref);
});

test('selector: simd128 twins unless LW_CPU_KERNELS=scalar', { skip }, () => {
  assert.equal(M._lw_wasm_simd_selector(), 0);
});

test('speed per 4096-long row (information)', { skip }, () => {
  const lines = ['format             scalar ns  simd128 ns  speed-up'];
  for (let i = 0; i < cases.length; i++) {
    const s = M._lw_wasm_simd_bench(i, 0, 3), v = M._lw_wasm_simd_bench(i, 1, 12);
    assert.ok(s > 0 && v > 0);
    lines.push(`${cases[i].padEnd(18)} ${s.toFixed(0).padStart(9)}  ${v.toFixed(0).padStart(10)}  x${(s / v).toFixed(1)}`);
  }
  for (let k = 0; k < FDOTS.length; k++) {
    const s = M._lw_wasm_simd_bench_f(k, 0, 3), v = M._lw_wasm_simd_bench_f(k, 1, 12);
    assert.ok(s > 0 && v > 0);
    lines.push(`${FDOTS[k].padEnd(18)} ${s.toFixed(0).padStart(9)}  ${v.toFixed(0).padStart(10)}  x${(s / v).toFixed(1)}`);
  }
  lines.push('4096 x 4096       decode us  prompt-32 us/token');
  for (let i = 0; i < 4; i++) {
    const d = M._lw_wasm_simd_bench_fast(i, 1), pr = M._lw_wasm_simd_bench_fast(i, 32);
    assert.ok(d > 0 && pr > 0);
    lines.push(`${M.UTF8ToString(M._lw_wasm_simd_fast_name(i)).padEnd(18)} ${(d / 1e3).toFixed(0).padStart(9)}  ${(pr / 1e3).toFixed(0).padStart(10)}`);
  }
  console.log(lines.join('\n'));
});
