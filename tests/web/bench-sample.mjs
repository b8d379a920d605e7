// Cost of choosing the next token on the GPU through the wasm module on the Dawn adapter of this machine (not
// a test: prints a table): top-k pass 1 + pass 2 over a vocabulary, as the model runner records them per
// token, for the greedy argmax (k = 1), a plain top-k, and top-k + the sampling pass (topk.wgsl SAMPLE=1)
// at several k. `iters` pairs of dispatches are recorded in one submission and read back (wall clock, median
// of 5 after a warm-up), so a row's time per token includes its share of one submit + read-back.
//   node tests/web/bench-sample.mjs [iters]      LW_BENCH_VOCABS="32000 128256" LW_BENCH_KS="1 40 256"
import { setup } from '../../web/lw-node.mjs';

const [iters = 100] = process.argv.slice(2).map(Number);
const ctx = await setup();
if (ctx.skip) {
  console.log('SKIP: ' + ctx.skip);
  process.exit(0);
}
const M = ctx.Module;
const info = M.lwGpu.adapterInfo;
const vocabs = (process.env.LW_BENCH_VOCABS || '512 32000 128256').trim().split(/\s+/).map(Number);
const ks = (process.env.LW_BENCH_KS || '1 40 256').trim().split(/\s+/).map(Number);
console.log(`adapter ${info.vendor} / ${info.architecture} / ${info.device}; ${iters} tokens per submit`);
console.log('| vocab | k | pass 2 | us per token |');
console.log('|------:|--:|--------|-------------:|');
const h = M._lw_wasm_sample_new();
const err = () => M.UTF8ToString(M._lw_wasm_sample_error(h));
if (err()) {
  console.log('no GPU: ' + err());
  process.exit(1);
}
for (const n of vocabs) {
  for (const k0 of ks) {
    for (const sample of k0 === 1 ? [0] : [0, 1]) {
      const t = [];
      let k = k0;
      try {
        for (let r = 0; r < 6; r++) {
          const t0 = performance.now();
          if (M._lw_wasm_sample_bench(h, n, k, sample, r ? iters : 1) !== 0) throw new Error(err());
          await M.lwGpu.settle();
          const e = M.UTF8ToString(M._lw_wasm_sample_gpu_error(h));
          if (e) throw new Error(e);
          if (r) t.push(performance.now() - t0);
        }
      } catch (e) {
        console.log(`| ${n} | ${k} | ${sample ? 'sample' : 'top-k'} | ${e.message.slice(0, 80)} |`);
        continue;
      }
      t.sort((a, b) => a - b);
      const us = (t[2] / iters) * 1000;
      console.log(`| ${n} | ${k} | ${sample ? 'sample' : k === 1 ? 'argmax' : 'top-k'} | ${us.toFixed(1)} |`);
    }
  }
}
M._lw_wasm_sample_free(h);
process.exit(0);
