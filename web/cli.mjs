#!/usr/bin/env node
// The `llamaweb` runner for Node + Dawn (WebGPU from the wasm build; scripts/build-wasm.sh, LW_WASM_DIR):
//   node web/cli.mjs run   -m M.gguf -p "text" [-n 64] [options]    generation, text streamed
//   node web/cli.mjs bench -m M.gguf [-p 512] [-n 128] [-r 3] [options]
//   node web/cli.mjs profile -m M.gguf [-p 512] [-n 32] [options]   where decode time goes (web/lw-profile.mjs):
//          per kernel variant, calls and GPU microseconds per token (timestamp-query: each dispatch timed in
//          its own compute pass) and the JS time of recording them; wall time per token split into recording
//          (the call into C) and waiting (GPU + read-back); the prompt's kernels too. Greedy decoding.
// options: --ctx N (KV cells), --batch N (tokens per step), --submit N (dispatches per command buffer), --chain N (steps the GPU-resident loop runs ahead; 0: wait for each id), --kv f16|f32|q8_0|q4_0,
//          --f16 0|1, --sg 0|1 (variant switches; default: as the device offers),
//          --rows-embd N (the row store: only N token embedding rows on the GPU, read from the file on a miss; the
//          row cache's counters on stderr; as the native CLI's),
//          --tune FILE_OR_JSON (kernel overrides: a file holding, or the text of, the JSON `node web/tune.mjs` prints),
//          sampling as the native `llamaweb run` (tools/cli-gen.c): --temp T (default 0.8, 0 = greedy), --top-k K
//          (default 40, 0 = off: the GPU's cap, 256 up to 65536 tokens), --top-p P (0.95), --min-p P (0.05), --seed S
//          (0x5eed; decimal or 0x hex, up to 2^53). Tokens are drawn on the GPU (4 bytes read back per token).
//          bench decodes greedily (as llama-bench) unless a sampling option is given.
// Pick the Vulkan driver with VK_ICD_FILENAMES (lavapipe, SwiftShader) as for the tests.
import { existsSync, readFileSync } from 'node:fs';
import { setup } from './lw-node.mjs';
import { GpuModel, fileSource, SAMPLING_DEFAULTS } from './lw-model.mjs';
import { profile, formatProfile, benchIds, PROFILE_GPU_ARGS } from './lw-profile.mjs';
import { Generation } from './lw-gen.mjs';

function usage(why) {
  if (why) console.error('llamaweb (web): ' + why);
  console.error('usage: node web/cli.mjs run -m M.gguf -p TEXT [-n N] [--ctx N] [--batch N] [--submit N] [--chain N] [--f16 0|1] [--sg 0|1] [--kv f16|f32|q8_0|q4_0] [--rows-embd N]\n' +
    '         [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [--tune FILE_OR_JSON]\n' +
    '       node web/cli.mjs bench -m M.gguf [-p 512] [-n 128] [-r 3] [--ctx N] [--batch N] [--submit N] [--chain N] [--f16 0|1] [--sg 0|1] [--rows-embd N]\n' +
    '         [--tune FILE_OR_JSON] [--skip REGEX] [sampling options: sample instead of argmax]\n' +
    '       node web/cli.mjs profile -m M.gguf [-p 512] [-n 32] [--ctx N] [--batch N] [--submit N] [--f16 0|1] [--sg 0|1] [--tune FILE_OR_JSON] [--skip REGEX]');
  process.exit(2);
}

// A number within [lo, hi] (an integer when int), else usage().
function num(k, v, lo, hi, int = false) {
  const d = v.trim() === '' ? NaN : Number(v);
  if (!(d >= lo && d <= hi) || (int && !Number.isInteger(d))) usage(`${k}: ${v} is not a number in [${lo}, ${hi}]`);
  return d;
}

