// Kernel tuner: sweeps the tunables of the weight kernels (mat-vec: workgroup size, rows per workgroup,
// whole blocks, f16, subgroups; mat-mat: tiles TM/TN/TK, register blocks RM/RN, f16) on the WebGPU device of
// this machine (Node + Dawn; pick the driver with VK_ICD_FILENAMES) and prints the fastest variant per format
// as the JSON that src/webgpu/gpu-tune.c reads (lw__gpu_tune_json): keys that equal the measured defaults are
// printed too, so the output is complete for the device it ran on.
//
//   node web/tune.mjs [--type q4_0,q8_0,...] [--rows 2048] [--k 2048] [--tokens 64] [--reps 3]
//                     [--family matvec,matmat] [--f16 0|1] [--quick]
// Progress goes to stderr, the JSON alone to stdout. Every variant is checked against the CPU reference
// before it is timed; one that fails or is refused by the device is skipped (reported on stderr).
// Timing: n dispatches recorded in one compute pass, submitted, and the result read back; wall clock,
// median of --reps runs. Mat-vec is timed as one dispatch per token (what a prefill without mat-mat would do).
import { pathToFileURL } from 'node:url';
import { setup } from './lw-node.mjs';

// Calls a C function that writes JSON into (dst, cap) and parses the result.
export function cJson(M, fn, ...args) {
  const cap = 1 << 16, p = M._malloc(cap);
  try {
    const n = fn(...args, p, cap);
    if (n <= 0) throw new Error('JSON entry point failed');
    return JSON.parse(M.UTF8ToString(p));
  } finally {
    M._free(p);
  }
}

// The formats of the GPU format table (src/webgpu/gpu-formats.c).
export const gpuFormats = (M) => cJson(M, M._lw_wasm_gpu_formats_json);

// A mat-mat problem on the device: rows x k weights of format type, `tokens` tokens. Returns an object with
// matmat(v, n) / matvec(v, n) -> {ms, nmse} (ms per product, median of reps) and free().
export async function problem(M, type, rows, k, tokens, { reps = 3 } = {}) {
  const h = M._lw_wasm_matmat_new(type, rows, k, tokens, 1);
  const err = () => M.UTF8ToString(M._lw_wasm_matmat_error(h));
  if (!h) throw new Error('out of memory');
  if (err()) { M._lw_wasm_matmat_free(h); throw new Error(err()); }
  if (M._lw_wasm_matmat_upload(h, 0, 0, 0, 0, 0) !== 0) { const e = err(); M._lw_wasm_matmat_free(h); throw new Error(e); }
  await M.lwGpu.settle();
  // runs step(n) = record n products + read back; warm-up + correctness first, then reps timed runs
  // (cpu: check against the CPU engine's own product, for variants that round X as it does)
  const time = async (step, n, cpu = false) => {
    if (step(1) !== 0) throw new Error(err());
    let e = await M.lwGpu.settle();
    if (e) throw new Error(e);
    const nmse = cpu ? M._lw_wasm_matmat_nmse_cpu(h) : M._lw_wasm_matmat_nmse(h);
    if (!(nmse >= 0)) throw new Error(err());
    const t = [];
    for (let r = 0; r < reps; r++) {
      const t0 = performance.now();
      if (step(n) !== 0) throw new Error(err());
      if ((e = await M.lwGpu.settle())) throw new Error(e);
      t.push((performance.now() - t0) / n);
    }
    t.sort((a, b) => a - b);
    return { ms: t[t.length >> 1], nmse };
  };
  return {
    // v: {f16, tm, tn, tk, rm, rn, idot, pad} (tm 0 or absent: the device's default variant; idot 1 integer
    // products, 2 the matrix units with the quantizer pass before each product; pad: their tile rows'
    // padding, absent: the variant's own)
    // (the integer products and the matrix units round X as the CPU does: checked against its own products)
    matmat: (v, n = 1) => time((i) => M._lw_wasm_matmat_bench(h, v.f16 ?? 0, v.tm ?? 0, v.tn ?? 0, v.tk ?? 0, v.rm ?? 0, v.rn ?? 0, v.idot ?? 0, v.pad ?? -1, i), n, !!v.idot),
    // v: {f16, sg, wg, rows, blocks} (wg 0 or absent: the device's default variant); one dispatch per token
    matvec: (v, n = 1) => time((i) => M._lw_wasm_matmat_matvec(h, v.f16 ?? 0, v.sg ?? 0, v.wg ?? 0, v.rows ?? 1, v.blocks ?? 0, i), n),
    // the default variants of this device, as C assembles them (lw__gpu_*_tuned with no overrides)
    defaults: () => {
      const q = M._malloc(1);
      M.HEAPU8[q] = 0;
      try { return cJson(M, M._lw_wasm_tune_variants, q, type); } finally { M._free(q); }
    },
    free: () => M._lw_wasm_matmat_free(h),
  };
}

