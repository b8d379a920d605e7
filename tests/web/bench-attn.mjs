// Attention kernel throughput through the wasm module on the Dawn adapter of this machine (not a test:
// prints one line per case). Each case is checked once against the CPU engine (NMSE vs its flash-attention
// mode), then N calls are recorded in one compute pass, submitted and read back (wall clock, median of 5),
// so the time per call includes its share of one submit + read-back.
//   node tests/web/bench-attn.mjs [iters]      LW_BENCH_SHAPE=nh,nkv,d (default 32,8,64: Llama 3.2 1B)
//   LW_BENCH_CASES="1,512 1,4096 512,0" picks (tokens, n_past) pairs; LW_BENCH_F32=1: an f32 cache
import { setup } from '../../web/lw-node.mjs';

const [iters = 50] = process.argv.slice(2).map(Number);
const ctx = await setup();
if (ctx.skip) { console.log('SKIP: ' + ctx.skip); process.exit(0); }
const M = ctx.Module, d = ctx.device;
const info = M.lwGpu.adapterInfo;
const [nh, nkv, hd] = (process.env.LW_BENCH_SHAPE || '32,8,64').split(',').map(Number);
const f16 = process.env.LW_BENCH_F32 ? 0 : 1;
const cases = (process.env.LW_BENCH_CASES || '1,512 1,4096 1,16384 4,4096 512,0').trim().split(/\s+/).map((c) => c.split(',').map(Number));
console.log(`adapter ${info.vendor} / ${info.architecture} / ${info.device}; ${nh} heads / ${nkv} KV heads of ${hd}, ` +
  `${f16 ? 'f16' : 'f32'} cache; ${iters} calls per submit`);
const G = M._lw_wasm_attn_gpu_open();
if (!G) { console.log('no GPU'); process.exit(1); }
for (const [nt, pos0] of cases) {
  const h = M._lw_wasm_attn_new(f16, nh, nkv, hd, nt, pos0, pos0 + nt, 0, 1 / Math.sqrt(hd), 0, 3, 1);
  const err = () => M.UTF8ToString(M._lw_wasm_attn_error(h));
  try {
    if (err()) throw new Error(err());
    if (M._lw_wasm_attn_run(h, G, 0, 0, -1, 0, -1, 0, 0, 0, 0, 0) !== 0) throw new Error(err());
    let e = await M.lwGpu.settle();
    if (e) throw new Error(e);
    const nmse = M._lw_wasm_attn_nmse(h, 0);
    const buf = M._malloc(1024);
    M._lw_wasm_attn_plan_json(h, buf, 1024);
    const plan = JSON.parse(M.UTF8ToString(buf));
    M._free(buf);
    const t = [];
    for (let r = 0; r < 6; r++) {
      const t0 = performance.now();
      if (M._lw_wasm_attn_bench(h, r ? iters : 1) !== 0) throw new Error(err());
      if ((e = await M.lwGpu.settle())) throw new Error(e);
      if (r) t.push(performance.now() - t0);
    }
    t.sort((a, b) => a - b);
    const us = (t[2] * 1000) / iters;
    // cells read (K and V once per KV head for decode; per query tile for prefill) and the scores computed
    let cells = 0;
    for (let i = 0; i < nt; i++) cells += pos0 + i + 1;
    const kvBytes = (pos0 + nt) * nkv * hd * (f16 ? 2 : 4) * 2, flops = 4 * cells * nh * hd;
    console.log(`tokens ${String(nt).padStart(4)} n_past ${String(pos0).padStart(6)}: ${us.toFixed(1).padStart(9)} us/call ` +
      `${(kvBytes / (us * 1e3)).toFixed(1).padStart(7)} GB/s of KV ${(flops / (us * 1e6)).toFixed(2).padStart(8)} TFLOP/s  ` +
      `(${plan.dispatches} dispatches, ${plan.kernel[0] === 2 ? 'prefill' : 'decode ' + plan.splits + ' splits'}; nmse ${nmse.toExponential(2)})`);
  } catch (x) {
    console.log(`tokens ${nt} n_past ${pos0}: ${x.message}`);
  } finally {
    M._lw_wasm_attn_free(h);
  }
}
process.exit(0);