function parse(argv) {
  const o = { cmd: argv[0], sampling: {} };
  for (let i = 1; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (v === undefined) usage(`${k} needs a value`);
    if (k === '-m') o.model = v;
    else if (k === '-p') o.prompt = v;
    else if (k === '-n') o.n = Number(v);
    else if (k === '-r') o.reps = Number(v);
    else if (k === '--ctx') o.nCtx = Number(v);
    else if (k === '--batch') o.nBatch = Number(v);
    else if (k === '--submit') o.submitEvery = Number(v);
    else if (k === '--chain') o.chain = num(k, v, 0, 16, true);
    else if (k === '--f16') o.f16 = Number(v);
    else if (k === '--sg') o.subgroups = Number(v);
    else if (k === '--kv') o.kvType = v;
    else if (k === '--rows-embd') o.rowsEmbd = num(k, v, 0, 0x7fffffff, true);
    else if (k === '--skip') o.skip = new RegExp(v);
    else if (k === '--tune') o.tune = existsSync(v) ? readFileSync(v, 'utf8') : v;
    else if (k === '--temp') o.sampling.temp = num(k, v, 0, 1e6);
    else if (k === '--top-k') o.sampling.topK = num(k, v, -1, 1e9, true);
    else if (k === '--top-p') o.sampling.topP = num(k, v, 0, 1);
    else if (k === '--min-p') o.sampling.minP = num(k, v, 0, 1);
    else if (k === '--seed') o.sampling.seed = num(k, v, 0, Number.MAX_SAFE_INTEGER, true);
    else usage(`unknown option ${k}`);
  }
  if (!o.model || !['run', 'bench', 'profile'].includes(o.cmd)) usage();
  if (o.cmd === 'profile' && Object.keys(o.sampling).length) usage('profile decodes greedily (no sampling options)');
  return o;
}

const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];

// The generated ids after ids: m.chain (the GPU-resident loop, --chain steps ahead, default 2) or, with
// --chain 0, one decode per id that waits for its read-back.
let chainDepth = 2;
async function* steps(m, ids, out) {
  if (chainDepth > 0) { yield* m.chain(ids, out, { depth: chainDepth }); return; }
  for (let next = await m.decode(ids, out); ; next = await m.decode([next], out)) yield next;
}

