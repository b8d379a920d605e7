// Mat-vec throughput through the wasm module on the Dawn adapter of this machine (not a test: prints one
// line per case). Times N dispatches recorded in one compute pass, submitted, and read back (wall clock from the
// end of the recording, medians of runs), so per-dispatch time = total / N includes its share of one submit +
// read-back but not the host's recording.
//   node tests/web/bench-matvec.mjs [rows k iters]      e.g. 4096 4096 200
import { setup } from '../../web/lw-node.mjs';
import { TYPES, actqOf } from './matvec-check.mjs';

const [rows = 4096, k = 4096, iters = 100] = process.argv.slice(2).map(Number);
const ctx = await setup();
if (ctx.skip) { console.log('SKIP: ' + ctx.skip); process.exit(0); }
const M = ctx.Module, d = ctx.device;
const info = M.lwGpu.adapterInfo;
console.log(`adapter ${info.vendor} / ${info.architecture} / ${info.device}; f16=${d.features.has('shader-f16')} ` +
  `subgroups=${d.features.has('subgroups')}; W ${rows} x ${k}, ${iters} dispatches per submit`);
const bytesPer = { F32: 4, F16: 2, Q8_0: 34 / 32, Q4_0: 18 / 32 };
// bytes per element of the other formats: block bytes / block elements
Object.assign(bytesPer, { BF16: 2, Q4_1: 20 / 32, Q5_0: 22 / 32, Q5_1: 24 / 32, Q2_K: 84 / 256, Q3_K: 110 / 256, Q4_K: 144 / 256,
  Q5_K: 176 / 256, Q6_K: 210 / 256, TQ1_0: 54 / 256, TQ2_0: 66 / 256, Q1_0: 18 / 128, Q2_0: 18 / 64 });
Object.assign(bytesPer, { IQ4_NL: 18 / 32, IQ4_XS: 136 / 256, MXFP4: 17 / 32, NVFP4: 36 / 64, IQ2_XXS: 66 / 256, IQ2_XS: 74 / 256,
  IQ2_S: 82 / 256, IQ3_XXS: 98 / 256, IQ3_S: 110 / 256, IQ1_S: 50 / 256, IQ1_M: 56 / 256 });
