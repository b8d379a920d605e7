// Sampling on the GPU (topk.wgsl SAMPLE=1, src/webgpu/kernel-ops-sample.c, gpu-model-sample.c) and run-time
// tune overrides of the model, through the wasm build:
//   (a) the sampling pass against its scalar reference (lw__gpu_sample_ref) on fixed candidate lists: the same
//       id for the same uniform number (ties, temperature -> 0, greedy, top-p 1.0 and small, min-p, top-k < n,
//       -inf candidates, 256 candidates), plus answers that follow from the definitions alone;
//   (b) many draws from top-k + sampling over 512 logits with the CPU sampler's generator: the same tokens as
//       the CPU sampler (src/sample) drawing from the same logits and seed, and a distribution within a
//       chi-square bound (and a per-token bound) of the CPU chain's exact probabilities;
//   (c) whole model (stories260K): GpuModel.decode sampling on the GPU is reproducible for a seed, draws only
//       tokens the CPU chain keeps on the CPU engine's logits, makes text, and creates nothing per token;
//   tune: an override reaches the plan (GpuModel.variants()) and a bad one is refused with a message;
//   web/cli.mjs run with the sampling and tune options (the same text as the native `llamaweb run` on the CPU
//   for the same seed, when LW_CLI names a native build).
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/sample.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { GpuModel, CpuModel, fileSource, bytesSource } from '../../web/lw-model.mjs';

const ctx = await setup();
const skip = ctx.skip || false;
if (skip) console.log('SKIP: ' + skip);
const M = ctx.Module;
const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const noStories = !existsSync(stories) && `no ${stories}`;

let h = 0;
function handle() {
  if (!h) {
    h = M._lw_wasm_sample_new();
    assert.ok(h, 'out of memory');
    assert.equal(M.UTF8ToString(M._lw_wasm_sample_error(h)), '', 'GPU open');
  }
  return h;
}

// Deterministic pseudo-random numbers for inputs (xorshift32).
function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
}

// One run of lw_wasm_sample_run: returns {gpu, ref, margin, cpu, expected} arrays.
async function run({ logits = false, ids = null, values, k, temp, topP = 1, minP = 0, us = null, draws = 0, seed = 0 }) {
  const n = values.length, nd = us ? us.length : draws;
  const pIds = M._malloc(4 * n), pVals = M._malloc(4 * n), pUs = us ? M._malloc(4 * nd) : 0;
  try {
    if (ids) M.HEAPU32.set(ids, pIds >> 2);
    M.HEAPF32.set(values, pVals >> 2);
    if (us) M.HEAPF32.set(us, pUs >> 2);
    const st = M._lw_wasm_sample_run(handle(), logits ? 1 : 0, pIds, pVals, n, k, temp, topP, minP, pUs, nd, seed);
    assert.equal(st, 0, M.UTF8ToString(M._lw_wasm_sample_error(h)));
    await M.lwGpu.settle();
    assert.equal(M.UTF8ToString(M._lw_wasm_sample_gpu_error(h)), '', 'GPU error');
  } finally {
    M._free(pIds);
    M._free(pVals);
    if (pUs) M._free(pUs);
  }
  const r = { gpu: [], ref: [], margin: [], cpu: [], expected: [] };
  for (let j = 0; j < nd; j++) {
    r.gpu.push(M._lw_wasm_sample_gpu_id(h, j));
    r.ref.push(M._lw_wasm_sample_ref_id(h, j));
    r.margin.push(M._lw_wasm_sample_margin(h, j));
    r.cpu.push(M._lw_wasm_sample_cpu_id(h, j));
  }
  if (logits && !us) for (let i = 0; i < n; i++) r.expected.push(M._lw_wasm_sample_expected(h, i));
  return r;
}