async function main() {
  const o = parse(process.argv.slice(2));
  const ctx = await setup(o.cmd === 'profile' ? PROFILE_GPU_ARGS : []);
  if (ctx.skip) throw new Error(ctx.skip);
  const M = ctx.Module;
  const info = ctx.device.features;
  const src = fileSource(o.model);
  const nCtx = o.nCtx ?? (o.cmd !== 'run' ? (o.prompt ? Number(o.prompt) : 512) + (o.n ?? 128) + 8 : 2048);
  const m = await GpuModel.open(M, src, { nCtx, nBatch: o.nBatch, submitEvery: o.submitEvery, f16: o.f16, subgroups: o.subgroups,
    kvType: o.kvType, tune: o.tune, rows: o.rowsEmbd ? { embeddings: o.rowsEmbd } : undefined });
  // run samples (the native defaults); bench takes the argmax unless a sampling option was given; --temp 0 is
  // greedy as in the native CLI (the GPU's argmax: the sampler with temperature 0 drew by its seed)
  const sp = { ...SAMPLING_DEFAULTS, ...o.sampling };
  const sample = (o.cmd === 'run' || Object.keys(o.sampling).length > 0) && Number(sp.temp) > 0;
  const kUsed = sample ? m.setSampling(sp) : 0;
  const out = sample ? 'sample' : 'argmax';
  if (o.chain !== undefined) chainDepth = o.chain;
  // --skip REGEX (bench, profile: a measurement, the tokens are wrong): dispatches of the kernels whose variant
  // key matches are left out after the load, so the time they save is their cost inside the real stream of
  // dependent dispatches (a profile's per-pass timestamps add each pass's own start and drain)
  if (o.skip) {
    if (o.cmd === 'run') usage('--skip is for bench and profile (it leaves kernels out)');
    M.lwGpu.skip = o.skip;
    console.error(`skipping the dispatches of kernels matching ${o.skip}: a measurement, the tokens are wrong`);
  }
  const i0 = m.info();
  const a = ctx.info || {};
  console.error(`model: ${o.model} (${i0.arch}, ${i0.n_layer} blocks, vocab ${i0.n_vocab}), weights ${(i0.weightBytes / 1048576).toFixed(1)} MiB ` +
    `streamed in ${m.loadMs.toFixed(0)} ms; adapter ${a.vendor || '?'} ${a.architecture || ''} ${a.device || ''}; ` +
    `f16 ${info.has('shader-f16') && o.f16 !== 0 ? 'yes' : 'no'}, subgroups ${info.has('subgroups') && o.subgroups !== 0 ? 'yes' : 'no'}`);
  console.error(sample ? `sampling on the GPU: temp ${sp.temp}, top-k ${kUsed}${sp.topK > 0 && sp.topK === kUsed ? '' : ` (asked ${sp.topK}: the GPU's cap)`}, ` +
    `top-p ${sp.topP}, min-p ${sp.minP}, seed ${sp.seed}` : 'greedy (GPU argmax)');
  if (o.tune) console.error(`tune: ${JSON.stringify(m.variants())}`);
  if (o.rowsEmbd) console.error(`rows: ${m.rowsFallback || m.rowsStats().message}`);
  // the row cache's counters (stderr), as the native CLI prints them
  const rowsLine = () => {
    const r = m.rowsStats();
    if (!r.active) return;
    console.error(`row cache: ${r.lookups} lookups, ${r.hits} hits (${r.lookups ? (100 * r.hits / r.lookups).toFixed(1) : '-'}%), ${r.misses} misses, ` +
      `${r.warmLoads} warm loads, ${r.evictions} evictions, ${r.bytesRead} bytes read, ${r.rewinds} chained steps undone`);
  };

  if (o.cmd === 'run') {
    const ids = m.tokenize(o.prompt ?? '', true);
    const n = o.n ?? 64;
    process.stdout.write(o.prompt ?? '');
    // the generation's rules (n tokens, end of generation, a full context) are the C state machine's
    const gen = new Generation(M, M._lw_wasm_model_model(m.h), { nPredict: n, nCtx: i0.n_ctx, stop: [] });
    let t0 = performance.now();
    let step = gen.start(ids, 0);
    const it = steps(m, ids, out);
    let next = (await it.next()).value;
    const ppMs = performance.now() - t0;
    t0 = performance.now();
    let made = 0, decodes = 0; // ids pushed; decode steps after the prompt's
    while (step.sample) {
      step = gen.push(next);
      made++;
      process.stdout.write(step.text);
      if (!step.sample) break;
      next = (await it.next()).value;
      decodes++;
    }
    const tgMs = performance.now() - t0;
    await it.return();
    process.stdout.write(step.tail);
    gen.free();
    process.stdout.write('\n');
    const i1 = m.info();
    console.error(`prompt: ${ids.length} tokens, ${(ids.length / ppMs * 1000).toFixed(1)} t/s; generation: ${made} tokens, ` +
      `${(decodes / tgMs * 1000).toFixed(1)} t/s; dispatches per token ${i1.stepDispatches} ` +
      `(${(i1.stepDispatches / i1.n_layer).toFixed(1)} per layer), submits ${i1.submits}`);
    rowsLine();
  } else if (o.cmd === 'profile') {
    const r = await profile(M, m, { nPrompt: o.prompt ? Number(o.prompt) : 512, nGen: o.n ?? 32 });
    for (const l of formatProfile(r)) console.log(l);
  } else {
    const nP = o.prompt ? Number(o.prompt) : 512, nG = o.n ?? 128, reps = o.reps ?? 3;
    const ids = benchIds(nP, i0.n_vocab); // a fixed pseudo-random token sequence, as llama-bench's
    const pp = [], tg = [];
    for (let r = 0; r < reps; r++) {
      m.nPast = 0;
      let t0 = performance.now();
      if (sample) m.setSampling(sp); // every repetition the same draws
      const it = steps(m, ids, out);
      await it.next();
      pp.push(nP / (performance.now() - t0) * 1000);
      t0 = performance.now();
      for (let i = 0; i < nG; i++) await it.next();
      tg.push(nG / (performance.now() - t0) * 1000); // (the chain's speculative steps after the last id: not timed)
      await it.return();
    }
    const i1 = m.info();
    console.log(`| pp${nP} t/s | tg${nG} t/s | dispatches/token | per layer |`);
    console.log('|-----------|-----------|------------------|-----------|');
    console.log(`| ${median(pp).toFixed(1).padStart(9)} | ${median(tg).toFixed(1).padStart(9)} | ${String(i1.stepDispatches).padStart(16)} | ` +
      `${(i1.stepDispatches / i1.n_layer).toFixed(1).padStart(9)} |`);
    rowsLine();
  }
  m.free();
  src.close();
}

main().then(() => process.exit(0), (e) => {
  console.error('llamaweb (web): ' + (e && e.message || e));
  process.exit(1);
});