// LW_BENCH_TYPES=Q4_K,Q6_K picks formats; LW_BENCH_CONFIGS="64,1,0 128,4,1,512 128,4,0,0,1" picks (wg, rows,
// blocks[, stage[, idot]]) (stage: words per row of the staged weight tile, matvec.wgsl STAGE; idot 1: the
// integer mat-vec, matvec-q8.wgsl, x quantized once by its own pass, not timed). Activations are rounded as the model
// runs them (the format's ACTQ; LW_BENCH_ACTQ=0: raw f32), so 8-bit kinds skip chunk-wise unstaged configs.
const only = process.env.LW_BENCH_TYPES ? process.env.LW_BENCH_TYPES.split(',') : null;
const IDOT = new Set(['Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'IQ4_NL', 'Q4_K', 'Q5_K', 'Q6_K']); // dequant-int.wgsl
const IDOT_CONFIGS = [[64, 1, 0, 0, 1], [128, 1, 0, 0, 1], [128, 2, 0, 0, 1], [128, 4, 0, 0, 1], [256, 4, 0, 0, 1], [256, 8, 0, 0, 1], [64, 4, 0, 0, 1], [32, 4, 0, 0, 1]];
const PAIR_CONFIGS = [[64, 1, 0, 0, 2], [128, 1, 0, 0, 2], [128, 2, 0, 0, 2], [128, 4, 0, 0, 2], [256, 4, 0, 0, 2], [32, 2, 0, 0, 2], // idot 2: block pairs (Q4_0, Q8_0)
  [8, 4, 0, 0, 3], [16, 4, 0, 0, 3], [16, 2, 0, 0, 3], [32, 4, 0, 0, 3], [32, 2, 0, 0, 3], [64, 2, 0, 0, 3]]; // idot 3: eight-block steps
const configs = process.env.LW_BENCH_CONFIGS ? process.env.LW_BENCH_CONFIGS.trim().split(/\s+/).map((c) => c.split(',').map(Number)) : null;
for (const type of Object.keys(TYPES)) {
  if (only && !only.includes(type)) continue;
  const h = M._lw_wasm_matvec_new(TYPES[type], rows, k, 1);
  const e = M.UTF8ToString(M._lw_wasm_matvec_error(h));
  if (e) { console.log(`${type}: ${e}`); M._lw_wasm_matvec_free(h); continue; }
  if (M._lw_wasm_matvec_upload(h, 0) !== 0) { console.log(`${type}: upload: ${M.UTF8ToString(M._lw_wasm_matvec_error(h))}`); continue; }
  await M.lwGpu.settle();
  for (const f16 of d.features.has('shader-f16') ? [0, 1] : [0]) {
    for (const sg of d.features.has('subgroups') ? [0, 1] : [0]) {
      const actq = process.env.LW_BENCH_ACTQ === '0' ? 0 : actqOf(type), q8 = actq === 1 || actq === 2;
      if (q8 && f16) continue;
      for (const [wg, perWg, blocks, stage = 0, idot = 0] of configs || [[64, 1, 0], [256, 1, 0], [128, 4, 0], [64, 1, 1], [128, 4, 1], [256, 8, 1], [64, 8, 1],
        [64, 4, 0, 256], [128, 4, 0, 512], [256, 4, 0, 512], [128, 8, 0, 256], [256, 2, 0, 1024], ...(IDOT.has(type) && q8 ? IDOT_CONFIGS : []), ...(type === 'Q4_0' || type === 'Q8_0' ? PAIR_CONFIGS : [])]) {
        if (idot && (!IDOT.has(type) || !q8)) continue;
        if (q8 && !blocks && !stage && !idot) continue;
        // The GPU starts at the one submission after the recording, so the time of the (synchronous) recording
        // call is the host's alone (~3-4 us a dispatch on Dawn): subtracted, the rest is the GPU's time plus one
        // submit and read-back (the H100's 6144 x 4096 Q4_0: 11.3 us a dispatch with the recording, 6.6 without).
        // Weights of at most the GPU's L2 (50 MB on the H100 / H200) are read from L2 after the first of the N
        // dispatches: only larger shapes measure memory; a decode step reads each matrix once.
        const run = async (n) => {
          if (M._lw_wasm_matvec_bench(h, f16, sg, wg, perWg, blocks, n, actq, stage, 0, idot) !== 0) throw new Error(M.UTF8ToString(M._lw_wasm_matvec_error(h)));
          const t1 = performance.now();
          const err = await M.lwGpu.settle();
          if (err) throw new Error(err);
          return performance.now() - t1;
        };
        try {
          await run(1); // pipeline + bind group, warm-up
          const nmse = M._lw_wasm_matvec_nmse(h);
          const t = [];
          for (let r = 0; r < 5; r++) t.push(await run(iters));
          t.sort((a, b) => a - b);
          const us = (t[2] * 1000) / iters, gbs = (rows * k * bytesPer[type]) / (us * 1e3);
          console.log(`${type.padEnd(5)} f16=${f16} sg=${sg} wg=${String(wg).padEnd(3)} rows=${perWg} blocks=${blocks} stage=${String(stage).padEnd(4)} actq=${actq}${['     ', ' idot', ' pair', ' oct '][idot]} ${us.toFixed(1).padStart(8)} us/matvec ` +
            `${gbs.toFixed(1).padStart(7)} GB/s of weights   nmse ${nmse.toExponential(2)}`);
        } catch (err) {
          console.log(`${type} f16=${f16} sg=${sg} wg=${wg} rows=${perWg} blocks=${blocks} stage=${stage} idot=${idot}: ${err.message}`);
        }
      }
    }
  }
  M._lw_wasm_matvec_free(h);
}
process.exit(0);
