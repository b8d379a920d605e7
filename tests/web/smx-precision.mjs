// Debug measurement (not a test): how near the CPU engine a whole model's greedy decode stays when the prompt's
// products run on the matrix units, on any adapter (the subgroup-matrix kernels emulated in plain WGSL where the
// adapter has none: tests/web/smx-emulate.mjs; CPU drivers take minutes for the first run). Prints, for the
// matrix units and for the other tiles (f32 tiles rounding X as the CPU does), the share of greedy tokens
// that agree with the CPU engine (teacher forcing) and the largest logit difference relative to the range —
// the loop to work on the 16-bit digits' precision without a GPU.
// Measured on lavapipe (2026-12-02), tiny llama Q4_0 (llamaweb synth --preset tiny --type q4_0), prompt
// 1 5 9 200 37, 300 tokens, the float kernels GPUs run (exact: false): matrix units 98.3 %, logits within
// 1.06 % of their range; other tiles 100 %, 0.60 %. The H200 (real units) gave 99.3 % / 1.0 % on the same case
// (model.test.mjs "integer mat-vecs", session 10; its bar is 99.5 %). Where it comes from (node outputs
// probed against the CPU engine, lw_wasm_model_probe / lw_wasm_cpu_probe): the first products on the units
// are within nmse ~8e-10 of the CPU's (the digits' 15 bits), but every later product rounds its x to the
// CPU's 8-bit blocks again, and an input that differs by ~1e-9 flips some of those roundings (nmse 6e-7 after
// the attention's output projection, 4e-5 after the FFN); the float kernels GPUs run amplify their own
// differences the same way (0.60 % above). This model's activations are well spread (a token's largest |x|
// is 1-2x its median 32-block's), so the per-token fixed point is not what limits it here.
//   node tests/web/smx-precision.mjs MODEL.gguf [tokens=300] [prompt ids, comma-separated]
import { readFileSync } from 'node:fs';
import { setup } from '../../web/lw-node.mjs';
import { agreement } from './agreement.mjs';
import { emulateSmx } from './smx-emulate.mjs';

const [file, n = '300', ids = '1,5,9,200,37'] = process.argv.slice(2);
if (!file) {
  console.log('usage: node tests/web/smx-precision.mjs MODEL.gguf [tokens] [prompt ids]');
  process.exit(2);
}
const ctx = await setup();
if (ctx.skip) {
  console.log('SKIP ' + ctx.skip);
  process.exit(0);
}
const M = ctx.Module, bytes = readFileSync(file), prompt = ids.split(',').map(Number);
const native = ctx.device.features.has('chromium-experimental-subgroup-matrix');
const opts = { kvF32: true, exact: false, tune: { matvec: { '*': { idot: 1, exact: 0 } } } };
for (const smx of [1, 0]) {
  const restore = smx && !native ? emulateSmx(M) : null;
  let r;
  try {
    r = await agreement(M, bytes, prompt, Number(n), { ...opts, tune: { ...opts.tune, matmat: { '*': { smx } } } });
  } finally {
    if (restore) restore();
  }
  console.log(`${smx ? 'matrix units' : 'other tiles '}${restore ? ' (emulated)' : ''}: ${(100 * r.rate).toFixed(1)} % of ${n} greedy ` +
    `tokens agree with the CPU engine, logits within ${(100 * r.worst).toExponential(2)} % of their range; ${JSON.stringify(r.variants.matmat)}`);
}
process.exit(0);
