// Where the time of a WebGPU decode step goes (`node web/cli.mjs profile`): three passes over the same
// greedy decode (prompt of nPrompt tokens, then nGen one-token steps, each from an empty KV cache):
//   A. plain: wall time per token, split into the synchronous call into C (recording: C + the JS glue +
//      Dawn's encoding, and the submits) and the rest (waiting for the GPU and the 4-byte read-back);
//   B. the glue's CPU profile (lwGpu.profileStart({gpu: false})): the JS time of recording each dispatch,
//      the kernel (pipeline label = variant key) it ran; the JS time of submits and buffer writes;
//   C. with timestamp-query: every dispatch in its own compute pass with timestamps (lwGpu.profileStart
//      ({gpu: true})): GPU time per dispatch, their sum, and the span from the first start to the last end.
// Separate passes, because per-dispatch passes and timers change what they measure (B and C cost some
// wall time of their own; only A's wall time is the real one). The three passes decode the same tokens;
// the result carries each pass's token ids so callers (tests) can check that profiling changed nothing.
// Dawn quantizes timestamps (to 65.5 us or more) unless the device is made with the toggle in
// PROFILE_GPU_ARGS (setup(PROFILE_GPU_ARGS) in lw-node.mjs); the report says so when they look quantized.

// Dawn for Node instance flags for exact timestamps.
export const PROFILE_GPU_ARGS = ['disable-dawn-features=timestamp_quantization'];

// The fixed pseudo-random prompt of `bench` (as llama-bench's): n ids below nVocab.
export function benchIds(n, nVocab) {
  let s = 12345;
  return Array.from({ length: n }, () => (s = (s * 1103515245 + 12345) >>> 0) % nVocab);
}

// Per-label totals of one profileRead() record list into map (label -> {calls, cpuMs, gpuNs}).
function addRecords(map, r) {
  for (let i = 0; i < r.labels.length; i++) {
    const l = r.labels[i];
    let e = map.get(l);
    if (!e) map.set(l, (e = { calls: 0, cpuMs: 0, gpuNs: 0 }));
    e.calls++;
    e.cpuMs += r.cpuMs[i];
    if (i < r.timed) e.gpuNs += r.endNs[i] - r.beginNs[i];
  }
}

// Runs passes A-C on an open GpuModel m of module M. Returns {nPrompt, nGen, timestamps, quantized,
// tokens: {plain, cpu, gpu}, wall: {ppMs, tgMsPerToken, syncMsPerToken}, cpu: {dispatchMsPerToken,
// submitMsPerToken, writeMsPerToken, wallMsPerToken}, gpu: {sumUsPerToken, spanUsPerToken, untimed, ppSumMs,
// ppSpanMs}, rows: [{label, calls, cpuUs, gpuUs, share}] per token (sorted by GPU then CPU time), ppRows:
// the same per prompt (GPU only), dispatchesPerToken}.
export async function profile(M, m, { nPrompt = 512, nGen = 32 } = {}) {
  const g = M.lwGpu;
  const ids = benchIds(Math.max(nPrompt, 1), m.info().n_vocab);
  let decodeC = null, syncMs = 0;
  const timedDecode = (...a) => {
    const t0 = performance.now();
    const st = decodeC(...a);
    syncMs += performance.now() - t0;
    return st;
  };
  // one pass: the prompt, then nGen greedy tokens; hook(phase) after each decode ('prompt' / 'token')
  async function pass(hook) {
    m.nPast = 0;
    const toks = [];
    let t0 = performance.now();
    let next = await m.decode(ids);
    const ppMs = performance.now() - t0;
    if (hook) await hook('prompt');
    syncMs = 0;
    let wall = 0;
    for (let i = 0; i < nGen; i++) {
      toks.push(next);
      t0 = performance.now();
      next = await m.decode([next]);
      wall += performance.now() - t0;
      if (hook) await hook('token');
    }
    toks.push(next);
    return { toks, ppMs, wall, sync: syncMs };
  }

  const res = { nPrompt: ids.length, nGen, tokens: {}, rows: [], ppRows: [] };
  await pass(); // warm-up: first-use costs (staging buffers, driver caches)
  // (after a first call: Emscripten's export trampoline replaces itself then, which would drop the wrapper)
  decodeC = M._lw_wasm_model_decode;
  M._lw_wasm_model_decode = timedDecode;
  let a;
  try {
    a = await pass();
  } finally {
    M._lw_wasm_model_decode = decodeC;
  }
  res.tokens.plain = a.toks;
  res.wall = { ppMs: a.ppMs, tgMsPerToken: a.wall / nGen, syncMsPerToken: a.sync / nGen };

  // B: JS recording time per dispatch
  const per = new Map();
  let submitMs = 0, writeMs = 0, dispatches = 0;
  g.profileStart({ gpu: false });
  try {
    const b = await pass(async (ph) => {
      const r = await g.profileRead();
      if (ph !== 'token') return;
      addRecords(per, r);
      submitMs += r.submitMs;
      writeMs += r.writeMs;
      dispatches += r.labels.length;
    });
    res.tokens.cpu = b.toks;
    res.cpu = { dispatchMsPerToken: 0, submitMsPerToken: submitMs / nGen, writeMsPerToken: writeMs / nGen, wallMsPerToken: b.wall / nGen };
  } finally {
    g.profileStop();
  }
  for (const e of per.values()) res.cpu.dispatchMsPerToken += e.cpuMs / nGen;
  res.dispatchesPerToken = dispatches / nGen;

  // C: GPU time per dispatch
  res.timestamps = g.profileStart({ gpu: true });
  const pp = new Map(), gper = new Map();
  let sumNs = 0, spanNs = 0, untimed = 0, ppSpanNs = 0;
  const durations = [];
  try {
    if (res.timestamps) {
      const c = await pass(async (ph) => {
        const r = await g.profileRead();
        untimed += r.labels.length - r.timed;
        let span = 0;
        for (let i = 0; i < r.timed; i++) {
          durations.push(r.endNs[i] - r.beginNs[i]);
          span = Math.max(span, r.endNs[i]);
        }
        if (ph === 'prompt') {
          addRecords(pp, r);
          ppSpanNs = span;
          return;
        }
        addRecords(gper, r); // (its CPU times are disturbed by the timers: B's are used)
        for (let i = 0; i < r.timed; i++) sumNs += r.endNs[i] - r.beginNs[i];
        spanNs += span;
      });
      res.tokens.gpu = c.toks;
    }
  } finally {
    g.profileStop();
  }
  // quantized timestamps (Dawn's timestamp_quantization): every duration a multiple of 2^16 ns
  res.quantized = durations.length > 0 && durations.every((d) => d % 65536 === 0);
  let ppSum = 0;
  for (const e of pp.values()) ppSum += e.gpuNs;
  res.gpu = { sumUsPerToken: sumNs / nGen / 1e3, spanUsPerToken: spanNs / nGen / 1e3, untimed, ppSumMs: ppSum / 1e6, ppSpanMs: ppSpanNs / 1e6 };
  // rows: calls and JS times from B, GPU times from C (the same labels: the same plan)
  const rows = (cpu, gpu, n, total) => [...new Set([...cpu.keys(), ...gpu.keys()])].map((label) => {
    const c = cpu.get(label), gn = gpu.has(label) ? gpu.get(label).gpuNs : 0;
    return { label, calls: (c || gpu.get(label)).calls / n, cpuUs: c ? (c.cpuMs * 1e3) / n : 0, gpuUs: gn / n / 1e3,
      share: total > 0 ? gn / total : 0 };
  }).sort((x, y) => y.gpuUs - x.gpuUs || y.cpuUs - x.cpuUs);
  res.rows = rows(per, gper, nGen, sumNs);
  res.ppRows = rows(new Map(), pp, 1, ppSum);
  return res;
}

