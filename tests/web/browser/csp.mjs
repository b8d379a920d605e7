// The page of tests/web/csp.test.mjs: the browser package's CPU engine on the page's thread and in its worker
// under the server's Content-Security-Policy (no 'unsafe-eval'). Greedy stories260K on both; every CSP
// violation the page sees (the worker's own are reported by the worker's failure); the result in
// window.lwCsp for the test to read.
//   ?n=N          tokens to generate
import { Llamaweb } from '/web/llamaweb.mjs';

const q = new URLSearchParams(location.search);
const N = Number(q.get('n') || 16), wasmBase = '/wasm/';
const violations = [];
document.addEventListener('securitypolicyviolation', (e) => violations.push(`${e.violatedDirective}: ${e.blockedURI}`));

async function stories(lw) {
  const m = await lw.open('/models/stories260K.gguf', { nCtx: 128 });
  const r = await m.generate('Once upon a time', { maxTokens: N });
  const s = { device: m.device, build: m.build, threads: m.info.threads, tokens: r.tokens, text: r.text };
  m.free();
  return s;
}

async function where(f) {
  try {
    return await f();
  } catch (e) {
    return { error: String(e && e.message || e), code: e && e.code || null };
  }
}

const out = { coi: globalThis.crossOriginIsolated === true, violations };
out.page = await where(async () => stories(await Llamaweb.load({ wasmBase, device: 'cpu', threads: out.coi ? 2 : 1 })));
out.worker = await where(async () => {
  const w = await Llamaweb.loadInWorker({ wasmBase, device: 'cpu', threads: out.coi ? 2 : 1 });
  try {
    return await stories(w);
  } finally {
    w.terminate();
  }
});
window.lwCsp = out;