// Candidate variants for a device (features f16 / sg, limits of invocations and workgroup memory).
export function candidates(device, quick, onlyF16 = null) {
  const f16s = (device.features.has('shader-f16') ? [0, 1] : [0]).filter((x) => onlyF16 === null || x === onlyF16);
  const sgs = device.features.has('subgroups') ? [0, 1] : [0];
  const maxInv = device.limits.maxComputeInvocationsPerWorkgroup, maxMem = device.limits.maxComputeWorkgroupStorageSize;
  const mv = [], mm = [];
  const mvShapes = quick ? [[64, 1, 0], [128, 4, 1]] : [[32, 1, 0], [64, 1, 0], [128, 1, 0], [256, 1, 0], [64, 2, 1], [64, 4, 1], [128, 4, 0], [128, 4, 1], [256, 8, 1]];
  for (const f16 of f16s) for (const sg of sgs) for (const [wg, rows, blocks] of mvShapes) if (wg <= maxInv) mv.push({ f16, sg, wg, rows, blocks });
  const mmShapes = quick ? [[64, 64, 32, 4, 4], [32, 32, 32, 4, 4]] : [
    [64, 64, 32, 4, 4], [64, 64, 16, 4, 4], [64, 32, 32, 4, 4], [32, 64, 32, 4, 4], [32, 32, 32, 4, 4],
    [32, 32, 64, 4, 4], [64, 64, 32, 8, 4], [64, 64, 32, 4, 8], [128, 64, 32, 8, 4], [64, 16, 32, 4, 2],
    [128, 32, 32, 8, 4], [32, 32, 32, 2, 2],
    // shapes for GPUs with many cores (fewer, larger register blocks; or more invocations per tile)
    [128, 128, 16, 8, 8], [128, 128, 8, 8, 8], [128, 64, 16, 8, 4], [64, 128, 16, 4, 8], [64, 64, 16, 8, 8],
    [64, 64, 8, 4, 4], [128, 64, 16, 4, 4], [64, 128, 16, 4, 4]];
  for (const f16 of f16s) {
    for (const [tm, tn, tk, rm, rn] of mmShapes) {
      const inv = (tm / rm) * (tn / rn), mem = (tm + tn) * (tk / 4 + 1) * (f16 ? 8 : 16);
      if (inv <= maxInv && mem <= maxMem) mm.push({ f16, tm, tn, tk, rm, rn });
    }
  }
  // integer products (matmat-q8.wgsl: formats paired with 8-bit blocks of 32; refused, so skipped, for the
  // others): byte tiles, K steps of whole blocks
  const idotShapes = quick ? [[64, 64, 32, 4, 4]] : [[64, 64, 32, 4, 4], [64, 64, 64, 4, 4], [64, 64, 32, 8, 8],
    [128, 64, 32, 8, 4], [64, 128, 32, 4, 8], [128, 128, 32, 8, 8], [32, 32, 32, 2, 2]];
  for (const [tm, tn, tk, rm, rn] of idotShapes) {
    const inv = (tm / rm) * (tn / rn), mem = (tm + tn) * ((tk / 4 + 1) * 4 + (tk / 32) * 8);
    if (inv <= maxInv && mem <= maxMem) mm.push({ f16: 0, tm, tn, tk, rm, rn, idot: 1 });
  }
  // the matrix units (matmat-smx.wgsl; refused, so skipped, where the device has no i8 subgroup matrices):
  // tm x tn x tk tiles, rm x rn fragments of 16 x 16 per subgroup of 32
  const smxShapes = quick ? [[64, 128, 64, 2, 2]] : [[64, 128, 64, 2, 2], [64, 64, 64, 2, 2], [128, 64, 64, 2, 2],
    [64, 128, 32, 2, 2], [128, 128, 32, 4, 2], [128, 128, 64, 2, 4], [64, 256, 64, 2, 4], [32, 128, 128, 1, 2],
    [64, 64, 128, 2, 2]];
  for (const [tm, tn, tk, rm, rn] of smxShapes) {
    const inv = (tm / (16 * rm)) * (tn / (16 * rn)) * 32, sgs = inv / 32;
    const mem = 4 * (tm + tn) * tk + tm * 4 + (2 * tn * tk >= sgs * 1024 ? 0 : sgs * 1024); // lw__gpu_matmat_wg_bytes
    if (inv <= maxInv && mem <= maxMem) mm.push({ f16: 0, tm, tn, tk, rm, rn, idot: 2 });
  }
  return { mv, mm };
}