// The report as text lines (markdown tables).
export function formatProfile(r) {
  const f = (v, d = 1) => v.toFixed(d);
  const L = [];
  L.push(`decode: ${r.nGen} tokens after a ${r.nPrompt}-token prompt, ${f(r.dispatchesPerToken, 0)} dispatches per token`);
  L.push(`wall ${f(r.wall.tgMsPerToken * 1e3, 0)} us/token (${f(1e3 / r.wall.tgMsPerToken)} t/s): in the call into C (record + submit) ` +
    `${f(r.wall.syncMsPerToken * 1e3, 0)} us, waiting for the GPU + read-back ${f((r.wall.tgMsPerToken - r.wall.syncMsPerToken) * 1e3, 0)} us`);
  L.push(`JS glue (CPU profile pass, wall ${f(r.cpu.wallMsPerToken * 1e3, 0)} us/token): dispatch calls ${f(r.cpu.dispatchMsPerToken * 1e3, 0)} us/token ` +
    `(${f(r.cpu.dispatchMsPerToken * 1e3 / r.dispatchesPerToken, 2)} us each), submits ${f(r.cpu.submitMsPerToken * 1e3, 0)} us, ` +
    `buffer writes ${f(r.cpu.writeMsPerToken * 1e3, 0)} us`);
  if (!r.timestamps) {
    L.push('GPU times: the device has no timestamp-query (only the CPU side is shown)');
  } else {
    L.push(`GPU: kernels ${f(r.gpu.sumUsPerToken, 0)} us/token (sum of per-dispatch times), first start to last end ` +
      `${f(r.gpu.spanUsPerToken, 0)} us; wall - kernels = ${f(r.wall.tgMsPerToken * 1e3 - r.gpu.sumUsPerToken, 0)} us/token outside kernels` +
      (r.gpu.untimed ? `; ${r.gpu.untimed} dispatches untimed (query set full)` : ''));
    if (r.quantized) L.push('WARNING: timestamps look quantized (2^16 ns steps): make the device with PROFILE_GPU_ARGS');
  }
  L.push('');
  L.push('| kernel (variant) | calls/token | GPU us/token | GPU us/call | share | JS us/token |');
  L.push('|---|---|---|---|---|---|');
  for (const w of r.rows) {
    L.push(`| ${w.label} | ${f(w.calls, w.calls % 1 ? 2 : 0)} | ${r.timestamps ? f(w.gpuUs) : '-'} | ` +
      `${r.timestamps ? f(w.gpuUs / w.calls, 2) : '-'} | ${r.timestamps ? f(w.share * 100) + ' %' : '-'} | ${f(w.cpuUs)} |`);
  }
  if (r.timestamps && r.ppRows.length) {
    L.push('');
    L.push(`prompt (${r.nPrompt} tokens): wall ${f(r.wall.ppMs)} ms (${f(r.nPrompt / r.wall.ppMs * 1e3)} t/s), ` +
      `kernels ${f(r.gpu.ppSumMs, 2)} ms, span ${f(r.gpu.ppSpanMs, 2)} ms`);
    L.push('| kernel (variant) | calls | GPU ms | share |');
    L.push('|---|---|---|---|');
    for (const w of r.ppRows) L.push(`| ${w.label} | ${w.calls} | ${f(w.gpuUs / 1e3, 3)} | ${f(w.share * 100)} % |`);
  }
  return L;
}
