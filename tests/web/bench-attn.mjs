// Attention kernel throughput through the wasm module on the Dawn adapter of this machine (not a test:
// prints one line per case). Each case is checked once against the CPU engine (NMSE vs its flash-attention
// mode), then N calls are recorded in one compute pass, submitted and read back (wall clock, median of 5),
// so the time per call includes its share of one submit + read-back.
//   node tests/web/bench-attn.mjs [iters]      LW_BENCH_SHAPE=nh,nkv,d (default 32,8,64: Llama 3.2 1B)
//   LW_BENCH_CASES="1,512 1,4096 512,0" picks (tokens, n_past) pairs; LW_BENCH_F32=1: an f32 cache;
//   LW_BENCH_DECODE="wg,chunk,splits,min_chunk ..." runs each case once per decode variant (0 or -1 fields:
//   the device default's; default one entry, the device default)
// Prefill tiles: `node tests/web/bench-attn.mjs prefill [iters]` times the prefill kernel's tiles against the
// CPU adapters' (and before the register blocks everyone's) tiles, the peer: 64 invocations, 16 rows x 32
// cells, unblocked. For the llama-3.2-1b (32 / 8 heads of 64) and llama-3.1-8b (32 / 8 of 128) shapes,
// prompts of LW_BENCH_TOKENS (default "512 4096") tokens from position 0 (f16 cache): the peer, the device's
// default variant, then each of LW_BENCH_TILES ("pwg,bq,bk,rq,rk ...", default a list per head dim). One
// line each: us per call, GFLOP/s (4 flops per visible (row, cell, dim)), the ratio of the peer's time to
// this one's, NMSE against the CPU engine (prompts up to 1024 tokens) or the peer's output (longer ones:
// the CPU references would take minutes). LW_BENCH_SHAPES="nh,nkv,d ..." picks other shapes.
import { setup } from '../../web/lw-node.mjs';

const args = process.argv.slice(2);
const prefillMode = args[0] === 'prefill';
const [iters = prefillMode ? 10 : 50] = (prefillMode ? args.slice(1) : args).map(Number);
const ctx = await setup();
if (ctx.skip) { console.log('SKIP: ' + ctx.skip); process.exit(0); }
const M = ctx.Module, d = ctx.device;
const info = M.lwGpu.adapterInfo;
if (prefillMode) {
  await prefillTiles();
  process.exit(0);
}
const [nh, nkv, hd] = (process.env.LW_BENCH_SHAPE || '32,8,64').split(',').map(Number);
const f16 = process.env.LW_BENCH_F32 ? 0 : 1;
const cases = (process.env.LW_BENCH_CASES || '1,512 1,4096 1,16384 4,4096 512,0').trim().split(/\s+/).map((c) => c.split(',').map(Number));
console.log(`adapter ${info.vendor} / ${info.architecture} / ${info.device}; ${nh} heads / ${nkv} KV heads of ${hd}, ` +
  `${f16 ? 'f16' : 'f32'} cache; ${iters} calls per submit`);
const G = M._lw_wasm_attn_gpu_open();
if (!G) { console.log('no GPU'); process.exit(1); }
const variants = (process.env.LW_BENCH_DECODE || '0,0,-1,0').trim().split(/\s+/).map((c) => c.split(',').map(Number));
for (const [nt, pos0] of cases) for (const [vwg, vchunk, vsplits, vmin] of variants) {
  const vname = variants.length > 1 ? ` [wg ${vwg} chunk ${vchunk} splits ${vsplits} min ${vmin}]` : '';
  const h = M._lw_wasm_attn_new(f16, nh, nkv, hd, nt, pos0, pos0 + nt, 0, 1 / Math.sqrt(hd), 0, 3, 1);
  const err = () => M.UTF8ToString(M._lw_wasm_attn_error(h));
  try {
    if (err()) throw new Error(err());
    if (M._lw_wasm_attn_run(h, G, vwg, vchunk, vsplits, vmin, -1, 0, 0, 0, 0, 0) !== 0) throw new Error(err());
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
      `(${plan.dispatches} dispatches, ${plan.kernel[0] === 2 ? 'prefill' : 'decode ' + plan.splits + ' splits'}; nmse ${nmse.toExponential(2)})${vname}`);
  } catch (x) {
    console.log(`tokens ${nt} n_past ${pos0}${vname}: ${x.message}`);
  } finally {
    M._lw_wasm_attn_free(h);
  }
}
process.exit(0);