// Every draw: GPU id = reference id, except where u lies within 1e-5 of a boundary of the drawn interval
// (a GPU's exp() may differ from expf by a few ulp). Returns the number of such skipped draws.
function sameAsRef(r, what) {
  let skipped = 0;
  for (let j = 0; j < r.gpu.length; j++) {
    if (r.gpu[j] === r.ref[j]) continue;
    assert.ok(r.margin[j] < 1e-5, `${what}: draw ${j}: GPU ${r.gpu[j]}, reference ${r.ref[j]} (margin ${r.margin[j]})`);
    skipped++;
  }
  return skipped;
}

// u values: exact ends, a grid, and pseudo-random ones (f32-exact multiples of 2^-24 below 1).
function uValues(count, seed) {
  const r = rng(seed), out = [0, 2 ** -24, 1 - 2 ** -24];
  for (let i = 1; i < 64; i++) out.push(i / 64);
  while (out.length < count) out.push(Math.floor(r() * 16777216) / 16777216);
  return out;
}

test('(a) sampling pass = its scalar reference on fixed candidate lists, and the definitions', { skip }, async () => {
  // hand-made: ids 7 and 3 tie for the best (2.0), 9 at 1.0, 4 at 0.0, 1 at -inf
  const ids = [7, 3, 9, 1, 4], vals = [2, 2, 1, -Infinity, 0];
  const e2 = Math.exp(2), tot = 2 * e2 + Math.exp(1) + 1;
  const cases = [
    // [what, params, [[u, expected id by the definitions], ...]]
    ['temperature -> 0, tie', { temp: 1e-6 }, [[0.25, 3], [0.49, 3], [0.51, 7], [0.99, 7]]],
    ['greedy (temperature 0)', { temp: 0 }, [[0.0, 3], [0.99, 3]]],
    ['temperature 1, no cuts (top-p 1.0)', { temp: 1, topP: 1.0 }, [[0.3, 3], [0.6, 7], [(2 * e2 + 0.5 * Math.exp(1)) / tot, 9], [0.999, 4]]],
    ['min-p 0.5 keeps the tie only', { temp: 1, minP: 0.5 }, [[0.999, 7], [0.1, 3]]],
    ['top-p 0.5 keeps two', { temp: 1, topP: 0.5 }, [[0.999, 7], [0.2, 3]]],
    ['top-p 0.3 keeps one', { temp: 1, topP: 0.3 }, [[0.999, 3]]],
    ['top-k 3 of 5', { temp: 1, k: 3 }, [[0.999, 9]]],
    ['high temperature', { temp: 100, topP: 1.0 }, [[0.999, 4], [0.7, 9]]],
    ['infinite temperature: uniform over the finite ones', { temp: Infinity }, [[0.999, 4], [0.3, 7], [0.6, 9], [0.2, 3]]],
  ];
  let skipped = 0, draws = 0;
  for (const [what, p, expect] of cases) {
    const us = [...expect.map((e) => Math.fround(e[0])), ...uValues(80, 7)];
    const r = await run({ ids, values: vals, k: p.k ?? 5, temp: p.temp, topP: p.topP ?? 1, minP: p.minP ?? 0, us });
    expect.forEach(([u, id], j) => assert.equal(r.gpu[j], id, `${what}: u ${u}: GPU ${r.gpu[j]}, expected ${id}`));
    skipped += sameAsRef(r, what);
    draws += us.length;
  }
  // random lists: 40 candidates in shuffled order with ties over a grid of parameters; 256 (the cap) over a few
  // (on a CPU driver a pass with k = 256 costs ~5 ms: k rounds of the tournament)
  const rnd = rng(99);
  for (const n of [40, 256]) {
    const ids2 = Array.from({ length: n }, (_, i) => (i * 7919 + 13) % 100003);
    const v2 = Array.from({ length: n }, () => Math.fround(rnd() * 12 - 6));
    for (let i = 0; i < 8; i++) v2[(i * 5) % n] = v2[(i * 11 + 3) % n]; // ties
    for (const temp of n === 40 ? [0.5, 1.0, 2.0] : [1.0])
      for (const [topP, minP] of n === 40 ? [[1, 0], [0.9, 0.05], [0.5, 0]] : [[1, 0], [0.9, 0.05]])
        for (const k of [n, 10]) {
          const us = uValues(n === 40 ? 72 : 48, n + k);
          const r = await run({ ids: ids2, values: v2, k, temp, topP, minP, us });
          skipped += sameAsRef(r, `n ${n} k ${k} T ${temp} top-p ${topP} min-p ${minP}`);
          draws += us.length;
        }
  }
  console.log(`# (a) ${draws} draws: GPU = reference on all but ${skipped} within 1e-5 of an interval boundary`);
  assert.ok(skipped <= draws / 1000, `${skipped} draws near boundaries`);
});

