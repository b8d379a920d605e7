#!/usr/bin/env node
// The `llamaweb` runner for Node + Dawn (WebGPU from the wasm build; scripts/build-wasm.sh, LW_WASM_DIR):
//   node web/cli.mjs run   -m M.gguf -p "text" [-n 64] [options]    greedy generation, text streamed
//   node web/cli.mjs bench -m M.gguf [-p 512] [-n 128] [-r 3] [options]
// options: --ctx N (KV cells), --batch N (tokens per step), --submit N (dispatches per command buffer), --kv f16|f32,
//          --f16 0|1, --sg 0|1 (variant switches; default: as the device offers).
// Pick the Vulkan driver with VK_ICD_FILENAMES (lavapipe, SwiftShader) as for the tests.
import { setup } from './lw-node.mjs';
import { GpuModel, fileSource } from './lw-model.mjs';

function usage() {
  console.error('usage: node web/cli.mjs run -m M.gguf -p TEXT [-n N] [--ctx N] [--batch N] [--submit N] [--f16 0|1] [--sg 0|1] [--kv f16|f32]\n' +
    '       node web/cli.mjs bench -m M.gguf [-p 512] [-n 128] [-r 3] [--ctx N] [--batch N] [--submit N] [--f16 0|1] [--sg 0|1]');
  process.exit(2);
}

function parse(argv) {
  const o = { cmd: argv[0] };
  for (let i = 1; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (v === undefined) usage();
    if (k === '-m') o.model = v;
    else if (k === '-p') o.prompt = v;
    else if (k === '-n') o.n = Number(v);
    else if (k === '-r') o.reps = Number(v);
    else if (k === '--ctx') o.nCtx = Number(v);
    else if (k === '--batch') o.nBatch = Number(v);
    else if (k === '--submit') o.submitEvery = Number(v);
    else if (k === '--f16') o.f16 = Number(v);
    else if (k === '--sg') o.subgroups = Number(v);
    else if (k === '--kv') o.kvF32 = v === 'f32';
    else usage();
  }
  if (!o.model || (o.cmd !== 'run' && o.cmd !== 'bench')) usage();
  return o;
}

const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];

async function main() {
  const o = parse(process.argv.slice(2));
  const ctx = await setup();
  if (ctx.skip) throw new Error(ctx.skip);
  const M = ctx.Module;
  const info = ctx.device.features;
  const src = fileSource(o.model);
  const nCtx = o.nCtx ?? (o.cmd === 'bench' ? (o.prompt ? Number(o.prompt) : 512) + (o.n ?? 128) + 8 : 2048);
  const m = await GpuModel.open(M, src, { nCtx, nBatch: o.nBatch, submitEvery: o.submitEvery, f16: o.f16, subgroups: o.subgroups, kvF32: o.kvF32 });
  const i0 = m.info();
  const a = ctx.info || {};
  console.error(`model: ${o.model} (${i0.arch}, ${i0.n_layer} blocks, vocab ${i0.n_vocab}), weights ${(i0.weightBytes / 1048576).toFixed(1)} MiB ` +
    `streamed in ${m.loadMs.toFixed(0)} ms; adapter ${a.vendor || '?'} ${a.architecture || ''} ${a.device || ''}; ` +
    `f16 ${info.has('shader-f16') && o.f16 !== 0 ? 'yes' : 'no'}, subgroups ${info.has('subgroups') && o.subgroups !== 0 ? 'yes' : 'no'}`);

  if (o.cmd === 'run') {
    const ids = m.tokenize(o.prompt ?? '', true);
    const n = o.n ?? 64;
    const dec = new TextDecoder('utf-8');
    process.stdout.write(o.prompt ?? '');
    let t0 = performance.now();
    let next = await m.decode(ids);
    const ppMs = performance.now() - t0;
    t0 = performance.now();
    let made = 0;
    for (; made < n; made++) {
      if (m.isEog(next)) break;
      process.stdout.write(dec.decode(m.pieceBytes(next), { stream: true }));
      if (made + 1 < n) next = await m.decode([next]);
    }
    const tgMs = performance.now() - t0;
    process.stdout.write(dec.decode() + '\n');
    const i1 = m.info();
    console.error(`prompt: ${ids.length} tokens, ${(ids.length / ppMs * 1000).toFixed(1)} t/s; generation: ${made} tokens, ` +
      `${(Math.max(made - 1, 0) / tgMs * 1000).toFixed(1)} t/s; dispatches per token ${i1.stepDispatches} ` +
      `(${(i1.stepDispatches / i1.n_layer).toFixed(1)} per layer), submits ${i1.submits}`);
  } else {
    const nP = o.prompt ? Number(o.prompt) : 512, nG = o.n ?? 128, reps = o.reps ?? 3;
    // a fixed pseudo-random token sequence, as llama-bench's
    let s = 12345;
    const ids = Array.from({ length: nP }, () => (s = (s * 1103515245 + 12345) >>> 0) % i0.n_vocab);
    const pp = [], tg = [];
    for (let r = 0; r < reps; r++) {
      m.nPast = 0;
      let t0 = performance.now();
      let next = await m.decode(ids);
      pp.push(nP / (performance.now() - t0) * 1000);
      t0 = performance.now();
      for (let i = 0; i < nG; i++) next = await m.decode([next]);
      tg.push(nG / (performance.now() - t0) * 1000);
    }
    const i1 = m.info();
    console.log(`| pp${nP} t/s | tg${nG} t/s | dispatches/token | per layer |`);
    console.log('|-----------|-----------|------------------|-----------|');
    console.log(`| ${median(pp).toFixed(1).padStart(9)} | ${median(tg).toFixed(1).padStart(9)} | ${String(i1.stepDispatches).padStart(16)} | ` +
      `${(i1.stepDispatches / i1.n_layer).toFixed(1).padStart(9)} |`);
  }
  m.free();
  src.close();
}

main().then(() => process.exit(0), (e) => {
  console.error('llamaweb (web): ' + (e && e.message || e));
  process.exit(1);
});
