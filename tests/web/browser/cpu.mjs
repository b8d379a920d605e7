// The page of tests/web/cpu-fallback.test.mjs: the browser package's CPU engine in headless Chromium, on the
// page's thread and in its worker, without a usable WebGPU; POSTs what it saw to /result.
//   ?nogpu=1   navigator.gpu hidden on the page (absent WebGPU; the worker is told so), else the browser's
//              own (launched without --enable-unsafe-webgpu: no adapter, so WebGPU fails)
//   ?errors=1  also the typed errors, page and worker
//   ?chat=NAME the synthetic ChatML model's file under /models/, for the OpenAI-shaped calls
import { Llamaweb } from '/web/llamaweb.mjs';

const q = new URLSearchParams(location.search);
if (q.get('nogpu') === '1') Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined, configurable: true });
const wasmBase = '/wasm/';
const N = Number(q.get('n') || 32), SYS = q.get('system') || 'Be brief.', USER = q.get('user') || 'Hello there';

// The code of what promise p rejects with ('resolved' when it does not).
async function codeOf(p) {
  try {
    await p;
    return 'resolved';
  } catch (e) {
    return e && e.code ? e.code : 'no code: ' + (e && e.message || e);
  }
}

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

// Greedy stories260K on an engine (a Llamaweb or its worker twin).
async function stories(lw) {
  const m = await lw.open('/models/stories260K.gguf', { nCtx: 128 });
  const r = await m.generate('Once upon a time', { maxTokens: N });
  const s = { device: m.device, build: m.build, threads: m.info.threads, threadsError: m.threadsError, tokens: r.tokens,
    text: r.text, tokensPerSecond: r.tokensPerSecond, loadMs: m.loadMs, headTries: m.headTries,
    // a worker model's tokenize/detokenize are promises; await takes either
    promptIds: await m.tokenize('Once upon a time'), detokenized: await m.detokenize(r.tokens) };
  m.free();
  return s;
}

// A chat completion, and the same streamed, on the synthetic ChatML model.
async function openai(lw) {
  const m = await lw.open('/models/' + q.get('chat'), { nCtx: 256 });
  const messages = [{ role: 'system', content: SYS }, { role: 'user', content: USER }];
  const r = await m.chat.completions.create({ messages, max_tokens: 12, temperature: 0 });
  const chunks = await collect(await m.chat.completions.create({ messages, max_tokens: 12, temperature: 0, stream: true }));
  const last = chunks[chunks.length - 1];
  const o = {
    device: m.device, content: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage, object: r.object,
    streamed: chunks.map((c) => c.choices[0].delta.content ?? '').join(''), firstRole: chunks[0].choices[0].delta.role,
    lastFinish: last.choices[0].finish_reason, lastUsage: last.usage, chunkObjects: [...new Set(chunks.map((c) => c.object))],
  };
  m.free();
  return o;
}

async function errors(lw, worker) {
  const e = {};
  const ac = new AbortController();
  ac.abort();
  e.gpuUnavailable = await codeOf(worker ? Llamaweb.loadInWorker({ wasmBase, device: 'webgpu' }).then((w) => w.terminate())
    : Llamaweb.load({ wasmBase, device: 'webgpu' }));
  const bad = new Uint8Array(4096);
  bad.set([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]); // absurd tensor count
  e.corrupt = await codeOf(lw.open(new Blob([bad])));
  e.missing = await codeOf(lw.open('/models/no-such-file.gguf'));
  e.abortedOpenBefore = await codeOf(lw.open('/models/stories260K.gguf', { signal: ac.signal }));
  const mid = new AbortController();
  const opening = lw.open('/models/stories260K.gguf', { signal: mid.signal, cache: false });
  mid.abort(); // while the open is under way
  e.abortedOpen = await codeOf(opening);
  const m = await lw.open('/models/' + q.get('chat'), { nCtx: 64 });
  e.badInput = await codeOf(m.chat.completions.create({ messages: [] }));
  e.badDevice = await codeOf(lw.open('/models/' + q.get('chat'), { device: 'tpu' }));
  e.abortedBefore = await codeOf(m.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], signal: ac.signal }));
  e.abortedGenerate = await codeOf(m.generate('x', { signal: ac.signal }));
  e.contextFull = await codeOf(m.completions.create({ prompt: ' a'.repeat(100), max_tokens: 1 })); // 100+ ids, 64 cells
  // an abort in the middle of a stream
  const live = new AbortController();
  e.abortedStream = await codeOf((async () => {
    for await (const c of await m.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], max_tokens: 40, stream: true, signal: live.signal })) {
      if (c) live.abort();
    }
  })());
  // the model still answers after all that
  e.afterwards = (await m.completions.create({ prompt: 'a', max_tokens: 2, temperature: 0 })).usage.completion_tokens;
  m.free();
  return e;
}

const out = { coi: globalThis.crossOriginIsolated === true, gpuExposed: !!navigator.gpu, error: null };
try {
  const lw = await Llamaweb.load({ wasmBase, threads: 2 });
  out.page = { preference: lw.preference, gpu: !!lw.device, gpuError: lw.gpuError, canSample: lw.canSample };
  out.page.stories = await stories(lw);
  const w = await Llamaweb.loadInWorker({ wasmBase, threads: 2 });
  out.worker = { preference: w.preference, gpu: !!w.adapter, gpuError: w.gpuError };
  out.worker.stories = await stories(w);
  if (q.get('chat')) {
    out.page.openai = await openai(lw);
    out.worker.openai = await openai(w);
  }
  if (q.get('errors') === '1') {
    out.page.errors = await errors(lw, false);
    out.worker.errors = await errors(w, true);
  }
  w.terminate();
} catch (e) {
  out.error = String(e && e.stack || e);
}
await fetch('/result', { method: 'POST', body: JSON.stringify(out) });
