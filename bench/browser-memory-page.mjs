// The page of bench/browser-memory.mjs (headless Chromium): one engine opens one model from the File the
// driver put into the page's <input type=file> (a file on disk, read on demand: no copy in the page) or from a
// URL (llamaweb: through the OPFS model cache, one network pass), generates a few greedy tokens, and reports
// what it measured itself (load time, the package's memory() or wllama's heap). The driver samples the
// processes' memory from outside while this runs.
//   globalThis.benchRun({engine: 'llamaweb' | 'wllama', source: 'file' | 'url', url, where: 'worker' | 'page',
//                        prompt, gen, device, verify}) -> {loadMs, text, tokens, memory, phases, uploadCheck, error}
globalThis.benchState = { phase: 'idle' }; // read by the driver between its samples

async function llamaweb(spec, out) {
  const { Llamaweb } = await import('/web/llamaweb.mjs');
  const opts = { wasmBase: '/wasm/', device: spec.device || 'webgpu', threads: 1 };
  const lw = spec.where === 'page' ? await Llamaweb.load(opts) : await Llamaweb.loadInWorker(opts);
  const what = spec.source === 'url' ? spec.url : document.querySelector('input').files[0];
  const phases = {};
  const t0 = performance.now();
  benchState.phase = 'load';
  const m = await lw.open(what, {
    nCtx: 512, device: spec.device || 'webgpu', verifyUpload: !!spec.verify,
    onProgress: (done, total, phase) => {
      if (!phases[phase]) phases[phase] = { firstMs: performance.now() - t0 };
      phases[phase].lastMs = performance.now() - t0;
      phases[phase].done = done, phases[phase].total = total;
      benchState.phase = 'load:' + phase;
    },
  });
  out.loadMs = performance.now() - t0;
  out.phases = phases;
  out.uploadCheck = m.uploadCheck || null;
  out.memoryAfterLoad = await m.memory();
  benchState.phase = 'loaded';
  await new Promise((r) => { benchState.resume = r; }); // the driver samples the loaded state, then resumes
  benchState.phase = 'generate';
  const tokens = [];
  const t1 = performance.now();
  const r = spec.gen > 0 ? await m.generate(spec.prompt, { maxTokens: spec.gen, onToken: (text, id) => { if (id >= 0) tokens.push(id); } }) : { text: '' };
  out.genMs = performance.now() - t1;
  out.text = r.text;
  out.tokens = tokens;
  out.memory = await m.memory();
  out.lwMemory = await lw.memory();
}

async function wllama(spec, out) {
  const { Wllama } = await import('/wllama/index.js');
  const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true });
  const t0 = performance.now();
  benchState.phase = 'load';
  if (spec.source === 'url') await w.loadModelFromUrl(spec.url, { n_ctx: 512, n_threads: 1, n_gpu_layers: 0 });
  else await w.loadModel([document.querySelector('input').files[0]], { n_ctx: 512, n_threads: 1, n_gpu_layers: 0 });
  out.loadMs = performance.now() - t0;
  benchState.phase = 'loaded';
  await new Promise((r) => { benchState.resume = r; });
  benchState.phase = 'generate';
  const t1 = performance.now();
  const r = await w.createCompletion({ prompt: spec.prompt, max_tokens: spec.gen, temperature: 0 });
  out.genMs = performance.now() - t1;
  out.text = typeof r === 'string' ? r : r && r.text;
  await w.exit();
}

globalThis.benchRun = async (spec) => {
  const out = { error: null };
  try {
    if (spec.engine === 'wllama') await wllama(spec, out);
    else await llamaweb(spec, out);
  } catch (e) {
    out.error = `${e && e.code ? e.code + ': ' : ''}${e && e.message || e}`;
  }
  benchState.phase = 'done';
  return out;
};
