// Whether greedy decoding on this machine's WebGPU adapter repeats itself bit for bit (not a test: prints one
// line per run). Runs the prompt and N one-token steps reading every step's logits back, three times: twice on
// one opened model (nPast reset to 0 between them) and once on a second opening of the same file. Then says,
// for each later run against the first, the first step whose logits differ in any bit, by how much (largest
// |difference| and the logits' range), and the first step whose greedy id differs. A difference within one
// opening points at the kernels (a race, an order that depends on scheduling); one only across openings at
// the upload or the plan.
//   node tests/web/determinism.mjs FILE.gguf [N] [PROMPT] [TUNE_JSON ...]   (each TUNE_JSON: one more pass)
import { setup } from '../../web/lw-node.mjs';
import { GpuModel, fileSource } from '../../web/lw-model.mjs';

const [f, nArg, promptArg, ...tunes] = process.argv.slice(2);
if (!f) {
  console.error('usage: node tests/web/determinism.mjs FILE.gguf [N] [PROMPT] [TUNE_JSON ...]');
  process.exit(2);
}
const n = Number(nArg || 64), prompt = promptArg || 'Once upon a time there was';
const ctx = await setup();
if (ctx.skip) { console.log('SKIP: ' + ctx.skip); process.exit(0); }

// The logits of the prompt's last token and of n greedy steps after it, and the ids picked.
async function run(g) {
  g.nPast = 0;
  const logits = [], ids = [];
  let r = await g.decode(g.tokenize(prompt, true), 'logits');
  for (let s = 0; ; s++) {
    logits.push(r.logits);
    ids.push(r.id);
    if (s === n) break;
    r = await g.decode([r.id], 'logits');
  }
  return { logits, ids };
}

// Where run b first differs from run a.
function compare(a, b) {
  let step = -1, worst = 0, range = 0, idStep = -1, count = 0;
  for (let s = 0; s < a.logits.length; s++) {
    const x = a.logits[s], y = b.logits[s];
    if (idStep < 0 && a.ids[s] !== b.ids[s]) idStep = s;
    if (step >= 0) continue;
    let lo = Infinity, hi = -Infinity, d = 0, bits = 0;
    for (let i = 0; i < x.length; i++) {
      if (!Object.is(x[i], y[i])) bits++;
      d = Math.max(d, Math.abs(x[i] - y[i]));
      lo = Math.min(lo, x[i]);
      hi = Math.max(hi, x[i]);
    }
    if (bits) { step = s; worst = d; range = hi - lo; count = bits; }
  }
  return step < 0 ? `the same bits over ${a.logits.length} steps` :
    `logits first differ at step ${s2(step)} (${count} of ${a.logits[0].length}, largest |difference| ${worst.toExponential(3)}, ` +
    `range ${range.toFixed(3)}); ` +
    (idStep < 0 ? 'the same greedy ids' : `greedy ids part at step ${idStep}`);
}
const s2 = (s) => (s === 0 ? '0 (the prompt)' : String(s));

for (const tune of tunes.length ? tunes : ['']) {
  const opts = { nCtx: 1024, ...(tune ? { tune: JSON.parse(tune) } : {}) };
  const g = await GpuModel.open(ctx.Module, fileSource(f), opts);
  const a = await run(g), b = await run(g);
  const info = g.info();
  g.free();
  const h = await GpuModel.open(ctx.Module, fileSource(f), opts);
  const c = await run(h);
  h.free();
  console.log(`${f} tune ${tune || '{}'} (${info.stepDispatches} dispatches per token):\n` +
    `  same opening: ${compare(a, b)}\n  second opening: ${compare(a, c)}`);
}
