// open(url) through the model cache in headless Chromium, from a local server (tests/web/fault-server.mjs,
// the file in memory): where the time goes and what a cold open reads. Prints one line each for
//   fetch            the body read and dropped (the network alone)
//   cacheModel       the whole-file download into OPFS (3 range requests at once), no engine
//   cacheStream      the one-pass stream with a reader of 8 MiB chunks, 4 at once (as the GPU glue reads)
//   open, streamed   open(url) on a cold cache (the default): one network pass into OPFS and the engine
//   open, stream off open(url, {stream: false}) on a cold cache: download whole, then read back from OPFS
//   open, cache hit  open(url) again
// with seconds, requests, network / memory / read-back bytes, bytes held, and Chromium's summed PSS (peak
// during the call, over the browser's before it; the CPU engine's heap stays allocated after the first).
// Run: LW_WASM_DIR=... node tests/web/bench-stream.mjs FILE.gguf [--device cpu|webgpu] [--runs N]
//      (a file: llamaweb synth --preset llama-3.2-1b --type q4_0 --vocab builtin -o /tmp/l1b.gguf)
import { readFileSync, readdirSync } from 'node:fs';
import { faultServer, openTestPage, browserTestEnv } from './fault-server.mjs';

const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(k); return i >= 0 ? args[i + 1] : d; };
const file = args.find((a, i) => !a.startsWith('--') && !(i > 0 && args[i - 1].startsWith('--')));
if (!file) { console.error('usage: node tests/web/bench-stream.mjs FILE.gguf [--device cpu|webgpu] [--runs N]'); process.exit(2); }
const device = opt('--device', 'cpu'), runs = Number(opt('--runs', 1));
const { wasmDir, skip } = browserTestEnv();
if (skip) process.exit(0);

const srvm = faultServer();
srvm.addFile('m.gguf', new Uint8Array(readFileSync(file)));
const PAGE = `<!doctype html><meta charset="utf-8"><script type="module">
import * as lw from '/llamaweb.mjs';
import * as cache from '/lw-cache.mjs';
const URL_ = '/m/m.gguf', C = 8 << 20;
const timed = async (f) => { const t0 = performance.now(); const r = await f(); return { s: (performance.now() - t0) / 1000, ...r }; };
window.b = {
  fetch: () => timed(async () => { const rd = (await fetch(URL_, { cache: 'no-store' })).body.getReader(); for (;;) if ((await rd.read()).done) return {}; }),
  cacheModel: async () => { await lw.deleteCached(URL_); return timed(async () => { await cache.cacheModel(URL_); return {}; }); },
  cacheStream: async () => {
    await lw.deleteCached(URL_);
    return timed(async () => {
      const h = await cache.cacheStream([URL_]), src = h.sources[0];
      let next = 0;
      await Promise.all(Array.from({ length: 4 }, async () => { while (next * C < src.size) { const i = next++; await src.read(i * C, Math.min(C, src.size - i * C)); } }));
      h.release();
      await h.done;
      return { download: h.stats() };
    });
  },
  open: async (opts, cold) => {
    if (cold) await lw.deleteCached(URL_);
    window.L = window.L || await lw.Llamaweb.load({ wasmBase: '/wasm/', device: '${device}' });
    return timed(async () => {
      const m = await L.open(URL_, { nCtx: 64, device: '${device}', ...opts });
      const r = { download: m.download, memory: m.memory() };
      m.free();
      return r;
    });
  },
};
window.ready = true;
</script>`;

const T = await openTestPage(srvm, wasmDir, 'bench-stream.html', PAGE);

// Chromium's processes: the process group of the browser process (ours: its profile, no --type)
function pssMiB() {
  const procs = [];
  let group = null;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      const pgrp = readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1].split(' ')[2];
      procs.push({ pid: d, pgrp });
      if (cmd.includes(T.browser.profile) && !cmd.includes('--type=')) group = pgrp;
    } catch { /* gone */ }
  }
  let kb = 0;
  for (const p of procs) {
    if (p.pgrp !== group) continue;
    try { kb += Number(/Pss:\s+(\d+)/.exec(readFileSync(`/proc/${p.pid}/smaps_rollup`, 'utf8'))[1]); } catch { /* gone */ }
  }
  return kb / 1024;
}

const mib = (n) => (n / 1048576).toFixed(1);
const size = srvm.files.get('m.gguf').size;
console.log(`${file}: ${mib(size)} MiB; device ${device}`);
const cases = [['fetch', 'b.fetch()'], ['cacheModel', 'b.cacheModel()'], ['cacheStream', 'b.cacheStream()'],
  ['open, streamed', 'b.open({}, true)'], ['open, stream off', 'b.open({ stream: false }, true)'], ['open, cache hit', 'b.open({}, false)']];
for (let run = 0; run < runs; run++) {
  for (const [name, expr] of cases) {
    await new Promise((r) => setTimeout(r, 1000));
    const idle = pssMiB();
    let peak = idle;
    const timer = setInterval(() => { peak = Math.max(peak, pssMiB()); }, 100);
    const n = srvm.log.length;
    const r = await T.page.evaluate(expr);
    clearInterval(timer);
    const d = r.download;
    console.log(`${name.padEnd(17)} ${r.s.toFixed(2).padStart(7)} s  ${String(srvm.log.length - n).padStart(2)} requests  ` +
      (d ? `network ${mib(d.network)}, memory ${mib(d.memory)}, read back ${mib(d.cache)}, held at most ${mib(d.peakHeld)} MiB  ` : '') +
      `PSS ${idle.toFixed(0)} -> peak ${peak.toFixed(0)} MiB` + (r.memory ? `; wasm heap ${mib(r.memory.wasmHeap)} MiB` : ''));
  }
}
await T.close();
