// The page of bench/wasm-cpu-compare.mjs (headless Chromium, cross-origin isolated): one engine, one model,
// one thread count per load; prefill and decode timed the same way for both engines; POSTs to /result.
//   ?engine=llamaweb|wllama|webgpu &model=/models/NAME &threads=N &prompt=TEXT &gen=N &where=page|worker
// llamaweb: the package's CPU engine (wasm/, or wasm/mt/ for threads > 1); webgpu: the package on this
// browser's adapter; wllama: @wllama/wllama at /wllama/ (its own CPU build; n_gpu_layers 0; it always
// computes in its own worker). where=worker runs this script for llamaweb/webgpu in a module Worker, as
// wllama does: there the engine's first thread can sleep at the barriers (Atomics.wait), which the page's
// main thread cannot (it spins).
// Both read the same Blob (fetched once) so no download or cache path is timed.
const q = new URLSearchParams(location.search);
const engine = q.get('engine'), threads = Number(q.get('threads') || 1), gen = Number(q.get('gen') || 32);
const prompt = q.get('prompt');
const where = q.get('where') === 'worker' && engine !== 'wllama' ? 'worker' : 'page';
const out = { engine, threads, where, coi: globalThis.crossOriginIsolated === true, error: null };

async function llamaweb(blob, device) {
  const { Llamaweb } = await import('/web/llamaweb.mjs');
  const lw = await Llamaweb.load({ wasmBase: '/wasm/', device: device === 'cpu' ? 'cpu' : 'webgpu', threads });
  let t0 = performance.now();
  const m = await lw.open(blob, { nCtx: 512, threads, device });
  out.loadMs = performance.now() - t0;
  out.build = m.build;
  out.threadsRun = m.info.threads;
  const e = m.engine; // timed at the engine: no end-of-generation stop (random weights emit EOS at times)
  const ids = e.tokenize(prompt, true);
  out.promptTokens = ids.length;
  await e.decode(ids.slice(0, 8), 'argmax'); // warm-up (GPU pipelines, first-touch pages)
  e.nPast = 0;
  t0 = performance.now();
  let next = await e.decode(ids, 'argmax');
  out.prefillMs = performance.now() - t0;
  t0 = performance.now();
  for (let i = 0; i < gen; i++) next = await e.decode([next], 'argmax');
  out.decodeMs = performance.now() - t0;
  out.genTokens = gen;
  m.free();
}

async function wllama(blob) {
  const { Wllama } = await import('/wllama/index.js');
  const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true });
  let t0 = performance.now();
  await w.loadModel([blob], { n_ctx: 512, n_batch: 512, n_threads: threads, n_gpu_layers: 0 });
  out.loadMs = performance.now() - t0;
  out.threadsRun = threads;
  await w.createCompletion({ prompt: 'Once upon', max_tokens: 2, temperature: 0, ignore_eos: true }); // warm-up
  t0 = performance.now();
  const r = await w.createCompletion({ prompt, max_tokens: gen, temperature: 0, ignore_eos: true, cache_prompt: false });
  out.totalMs = performance.now() - t0;
  const t = r.timings || {};
  out.promptTokens = t.prompt_n;
  out.prefillMs = t.prompt_ms;
  out.genTokens = t.predicted_n;
  out.decodeMs = t.predicted_ms;
  await w.exit();
}

async function run() {
  try {
    const blob = await (await fetch(q.get('model'))).blob();
    if (engine === 'wllama') await wllama(blob);
    else await llamaweb(blob, engine === 'webgpu' ? 'webgpu' : 'cpu');
  } catch (e) {
    out.error = String(e && e.stack || e);
  }
  await fetch('/result', { method: 'POST', body: JSON.stringify(out) });
}

if (where === 'worker' && typeof document !== 'undefined') {
  // the page only starts the worker (kept referenced); the worker (this script again) posts the result
  globalThis.benchWorker = new Worker(new URL(import.meta.url).pathname + location.search, { type: 'module' });
  globalThis.benchWorker.onerror = (ev) => {
    out.error = 'bench worker: ' + (ev.message || 'failed to start');
    fetch('/result', { method: 'POST', body: JSON.stringify(out) });
  };
} else {
  await run();
}
