// The cost of a grammar per decode step in the JS package, on the CPU engine (wasm, Node) and on WebGPU
// (Node + Dawn: the default adapter, lavapipe here): a tiny llama with a real vocabulary (../shared's llama-spm,
// 32000 tokens; LW_VOCAB=FILE for another, e.g. a 150k one) generates greedily without a grammar, greedily
// under a GBNF grammar that never ends early, and sampled in JSON mode; ms per token (medians of 3
// alternating rounds) and the grammar's own pick (mask + CPU sampler) per token.
//   LW_WASM_DIR=... LW_CLI=build-NAME/llamaweb node bench/grammar-cost.mjs [tokens=16] [cpu,webgpu]
import { readFileSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setup, loadModule, repoRoot } from '../web/lw-node.mjs';
import { Llamaweb, bytesSource } from '../web/llamaweb.mjs';
import { structuredRun } from '../web/lw-structured.mjs';

const n = Number(process.argv[2] || 16);
const devices = (process.argv[3] || 'cpu,webgpu').split(',');
const cli = process.env.LW_CLI || path.join(repoRoot(), 'build/release/llamaweb');
const vocab = process.env.LW_VOCAB || path.resolve(repoRoot(), '../shared/vocab/ggml-vocab-llama-spm.gguf');
if (!existsSync(cli) || !existsSync(vocab)) {
  console.log(`SKIP: needs ${cli} (LW_CLI) and ${vocab} (LW_VOCAB)`);
  process.exit(0);
}
const dir = mkdtempSync(path.join(tmpdir(), 'lw-grammar-cost-'));
const file = path.join(dir, 'm.gguf');
execFileSync(cli, ['synth', '--preset', 'tiny', '--type', 'f32', '--vocab', vocab, '-o', file], { stdio: 'ignore' });
const engines = [];
if (devices.includes('cpu')) engines.push(['cpu', new Llamaweb(await loadModule(), null)]);
if (devices.includes('webgpu')) {
  const g = await setup();
  if (g.skip) console.log('no WebGPU: ' + g.skip);
  else engines.push(['webgpu', new Llamaweb(g.Module, g.device)]);
}
const prompt = 'Once upon a time';
const gbnf = { kind: 'gbnf', text: 'root ::= [a-z ,.]+' };
const med = (x) => x.slice().sort((p, q) => p - q)[x.length >> 1].toFixed(3);
for (const [dev, lw] of engines) {
  const m = await lw.open(bytesSource(readFileSync(file)), { nCtx: 256, device: dev });
  await m.generate(prompt, { maxTokens: 2 });
  await structuredRun(m, { mode: 'text', prompt, constraint: gbnf, maxTokens: 2 });
  const r = { free: [], gbnf: [], gpick: [], json: [], jpick: [] };
  for (let i = 0; i < 3; i++) {
    const a = await m.generate(prompt, { maxTokens: n });
    r.free.push(a.genMs / Math.max(1, a.tokens.length - 1));
    const b = await structuredRun(m, { mode: 'text', prompt, constraint: gbnf, maxTokens: n });
    r.gbnf.push(b.genMs / Math.max(1, b.tokens.length - 1));
    r.gpick.push(b.grammar.ms / b.grammar.steps);
    const c = await structuredRun(m, { mode: 'text', prompt, constraint: { kind: 'json' }, maxTokens: n, sampling: { temp: 1, seed: i + 1 } });
    r.json.push(c.genMs / Math.max(1, c.tokens.length - 1));
    r.jpick.push(c.grammar.ms / c.grammar.steps);
  }
  console.log(`${dev}, n_vocab ${m.info.n_vocab}, ms per token: greedy ${med(r.free)}; greedy with a grammar ${med(r.gbnf)} ` +
    `(its pick ${med(r.gpick)}); JSON mode sampled ${med(r.json)} (its pick ${med(r.jpick)})`);
  m.free();
}
rmSync(dir, { recursive: true, force: true });
process.exit(0); // Dawn keeps the process alive
