// Mat-mat vs mat-vec per token on the Dawn adapter of this machine (not a test: prints one line per case):
// Y[t] = W X[t] for `tokens` tokens with W rows x k, as one mat-mat dispatch and as one mat-vec dispatch
// per token, each checked against the CPU reference first (integer and matrix-unit variants, which round X as
// the CPU does: against the CPU engine's own products). GFLOP/s = 2 rows k tokens / time; times are
// medians of runs of n products recorded in one compute pass + one read-back (wall clock): n = 20 mat-mats
// (one read-back of Y would cost as much as a product) or 2 rounds of mat-vecs over every token.
//   node tests/web/bench-matmat.mjs [rows k tokens] [--type q4_0,q8_0,f16] [--reps 3] [--only smx] [--pads 0,4]
// (--only: just the cases whose name holds that string; --pads: each matrix-unit tiling with each tile-row
// padding that fits the device, default the variant's own)
import { setup } from '../../web/lw-node.mjs';
import { gpuFormats, problem } from '../../web/tune.mjs';

const args = process.argv.slice(2), opt = (name, def) => {
  const i = args.indexOf('--' + name);
  return i >= 0 ? args.splice(i, 2)[1] : def;
};
const types = opt('type', 'q4_0,q8_0,f16').toLowerCase().split(','), reps = Number(opt('reps', 3)), only = opt('only', ''),
  pads = opt('pads', '').split(',').filter((x) => x !== '').map(Number);
const [rows = 2048, k = 2048, tokens = 64] = args.map(Number);
const ctx = await setup();
if (ctx.skip) { console.log('SKIP: ' + ctx.skip); process.exit(0); }
const M = ctx.Module, d = ctx.device, info = M.lwGpu.adapterInfo;
const f16 = d.features.has('shader-f16') ? 1 : 0, sg = d.features.has('subgroups') ? 1 : 0;
console.log(`adapter ${info.vendor} / ${info.architecture} / ${info.device}; f16=${!!f16} subgroups=${!!sg}; ` +
  `W ${rows} x ${k}, ${tokens} tokens, median of ${reps}`);
const gf = (ms) => (2 * rows * k * tokens) / (ms * 1e6);
for (const f of gpuFormats(M).filter((x) => types.includes(x.name.toLowerCase()))) {
  const p = await problem(M, f.type, rows, k, tokens, { reps });
  const def = p.defaults();
  const cases = [
    ['matmat default ' + JSON.stringify(def.matmat), () => p.matmat({}, 20)],
    ['matmat f32 64x64x32 r4x4', () => p.matmat({ f16: 0, tm: 64, tn: 64, tk: 32, rm: 4, rn: 4 }, 20)],
    ['matmat idot 32x64x128 r2x4', () => p.matmat({ tm: 32, tn: 64, tk: 128, rm: 2, rn: 4, idot: 1 }, 20)],
    // the matrix units (refused where the device has none): tiles x fragments per subgroup
    ...[[128, 128, 32, 4, 2], [128, 128, 32, 2, 2], [128, 128, 32, 4, 1], [128, 64, 32, 4, 2], [64, 128, 32, 2, 2],
      [64, 64, 32, 2, 2], [64, 64, 64, 2, 2], [64, 128, 64, 2, 2], [128, 64, 64, 4, 2], [32, 64, 64, 1, 2]].flatMap(([tm, tn, tk, rm, rn]) =>
      (pads.length ? pads : [undefined]).filter((pad) => !pad || 4 * (tm + tn) * (tk + 4 * pad) <= d.limits.maxComputeWorkgroupStorageSize)
        .map((pad) => [`matmat smx ${tm}x${tn}x${tk} f${rm}x${rn}${pad === undefined ? '' : ' pad' + pad}`, () => p.matmat({ tm, tn, tk, rm, rn, idot: 2, pad }, 20)])),
    ['matvec per token, default ' + JSON.stringify(def.matvec), () => p.matvec({}, 2)],
    ['matvec per token, f32 wg64 rows1', () => p.matvec({ f16: 0, sg, wg: 64, rows: 1, blocks: 0 }, 2)],
  ];
  for (const [name, run] of cases.filter(([n]) => n.includes(only))) {
    try {
      const r = await run();
      console.log(`${f.name.padEnd(5)} ${name.padEnd(90)} ${r.ms.toFixed(2).padStart(9)} ms ${gf(r.ms).toFixed(2).padStart(8)} GFLOP/s  nmse ${r.nmse.toExponential(2)}`);
    } catch (e) {
      console.log(`${f.name} ${name}: ${e.message}`);
    }
  }
  p.free();
}
process.exit(0);
