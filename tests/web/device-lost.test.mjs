// GPU faults in Node + Dawn (lavapipe / SwiftShader): the device destroyed mid-generation (what a laptop's
// sleep or a driver reset does: device.lost resolves, every later GPU call fails). Checks: the generation
// rejects with a LlamawebError of code GPU_UNAVAILABLE (not a hang, not a TypeError), the model frees
// without throwing, a later open on the dead device rejects with GPU_UNAVAILABLE at once, with
// device: 'auto' the CPU engine takes over on the same Llamaweb and gives the GPU's greedy text, and a new
// module + device opens again and gives the same text as before the loss. Model: a synthetic llama
// (`llamaweb synth`, built-in vocabulary) so no ../shared data is needed.
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/device-lost.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { Llamaweb, LlamawebError } from '../../web/llamaweb.mjs';

const ctx = await setup();
function findCli() {
  const dirs = ['build/release', 'build'].map((d) => path.join(repoRoot(), d, 'llamaweb'));
  for (const p of [process.env.LW_CLI, ...dirs]) if (p && existsSync(p)) return p;
  return null;
}
const cli = findCli();
// SwiftShader compiles every pipeline slowly (~30 s for a model): there only with LW_TEST_SLOW=1 (lavapipe runs it)
const slowDriver = !ctx.skip && /swiftshader/i.test(ctx.info && ctx.info.architecture || '') && process.env.LW_TEST_SLOW !== '1';
const skip = ctx.skip || (slowDriver && 'SwiftShader (slow pipeline compilation; LW_TEST_SLOW=1 runs it)') || (!cli && 'no native CLI to write the synthetic model (scripts/build.sh release)') || false;
if (skip) console.log('SKIP: ' + skip);
const tmp = mkdtempSync(path.join(process.env.LW_TMP || os.tmpdir(), 'lw-lost-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

let bytes = null;
if (!skip) {
  const file = path.join(tmp, 'tiny.gguf');
  execFileSync(cli, ['synth', '--preset', 'tiny', '--type', 'q8_0', '--vocab', 'builtin', '--layers', '2', '-o', file]);
  bytes = readFileSync(file);
}
const N = 24; // tokens per generation
const PROMPT = 'Once upon a time';

// A promise that rejects after ms: a lost device must not leave a generation waiting forever.
const within = (p, ms, what) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms))]);

test('device destroyed mid-generation: GPU_UNAVAILABLE, freed, CPU takes over with auto, a new device works', { skip }, async () => {
  const lw = new Llamaweb(ctx.Module, ctx.device, { device: 'webgpu' });
  const m = await lw.open(new Blob([bytes]), { nCtx: 128 });
  assert.equal(m.device, 'webgpu');
  const ref = await m.generate(PROMPT, { maxTokens: N });
  assert.equal(ref.tokens.length, N);

  // the loss after a few tokens of the next generation
  let seen = 0;
  const lost = ctx.device.lost;
  const run = m.generate(PROMPT, { maxTokens: 10 * N, onToken: () => { if (++seen === 5) ctx.device.destroy(); } });
  const err = await within(run.then(() => null, (e) => e), 30000, 'generation after device.destroy()');
  assert.ok(err, `the generation resolved after the device was destroyed (${seen} tokens)`);
  assert.ok(err instanceof LlamawebError, `a ${err && err.constructor && err.constructor.name}: ${err && err.message}`);
  assert.equal(err.code, 'GPU_UNAVAILABLE', `code ${err.code}: ${err.message}`);
  const info = await within(lost, 5000, 'device.lost');
  assert.equal(info.reason, 'destroyed');
  console.log(`# lost after ${seen} tokens: ${err.code}: ${err.message.slice(0, 160)}`);
  assert.doesNotThrow(() => m.free());

  // the same Llamaweb: WebGPU refuses at once (typed), 'auto' opens on the CPU engine with the same text
  const again = await within(lw.open(new Blob([bytes]), { nCtx: 128 }).then(() => null, (e) => e), 30000, 'open on a lost device');
  assert.ok(again instanceof LlamawebError && again.code === 'GPU_UNAVAILABLE', `open on a lost device: ${again && again.code}: ${again && again.message}`);
  if (lw.cpu) {
    const c = await within(lw.open(new Blob([bytes]), { nCtx: 128, device: 'auto' }), 60000, "open with device 'auto'");
    try {
      assert.equal(c.device, 'cpu');
      const r = await c.generate(PROMPT, { maxTokens: N });
      assert.deepEqual(r.tokens, ref.tokens, 'the CPU engine continues with the GPU\'s greedy tokens');
    } finally {
      c.free();
    }
  } else {
    console.log('# the module has no CPU engine: the auto fallback is not checked');
  }

  // a new module and device (what a page reload does): the model opens and generates as before
  const ctx2 = await setup();
  assert.ok(!ctx2.skip, ctx2.skip);
  const lw2 = new Llamaweb(ctx2.Module, ctx2.device, { device: 'webgpu' });
  const m2 = await lw2.open(new Blob([bytes]), { nCtx: 128 });
  try {
    const r2 = await m2.generate(PROMPT, { maxTokens: N });
    assert.deepEqual(r2.tokens, ref.tokens, 'after the loss, a new device gives the same greedy tokens');
  } finally {
    m2.free();
  }
});
