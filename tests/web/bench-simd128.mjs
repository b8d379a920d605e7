// End-to-end decode speed of the CPU engine inside the wasm module under Node, scalar references vs the
// simd128 kernels (two module instances; LW_CPU_KERNELS=scalar in one). Information only, not a test.
// The greedy tokens must be the same in both (the kernels are bit-identical). Needs no GPU.
// Run: LW_WASM_DIR=<dir> node tests/web/bench-simd128.mjs model.gguf [prompt_tokens=8] [gen_tokens=16]
import { readFileSync } from 'node:fs';
import { loadModule } from '../../web/lw-node.mjs';

const [file, np = '8', ng = '16'] = process.argv.slice(2);
if (!file) {
  console.error('usage: node tests/web/bench-simd128.mjs model.gguf [prompt_tokens] [gen_tokens]');
  process.exit(2);
}
const bytes = readFileSync(file);

async function run(scalar) {
  const M = await loadModule();
  if (!M) throw new Error('wasm module not built (scripts/build-wasm.sh)');
  if (scalar) M._lw_wasm_simd_force_scalar();
  const p = M._malloc(bytes.length);
  M.HEAPU8.set(bytes, p);
  const r = M._lw_wasm_cpu_open(p, bytes.length, 256);
  const err = M.UTF8ToString(M._lw_wasm_cpu_error(r));
  if (err) throw new Error(err);
  const ids = M._malloc(4 * 64);
  const prompt = Array.from({ length: +np }, (_, i) => 1 + ((i * 7919) % 500));
  M.HEAP32.set(prompt, ids >> 2);
  let t0 = performance.now();
  let tok = M._lw_wasm_cpu_decode(r, ids, prompt.length);
  const tPrompt = performance.now() - t0;
  const toks = [tok];
  t0 = performance.now();
  for (let i = 1; i < +ng; i++) {
    M.HEAP32[ids >> 2] = tok;
    tok = M._lw_wasm_cpu_decode(r, ids, 1);
    if (tok < 0) throw new Error(M.UTF8ToString(M._lw_wasm_cpu_error(r)));
    toks.push(tok);
  }
  const tGen = performance.now() - t0;
  const kern = M.UTF8ToString(M._lw_wasm_simd_engine_kernels());
  M._lw_wasm_cpu_free(r);
  return { kern, pp: (prompt.length * 1000) / tPrompt, tg: ((+ng - 1) * 1000) / tGen, toks };
}

const rows = [];
for (const scalar of [true, false, true, false]) rows.push(await run(scalar)); // alternate: load drifts
const med = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
const sc = rows.filter((_, i) => i % 2 === 0), si = rows.filter((_, i) => i % 2 === 1);
const same = rows.every((r) => r.toks.join() === rows[0].toks.join());
console.log(`${file.split('/').pop()}: prompt ${np} tokens, ${ng} generated; greedy tokens identical: ${same}`);
for (const [name, rs] of [['scalar', sc], ['simd128', si]])
  console.log(`  ${name.padEnd(8)} (${rs[0].kern}): pp ${rs.map((r) => r.pp.toFixed(2)).join(' / ')} tok/s, tg ${rs.map((r) => r.tg.toFixed(2)).join(' / ')} tok/s`);
console.log(`  speed-up: pp x${(Math.max(...si.map((r) => r.pp)) / Math.max(...sc.map((r) => r.pp))).toFixed(1)}, tg x${(Math.max(...si.map((r) => r.tg)) / Math.max(...sc.map((r) => r.tg))).toFixed(1)} (best of 2 each)`);
process.exit(same ? 0 : 1);
