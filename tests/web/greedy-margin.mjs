// Greedy tokens of a GGUF on this machine's WebGPU adapter against the native CPU engine's, with the margin of
// each step's logits (not a test: prints one line per step). Where the two engines part, it says how far apart
// the GPU's own top logit and the logit of the native engine's token were: a gap of a few thousandths on a
// random-weight model is a near-tie that float sums in another order may flip, a large one is a bug.
//   node tests/web/greedy-margin.mjs FILE.gguf [N] [PROMPT]   (LW_CLI: the native CLI, default build/release/llamaweb)
import { execFileSync } from 'node:child_process';
import { setup } from '../../web/lw-node.mjs';
import { GpuModel, fileSource } from '../../web/lw-model.mjs';

const [f, nArg, promptArg] = process.argv.slice(2);
if (!f) { console.error('usage: node tests/web/greedy-margin.mjs FILE.gguf [N] [PROMPT]'); process.exit(2); }
const n = Number(nArg || 16), prompt = promptArg || 'Once upon a time';
const cli = process.env.LW_CLI || 'build/release/llamaweb';
const ctx = await setup();
if (ctx.skip) { console.log('SKIP: ' + ctx.skip); process.exit(0); }
const g = await GpuModel.open(ctx.Module, fileSource(f), { nCtx: 256, nBatch: 64 });
const dec = new TextDecoder();
const pids = g.tokenize(prompt, true);
// the native engine's greedy ids (its last line: 'ids: PROMPT | GENERATED')
const out = execFileSync(cli, ['run', '-m', f, '-p', prompt, '-n', String(n), '--temp', '0', '--ctx', '256'],
  { encoding: 'utf8', maxBuffer: 1 << 24, stdio: ['ignore', 'pipe', 'ignore'] });
const idsLine = out.split('\n').reverse().find((l) => l.startsWith('ids:'));
if (!idsLine) { console.error('no ids line from ' + cli); process.exit(1); }
const nat = idsLine.split('|')[1].trim().split(/\s+/).map(Number);
let r = await g.decode(pids, 'logits');
let parted = -1;
for (let s = 0; s < n; s++) {
  const L = r.logits;
  let a = 0, b = -1; // top two
  for (let i = 1; i < L.length; i++) {
    if (L[i] > L[a]) { b = a; a = i; } else if (b < 0 || L[i] > L[b]) b = i;
  }
  const nid = nat[s], same = nid === r.id;
  if (!same && parted < 0 && nid !== undefined) parted = s;
  console.log(`step ${s}: gpu ${r.id} ${JSON.stringify(dec.decode(g.pieceBytes(r.id)))} (top ${L[a].toFixed(4)}, ` +
    `second ${b} ${L[b].toFixed(4)}, margin ${(L[a] - L[b]).toFixed(4)}); native ${nid ?? '-'}` +
    (same || nid === undefined ? '' : ` (its logit here ${L[nid].toFixed(4)}, ${(L[r.id] - L[nid]).toFixed(4)} below)`));
  r = await g.decode([r.id], 'logits');
}
console.log(parted < 0 ? `${f}: the same ${n} greedy tokens` : `${f}: parted at step ${parted}`);
g.free();
process.exit(0);