// Upper tail of chi-square with df degrees of freedom at a z-score (Wilson-Hilferty): the critical value.
function chi2Critical(df, z) {
  const a = 2 / (9 * df);
  return df * (1 - a + z * Math.sqrt(a)) ** 3;
}

test('(b) many draws: the CPU sampler\'s tokens from the same seed, and its chain\'s distribution', { skip }, async () => {
  // 6000 draws: a wrong probability of 0.01 on a token of p = 0.05 is 3.6 sigma there; the chi-square test
  // pools such deviations over all tokens (2000 at 32000 logits: the CPU sampler's draws cost ~1 ms each)
  for (const { n, N, ...p } of [
    { n: 512, N: 6000, k: 40, temp: 0.8, topP: 0.95, minP: 0.05, seed: 0x5eed }, // the CPU sampler's defaults
    { n: 512, N: 6000, k: 64, temp: 1.5, topP: 1.0, minP: 0.0, seed: 12345 },    // a wide draw: all 64 kept
    // a vocabulary of 32000: 8 workgroups in pass 1, the sampling pass merges their 8 x 40 candidates
    { n: 32000, N: 2000, k: 40, temp: 1.0, topP: 0.9, minP: 0.02, seed: 777 },
  ]) {
    // logits falling with the id plus noise (512: the CPU sampler's defaults keep 24 tokens of them), ids
    // scattered so that the best ones fall in different workgroups of pass 1
    const rnd = rng(4242 + n);
    const logits = new Array(n);
    for (let i = 0; i < n; i++) logits[(i * 7919) % n] = Math.fround(2 * (rnd() * 4 - 6 * Math.min(i, 512) / 512));
    const t0 = performance.now();
    const r = await run({ logits: true, values: logits, draws: N, ...p });
    const ms = performance.now() - t0;
    // the same generator: the CPU sampler drew the same tokens (but where f32 and double sums differ at a boundary)
    let same = 0;
    for (let j = 0; j < N; j++) if (r.gpu[j] === r.cpu[j]) same++;
    sameAsRef(r, JSON.stringify(p));
    // distribution: counts vs the chain's exact probabilities
    const count = new Array(n).fill(0);
    for (const id of r.gpu) count[id]++;
    let chi2 = 0, df = -1, restE = 0, restO = 0, worst = 0, kept = 0;
    for (let i = 0; i < n; i++) {
      const e = r.expected[i] * N;
      if (r.expected[i] === 0) {
        assert.equal(count[i], 0, `token ${i} is outside the kept set but was drawn ${count[i]} times`);
        continue;
      }
      kept++;
      // per token: |freq - p| within 5 standard deviations of a binomial share (+ 1/N)
      const sd = Math.sqrt(r.expected[i] * (1 - r.expected[i]) / N);
      worst = Math.max(worst, Math.abs(count[i] / N - r.expected[i]) / (5 * sd + 1 / N));
      if (e >= 5) {
        chi2 += (count[i] - e) ** 2 / e;
        df++;
      } else {
        restE += e;
        restO += count[i];
      }
    }
    if (restE > 0) {
      chi2 += (restO - restE) ** 2 / restE;
      df++;
    }
    const crit = chi2Critical(df, 4.75); // p ~ 1e-6: a correct sampler fails once in a million runs
    console.log(`# (b) n ${n} ${JSON.stringify(p)}: ${N} draws in ${ms.toFixed(0)} ms; ${kept} tokens kept; same as the CPU sampler ` +
      `${same}/${N}; chi-square ${chi2.toFixed(1)} (df ${df}, bound ${crit.toFixed(1)}); worst |freq - p| ${(worst).toFixed(2)} of its 5-sigma bound`);
    assert.ok(same >= N * 0.999, `only ${same}/${N} draws equal the CPU sampler's`);
    assert.ok(chi2 < crit, `chi-square ${chi2} >= ${crit} (df ${df})`);
    assert.ok(worst <= 1, `a token's frequency is off by ${worst} of its bound`);
  }
});