const gflops = (rows, k, tokens, ms) => (2 * rows * k * tokens) / (ms * 1e6);

async function main() {
  const args = process.argv.slice(2), opt = (name, def) => {
    const i = args.indexOf('--' + name);
    return i >= 0 ? args[i + 1] : def;
  };
  const ctx = await setup();
  if (ctx.skip) { console.error('tune: ' + ctx.skip); process.exit(2); }
  const M = ctx.Module, d = ctx.device, info = M.lwGpu.adapterInfo;
  const rows = Number(opt('rows', 2048)), k = Number(opt('k', 2048)), tokens = Number(opt('tokens', 64)), reps = Number(opt('reps', 3));
  const families = opt('family', 'matvec,matmat').split(',');
  const quick = args.includes('--quick');
  const all = gpuFormats(M);
  const want = opt('type', '') ? opt('type', '').toLowerCase().split(',') : all.map((f) => f.name.toLowerCase());
  const unknown = want.filter((n) => !all.some((f) => f.name.toLowerCase() === n));
  if (unknown.length) { console.error(`tune: not in the GPU format table: ${unknown.join(', ')}`); process.exit(2); }
  console.error(`tune: ${info.vendor} / ${info.architecture} / ${info.device}; f16=${d.features.has('shader-f16')} subgroups=${d.features.has('subgroups')}; ` +
    `W ${rows} x ${k}, ${tokens} tokens, median of ${reps}`);
  const { mv, mm } = candidates(d, quick, opt('f16', null) === null ? null : Number(opt('f16', 0)));
  const out = { matvec: {}, matmat: {} };
  for (const f of all.filter((x) => want.includes(x.name.toLowerCase()))) {
    const kk = Math.ceil(k / f.block) * f.block;
    let p;
    try {
      p = await problem(M, f.type, rows, kk, tokens, { reps });
    } catch (e) {
      console.error(`tune: ${f.name}: ${e.message}`);
      continue;
    }
    const def = p.defaults();
    const sweep = async (family, list, run, show) => {
      let best = null;
      for (const v of list) {
        try {
          const r = await run(v);
          const bound = v.f16 ? 1e-5 : v.idot === 1 ? 1e-9 : v.idot === 2 ? 1e-7 : 1e-10; // idot: against the CPU's product
          if (!(r.nmse < bound)) { console.error(`tune: ${f.name} ${family} ${show(v)}: nmse ${r.nmse} over ${bound}, skipped`); continue; }
          console.error(`tune: ${f.name.padEnd(7)} ${family} ${show(v).padEnd(34)} ${r.ms.toFixed(3).padStart(9)} ms  ${gflops(rows, kk, tokens, r.ms).toFixed(2).padStart(7)} GFLOP/s`);
          if (!best || r.ms < best.ms) best = { v, ms: r.ms };
        } catch (e) {
          console.error(`tune: ${f.name} ${family} ${show(v)}: ${e.message}`);
        }
      }
      return best;
    };
    if (families.includes('matvec')) {
      const b = await sweep('matvec', mv, (v) => p.matvec(v, 2), (v) => `wg=${v.wg} rows=${v.rows} blocks=${v.blocks} f16=${v.f16} sg=${v.sg}`);
      if (b) {
        out.matvec[f.name] = { wg: b.v.wg, rows: b.v.rows, blocks: b.v.blocks, f16: b.v.f16, sg: b.v.sg };
        console.error(`tune: ${f.name} matvec best ${JSON.stringify(out.matvec[f.name])} (default ${JSON.stringify(def.matvec)})`);
      }
    }
    if (families.includes('matmat')) {
      const b = await sweep('matmat', mm, (v) => p.matmat(v, 2), (v) => `t=${v.tm}x${v.tn}x${v.tk} r=${v.rm}x${v.rn} f16=${v.f16}${v.idot === 2 ? ' smx' : v.idot ? ' idot' : ''}`);
      if (b) {
        out.matmat[f.name] = { tm: b.v.tm, tn: b.v.tn, tk: b.v.tk, rm: b.v.rm, rn: b.v.rn, f16: b.v.f16, idot: b.v.idot === 1 ? 1 : 0, smx: b.v.idot === 2 ? 1 : 0 };
        console.error(`tune: ${f.name} matmat best ${JSON.stringify(out.matmat[f.name])} (default ${JSON.stringify(def.matmat)})`);
      }
    }
    p.free();
  }
  for (const fam of Object.keys(out)) if (!Object.keys(out[fam]).length) delete out[fam];
  console.log(JSON.stringify(out));
  process.exit(0);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await main();