// Median wall time of one call (ms) of handle h's last run: 5 submits of `iters` calls after a warm-up.
async function timeCalls(h, n) {
  const t = [];
  for (let r = 0; r < 6; r++) {
    const t0 = performance.now();
    if (M._lw_wasm_attn_bench(h, r ? n : 1) !== 0) throw new Error(M.UTF8ToString(M._lw_wasm_attn_error(h)));
    const e = await M.lwGpu.settle();
    if (e) throw new Error(e);
    if (r) t.push(performance.now() - t0);
  }
  t.sort((a, b) => a - b);
  return t[2] / n;
}

async function prefillTiles() {
  const PEER = [64, 16, 32, 1, 1];
  const tilesFor = (hd) => (process.env.LW_BENCH_TILES
    ? process.env.LW_BENCH_TILES.trim().split(/\s+/).map((c) => c.split(',').map(Number))
    : hd <= 64
      ? [[128, 64, 32, 4, 4], [128, 64, 16, 4, 2], [128, 32, 32, 2, 4], [256, 64, 32, 2, 4], [256, 64, 32, 4, 2],
        [256, 128, 16, 4, 2], [64, 32, 32, 4, 4]]
      : [[128, 64, 16, 4, 2], [128, 32, 32, 2, 4], [128, 32, 16, 2, 2], [256, 64, 16, 2, 2], [256, 32, 32, 2, 2],
        [64, 32, 16, 2, 2]]);
  const shapes = (process.env.LW_BENCH_SHAPES || '32,8,64 32,8,128').trim().split(/\s+/).map((c) => c.split(',').map(Number));
  const tokens = (process.env.LW_BENCH_TOKENS || '512 4096').trim().split(/\s+/).map(Number);
  console.log(`adapter ${info.vendor} / ${info.architecture} / ${info.device}; prefill tiles ` +
    `(pwg, rows x cells, rows x cells per invocation) against the peer ${PEER.join(',')}; ${iters} calls per submit`);
  const G = M._lw_wasm_attn_gpu_open();
  if (!G) { console.log('no GPU'); process.exit(1); }
  for (const [nh, nkv, hd] of shapes) {
    for (const nt of tokens) {
      const refs = nt <= 1024 ? 1 : 0;
      const h = M._lw_wasm_attn_new_refs(1, nh, nkv, hd, nt, 0, nt, 0, 1 / Math.sqrt(hd), 0, 3, 1, refs);
      if (!h) { console.log(`${nh}/${nkv}x${hd} ${nt} tokens: out of memory`); continue; }
      const err = () => M.UTF8ToString(M._lw_wasm_attn_error(h));
      const flops = 4 * (nt * (nt + 1) / 2) * nh * hd;
      let peerUs = 0;
      const runs = [['peer', PEER], ['default', null], ...tilesFor(hd).map((t) => [t.join(','), t])];
      try {
        if (err()) throw new Error(err());
        for (const [name, t] of runs) {
          const [pwg, bq, bk, rq, rk] = t || [0, 0, 0, 0, 0];
          // decodeMax 0: every call takes the prefill kernel
          if (M._lw_wasm_attn_run(h, G, 0, 0, -1, 0, 0, bq, bk, pwg, rq, rk) !== 0) {
            console.log(`  ${name.padEnd(16)} refused: ${err()}`);
            M._lw_wasm_attn_clear_error(h);
            continue;
          }
          let e = await M.lwGpu.settle();
          if (e) throw new Error(e);
          const buf = M._malloc(1024);
          M._lw_wasm_attn_plan_json(h, buf, 1024);
          const plan = JSON.parse(M.UTF8ToString(buf));
          M._free(buf);
          // without CPU references the peer's output becomes the reference of the others
          const keep = name === 'peer' && !refs;
          if (keep) M._lw_wasm_attn_keep(h);
          const nmse = M._lw_wasm_attn_nmse(h, 0);
          if (!(nmse >= 0)) throw new Error(`${name}: ${err()}`);
          const us = (await timeCalls(h, iters)) * 1000;
          if (name === 'peer') {
            peerUs = us;
            console.log(`${nh} heads / ${nkv} KV heads of ${hd}, ${nt} tokens:`);
          }
          const tiles = `${plan.pwg},${plan.bq}x${plan.bk},${plan.rq}x${plan.rk}`;
          console.log(`  ${name.padEnd(16)} ${tiles.padEnd(16)} ${us.toFixed(1).padStart(10)} us/call ` +
            `${(flops / (us * 1e3)).toFixed(1).padStart(8)} GFLOP/s  x${(peerUs / us).toFixed(2)} vs peer  ` +
            (keep ? 'the reference' : `nmse ${nmse.toExponential(2)} vs ${refs ? 'CPU' : 'peer'}`));
        }
      } catch (x) {
        console.log(`${nh}/${nkv}x${hd} ${nt} tokens: ${x.message}`);
      } finally {
        M._lw_wasm_attn_free(h);
      }
    }
  }
}