// The CPU sampler's chain in double precision on a logits row: the set of ids it can draw.
function keptSet(logits, p) {
  const order = Array.from(logits, (v, i) => i).sort((a, b) => logits[b] - logits[a] || a - b);
  let m = p.topK > 0 && p.topK < logits.length ? p.topK : logits.length;
  const best = logits[order[0]];
  if (p.topP < 1) {
    let tot = 0, cum = 0;
    for (let r = 0; r < m; r++) tot += Math.exp(logits[order[r]] - best);
    for (let r = 0; r < m; r++) {
      cum += Math.exp(logits[order[r]] - best) / tot;
      if (cum >= p.topP) {
        m = r + 1;
        break;
      }
    }
  }
  if (p.minP > 0) {
    const cut = best + Math.log(p.minP);
    let keep = 1;
    while (keep < m && logits[order[keep]] >= cut) keep++;
    m = keep;
  }
  return new Set(order.slice(0, m));
}

test('(c) stories260K: sampled decode is reproducible, keeps to the CPU chain\'s tokens, and creates nothing', { skip: skip || noStories }, async () => {
  const bytes = readFileSync(stories);
  const g = await GpuModel.open(M, bytesSource(bytes), { nCtx: 256 });
  const c = CpuModel.open(M, bytes, 256);
  try {
    const prompt = g.tokenize('Once upon a time', true);
    const params = { temp: 0.8, topK: 40, topP: 0.95, minP: 0.05, seed: 42 };
    async function generate(p, n, check) {
      g.nPast = 0;
      assert.equal(g.setSampling(p), p.topK > 0 ? Math.min(p.topK, 256) : 256);
      let next = await g.decode(prompt, 'sample');
      const out = [];
      for (let i = 0; i < n; i++) {
        if (check) await check(out.length ? [out[out.length - 1]] : prompt, next);
        out.push(next);
        if (g.isEog(next)) break;
        next = await g.decode([next], 'sample');
      }
      return out;
    }
    const dec = new TextDecoder();
    const text = (ids) => ids.map((id) => dec.decode(g.pieceBytes(id), { stream: true })).join('');
    // each sampled token is one the CPU chain keeps on the CPU engine's logits for the same context
    let outside = 0;
    const a = await generate(params, 32, async (fed, id) => {
      c.decode(fed);
      if (!keptSet(c.logits(g.nVocab), params).has(id)) outside++;
    });
    const b = await generate(params, 16);
    const d = await generate({ ...params, seed: 7 }, 16);
    // the options form of decode: setSampling when they change, one seeded sequence while they do not
    g.nPast = 0;
    let next = await g.decode(prompt, params);
    const viaOpts = [];
    for (let i = 0; i < 16; i++) {
      viaOpts.push(next);
      if (i + 1 < 16) next = await g.decode([next], params);
    }
    console.log(`# (c) seed 42: Once upon a time${text(a)}`);
    console.log(`# (c) seed 7:  Once upon a time${text(d)}`);
    assert.deepEqual(b, a.slice(0, 16), 'the same seed draws the same tokens');
    assert.deepEqual(viaOpts, a.slice(0, 16), 'decode(ids, params) = setSampling(params) + decode(ids, "sample")');
    assert.notDeepEqual(d, a.slice(0, 16), 'another seed draws other tokens');
    assert.ok(outside <= 1, `${outside} sampled tokens are outside the CPU chain's kept set`);
    // text: words of letters, mostly ones the model knows from the greedy story
    const words = text(a).trim().split(/\s+/);
    assert.ok(words.length >= 16, `only ${words.length} words`);
    assert.ok(words.filter((w) => /^[A-Za-z'",.!?-]+$/.test(w)).length >= 0.9 * words.length, 'not words: ' + text(a));
    assert.ok(/\b(the|was|a|and|to|She|He|they)\b/.test(text(a)), 'no common words: ' + text(a));
    // greedy parameters (temperature 0) take the argmax: the known greedy continuation
    g.nPast = 0;
    g.setSampling({ temp: 0 });
    assert.equal(await g.decode(prompt, 'sample'), 432);
    // refused parameters leave the model usable with the previous ones
    assert.throws(() => g.setSampling({ temp: NaN }), /NaN/);
    const nP = g.nPast;
    const s1 = await g.decode([432], 'sample'); // still greedy: the refused call left temperature 0
    g.nPast = nP;
    assert.equal(s1, await g.decode([432], 'argmax'));

    // invariant 2: sampled steps create nothing and read back the token id only
    g.nPast = 0;
    g.setSampling(params);
    next = await g.decode(prompt, 'sample');
    next = await g.decode([next], 'sample');
    const before = { ...M.lwGpu.counters }, i0 = g.info();
    for (let i = 0; i < 10; i++) next = await g.decode([next], 'sample');
    const cnt = M.lwGpu.counters, i1 = g.info();
    assert.equal(cnt.buffers, before.buffers, 'buffers created during sampled decode');
    assert.equal(cnt.stagingBuffers, before.stagingBuffers, 'staging buffers created during sampled decode');
    assert.equal(cnt.pipelines, before.pipelines, 'pipelines created during sampled decode');
    assert.equal(cnt.bindGroups, before.bindGroups, 'bind groups created during sampled decode');
    assert.equal(i1.buffers, i0.buffers);
    assert.equal(i1.pipelines, i0.pipelines);
    assert.equal(i1.bindGroups, i0.bindGroups);
    assert.equal((cnt.dispatches - before.dispatches) / 10, i1.stepDispatches + 2, 'the graph + top-k pass 1 + the sampling pass');
    assert.equal(cnt.bytesRead - before.bytesRead, 10 * 4, 'each sampled step reads back the token id only');
  } finally {
    g.free();
    c.free();
  }
});

test('tune: an override changes the variant the plan uses; bad overrides are refused with a message', { skip: skip || noStories }, async () => {
  const bytes = readFileSync(stories);
  const def = await GpuModel.open(M, bytesSource(bytes), { nCtx: 64 });
  const v0 = def.variants();
  const id0 = await def.decode([1, 403, 407, 261, 378]);
  def.free();
  assert.match(v0.matvec.f32, /^wg(64|128) rows4 /, JSON.stringify(v0)); // the measured default (gpu-tune.c: 64 on CPU adapters)
  // JSON text (as web/tune.mjs prints), and per-key settings
  for (const [tune, want] of [
    ['{"matvec": {"f32": {"wg": 32, "rows": 2}}}', /^wg32 rows2 /],
    [{ 'matvec.f32.wg': 32, 'matvec.*.rows': 2 }, /^wg32 rows2 /],
    [{ 'matvec.*.stage': 64 }, /^wg(64|128) rows4 .* stage 64 /], // the staged weight tile (matvec.wgsl STAGE)
  ]) {
    const g = await GpuModel.open(M, bytesSource(bytes), { nCtx: 64, tune });
    try {
      const v = g.variants();
      console.log(`# tune ${JSON.stringify(tune)}: matvec f32 ${v0.matvec.f32} -> ${v.matvec.f32}`);
      assert.match(v.matvec.f32, want);
      assert.equal(await g.decode([1, 403, 407, 261, 378]), id0, 'same greedy token with the overridden variant');
    } finally {
      g.free();
    }
  }
  for (const [tune, msg] of [
    ['{"matvec": {"f32": {"wg": 48}}}', /power of two|wg/],
    ['{"matvec": {"f32": {"wg": 32}', /tune/],
    ['{"matvec": {"nosuch": {"wg": 32}}}', /nosuch|format/],
    [{ 'matvec.f32.nosuch': 1 }, /nosuch|key/],
    ['not json', /tune/],
  ]) {
    const counters = { ...M.lwGpu.counters };
    await assert.rejects(GpuModel.open(M, bytesSource(bytes), { nCtx: 64, tune }), (e) => {
      console.log(`# refused ${JSON.stringify(tune)}: ${e.message}`);
      return /^tune/.test(e.message) && msg.test(e.message);
    });
    assert.equal(M.lwGpu.counters.buffers, counters.buffers, 'nothing was created for a refused tune');
  }
});

test('web/cli.mjs run: sampling options reproduce a run (and the native CPU run), --temp 0 is greedy, --tune reaches the plan', { skip: skip || noStories }, () => {
  const cli = path.join(repoRoot(), 'web/cli.mjs');
  const env = { ...process.env };
  const runCli = (...args) => spawnSync(process.execPath, [cli, 'run', '-m', stories, '-p', 'Once upon a time', ...args],
    { env, encoding: 'utf8', timeout: 120000 });
  const a = runCli('-n', '16', '--seed', '11', '--top-k', '20');
  const b = runCli('-n', '16', '--seed', '11', '--top-k', '20', '--tune', '{"matvec": {"*": {"wg": 32}}}');
  assert.equal(a.status, 0, a.stderr);
  assert.equal(b.status, 0, b.stderr);
  console.log(`# cli seed 11: ${a.stdout.trim()}`);
  assert.equal(b.stdout, a.stdout, 'same seed, same text (the tune override changes the kernel, not the numbers)');
  assert.match(a.stderr, /sampling on the GPU: temp 0.8, top-k 20, top-p 0.95, min-p 0.05, seed 11/);
  assert.match(b.stderr, /tune: .*"f32":"wg32 /);
  const g = runCli('-n', '12', '--temp', '0');
  assert.equal(g.status, 0, g.stderr);
  assert.match(g.stdout, /^Once upon a time, there was a little girl named Lily/);
  assert.match(g.stderr, /greedy \(GPU argmax\)/, '--temp 0 takes the argmax, not the sampler with temperature 0');
  // the native engine (CPU, lw_sampler) with the same seed and options writes the same text: the same chain
  // and generator on logits that agree to float rounding (skipped without a native build)
  const native = [process.env.LW_CLI, ...['build/release', 'build'].map((d) => path.join(repoRoot(), d, 'llamaweb'))]
    .find((p) => p && existsSync(p));
  if (native) {
    const n = spawnSync(native, ['run', '-m', stories, '-p', 'Once upon a time', '-n', '16', '--seed', '11', '--top-k', '20'],
      { encoding: 'utf8', timeout: 60000 });
    assert.equal(n.status, 0, n.stderr);
    assert.equal(n.stdout.split('\n')[0].trim(), a.stdout.trim(), 'native llamaweb run (CPU sampler) vs web/cli.mjs run (GPU)');
  } else {
    console.log('# no native llamaweb (LW_CLI): the CPU vs GPU text comparison is skipped');
  }
  const bad = runCli('--tune', '{"matvec": 1}');
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /llamaweb \(web\): tune JSON: expected '\{' at byte 11/);
  const badTemp = runCli('--temp', 'hot');
  assert.equal(badTemp.status, 2);
  assert.match(badTemp.stderr, /--temp/);
});

after(() => {
  if (h) M._lw_wasm_sample_free(h);
  setTimeout(() => process.exit(process.exitCode ?? 0), 100);
});
