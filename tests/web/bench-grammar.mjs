// Cost of a grammar per decode step on the WebGPU engine (not a test: prints a table): greedy decode steps
// of a model without a grammar, with one applied on the GPU (the mask uploaded per step, the argmax over the
// allowed ids there, 4 bytes read back: the default), and with one on the read-back path (GpuModel.gpuMask
// = false: the last row's logits read back, the CPU sampler picks among the allowed ids). The grammar
// `root ::= [a-z ,.]+` allows most of a vocabulary at every step, so its mask is the worst case of a busy one.
// Time per decode step of the reply (genMs / (tokens - 1)), median of `rounds` alternating runs.
//   VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.json node tests/web/bench-grammar.mjs [tokens] [rounds]
//   LW_BENCH_MODELS="path.gguf ..." (default: the shared stories260K (512-token vocabulary) and
//   llama-2-tiny-random (32000))
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { Llamaweb, bytesSource } from '../../web/llamaweb.mjs';
import { structuredRun } from '../../web/lw-structured.mjs';

const [n = 48, rounds = 5] = process.argv.slice(2).map(Number);
const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const files = (process.env.LW_BENCH_MODELS || ['stories260K.gguf', 'llama-2-tiny-random.gguf'].map((f) => path.join(shared, 'models', f)).join(' '))
  .trim().split(/\s+/).filter((f) => existsSync(f));
const ctx = await setup();
if (ctx.skip) {
  console.log('SKIP: ' + ctx.skip);
  process.exit(0);
}
const info = ctx.Module.lwGpu.adapterInfo;
console.log(`adapter ${info.vendor} / ${info.architecture} / ${info.device}; ${n} greedy tokens, median of ${rounds}`);
console.log('| model | vocab | free ms/step (tok/s) | grammar, mask on GPU | grammar, logits read back | mask share |');
console.log('|-------|------:|---------------------:|---------------------:|--------------------------:|-----------:|');
const lw = new Llamaweb(ctx.Module, ctx.device);
const constraint = { kind: 'gbnf', text: 'root ::= [a-z ,.]+' };
const med = (x) => [...x].sort((p, q) => p - q)[x.length >> 1];
for (const f of files) {
  const m = await lw.open(bytesSource(readFileSync(f)), { nCtx: 256, device: 'webgpu' });
  const eng = m.engine, prompt = 'Once upon a time';
  const perStep = (r) => r.genMs / Math.max(1, r.tokens.length - 1);
  const free = [], gpu = [], back = [], maskShare = [];
  const constrained = async (onGpu) => {
    eng.gpuMask = onGpu;
    try {
      return await structuredRun(m, { mode: 'text', prompt, constraint, maxTokens: n });
    } finally {
      eng.gpuMask = true;
    }
  };
  await m.generate(prompt, { maxTokens: 4 }); // warm-up (pipelines, caches)
  await constrained(true);
  await constrained(false);
  for (let i = 0; i < rounds; i++) {
    free.push(perStep(await m.generate(prompt, { maxTokens: n })));
    const a = await constrained(true);
    if (a.grammar.gpuSteps !== a.grammar.steps) throw new Error('the mask path did not apply to every step');
    gpu.push(perStep(a));
    maskShare.push(a.grammar.ms / a.grammar.steps);
    back.push(perStep(await constrained(false)));
  }
  const cell = (ms) => `${ms.toFixed(3)} (${(1000 / ms).toFixed(1)})`;
  console.log(`| ${path.basename(f)} | ${m.info.n_vocab} | ${cell(med(free))} | ${cell(med(gpu))} | ${cell(med(back))} | ` +
    `${med(maskShare).toFixed(3)} ms |`);
  m.free();
}
setTimeout(() => process.exit(0), 100); // Dawn keeps the process alive
