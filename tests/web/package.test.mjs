// The browser package (web/llamaweb.mjs) and its server (web/serve.mjs) under Node + Dawn: the same code a
// page runs, minus the script loader (Node's fetch and Blob serve the URL and File paths). Checks that:
//  - a Blob opens with the header served from a prefetched head that grows when the header is longer
//    (llama-2-tiny-random: 32000-token vocab > the first 256 KiB; stories260K from a 4 KiB first head) and
//    never covers the whole file;
//  - Model.generate streams one onToken per token, its greedy ids equal GpuModel's own decode loop on the
//    same file (web/lw-model.mjs, fileSource), and stories260K's text is llama.cpp's; the vocabulary read
//    through a grown head tokenizes llama.cpp's llama-spm test vectors as llama.cpp does;
//  - stop(), maxTokens and a full context end a generation with the right reason; keepContext continues;
//    stream() iterates; sampling (where the build has it) repeats for one seed and is greedy at temperature 0;
//  - a URL is read by HTTP range requests from web/serve.mjs, in chunks no larger than the glue's;
//  - chat: a model with phi-3's vocabulary and template (written by the native CLI) renders a conversation
//    and tokenizes it with control tokens as llama.cpp does;
//  - the server: ranges (a-b, a-, -n), 416 past the end, no escape from its folders, COOP/COEP headers;
//  - a server without range support and a corrupt file give errors, and the module still works after; a
//    206 without Content-Range takes the size from HEAD.
// Run: LW_WASM_DIR=... VK_ICD_FILENAMES=... node --test tests/web/package.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { GpuModel, fileSource } from '../../web/lw-model.mjs';
import { Llamaweb, urlSource } from '../../web/llamaweb.mjs';
import { startServer } from '../../web/serve.mjs';

const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const tiny = path.join(shared, 'models/llama-2-tiny-random.gguf');
const ctx = await setup();
const skip = ctx.skip || (!existsSync(stories) || !existsSync(tiny) ? `no ${stories} / ${tiny} (the shared test models)` : false);
if (skip) console.log('SKIP: ' + skip);
const lw = skip ? null : new Llamaweb(ctx.Module, ctx.device);
let storiesModel = null; // stories260K opened from a Blob with 24 KV cells, shared by the tests below
after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100)); // Dawn keeps the process alive (web/lw-node.mjs)

// Greedy ids straight from GpuModel over a Node file: the path the other model tests hold to the CPU engine.
async function referenceIds(file, prompt, n) {
  const src = fileSource(file);
  const g = await GpuModel.open(ctx.Module, src, { nCtx: 24 });
  try {
    const out = [];
    let next = await g.decode(g.tokenize(prompt, true));
    while (out.length < n && !g.isEog(next)) {
      out.push(next);
      if (out.length < n) next = await g.decode([next]);
    }
    return out;
  } finally {
    g.free();
    src.close();
  }
}

// SwiftShader compiles llama-2-tiny-random's pipelines in ~15 s on 2 cores: there, only with LW_TEST_SLOW=1
// (the grown head is then checked on stories260K with a 4 KiB first head, and on lavapipe with the real vocab).
const slowDriver = /swiftshader/i.test(ctx.info && ctx.info.architecture || '') && process.env.LW_TEST_SLOW !== '1';

test('Blob source: header from a growing prefetched head; streamed greedy text equals GpuModel', { skip, timeout: 120000 }, async () => {
  const ref = await referenceIds(stories, 'Once upon a time', 12);
  const cases = [[stories, 'Once upon a time', 12, 0], [stories, 'Once upon a time', 4, 4096]];
  // few tokens: SwiftShader runs the 32000-row output of llama-2-tiny-random at ~1 token/s
  if (!slowDriver) cases.push([tiny, 'Hello world', 1, 0]);
  else console.log('# llama-2-tiny-random skipped on SwiftShader (its pipelines take ~15 s to compile; LW_TEST_SLOW=1 runs it)');
  for (const [file, prompt, n, headBytes] of cases) {
    const bytes = readFileSync(file);
    let progress = 0;
    const m = await lw.open(new Blob([bytes]), { nCtx: 24, headBytes, onProgress: (done, total) => { progress = done / total; } });
    const pieces = [];
    const r = await m.generate(prompt, { maxTokens: n, onToken: (text, id) => pieces.push([text, id]) });
    console.log(`# ${path.basename(file)} (${bytes.length} B): head ${m.headBytes} B in ${m.headTries} tries, load ` +
      `${m.loadMs.toFixed(0)} ms, ${r.tokens.length} tokens ${JSON.stringify(r.text)}, ${r.tokensPerSecond.toFixed(1)} tokens/s`);
    assert.equal(r.tokens.length, n);
    assert.equal(r.reason, 'length');
    assert.deepEqual(pieces.map((p) => p[1]), r.tokens, 'one onToken per token, in order');
    assert.equal(pieces.map((p) => p[0]).join(''), r.text);
    assert.equal(r.text, m.detokenize(r.tokens));
    assert.ok(m.headBytes < bytes.length, 'the header prefetch never held the whole file');
    assert.ok(progress > 0.5, `progress reported (${progress})`);
    if (file === stories) {
      assert.deepEqual(r.tokens, ref.slice(0, n), 'the same ids as GpuModel over a Node file');
      assert.equal(r.promptTokens, 5);
      if (headBytes) {
        assert.ok(m.headTries >= 2, 'a 4 KiB head is too short for the header');
        m.free();
      } else {
        assert.equal(m.headTries, 1);
        assert.ok(r.text.startsWith(', there was a little girl named Lily'), r.text);
        storiesModel = m;
      }
    } else {
      assert.ok(m.headTries >= 2, 'the 32000-token header needed a longer head');
      // the vocabulary read through the grown head tokenizes as llama.cpp (its Llama-2 SPM test vectors)
      const [inp, out] = ['inp', 'out'].map((e) => readFileSync(path.join(shared, `vocab/ggml-vocab-llama-spm.gguf.${e}`), 'utf8'));
      const texts = inp.replace(/\n__ggml_vocab_test__$/, '').split('\n__ggml_vocab_test__\n');
      const ids = out.split('\n');
      let same = 0;
      for (let i = 0; i < texts.length; i++) {
        if (m.tokenize(texts[i], false).join(' ') === ids[i].trim().split(/\s+/).filter(Boolean).join(' ')) same++;
      }
      console.log(`# llama-2-tiny-random vocabulary: ${same}/${texts.length} llama-spm vectors as llama.cpp`);
      assert.ok(texts.length > 20);
      assert.equal(same, texts.length);
      m.free();
    }
  }
});

test('generate ends on stop(), an AbortSignal, maxTokens and a full context; stream() as an async iterator', { skip, timeout: 60000 }, async () => {
  const m = storiesModel;
  assert.ok(m, 'opened by the first test');
  let seen = 0;
  let r = await m.generate('Once upon a time', { maxTokens: 100, onToken: () => { if (++seen === 3) m.stop(); } });
  assert.equal(r.reason, 'stopped');
  assert.equal(r.tokens.length, 3);
  const ac = new AbortController();
  r = await m.generate('Once upon a time', { maxTokens: 100, signal: ac.signal, onToken: () => ac.abort() });
  assert.equal(r.reason, 'stopped');
  assert.equal(r.tokens.length, 1);
  const long = 'Once upon a time, there was a little girl named Lily. She loved'; // 16 of the 24 cells
  r = await m.generate(long, { maxTokens: 100 });
  assert.equal(r.reason, 'context');
  assert.equal(r.promptTokens + r.tokens.length, 24 + 1); // the last token is produced, not decoded
  const again = await m.generate(long, { maxTokens: 4 });
  assert.deepEqual(again.tokens, r.tokens.slice(0, 4), 'a new generation starts from a fresh context');
  // keepContext: 3 tokens, then 3 more from where they stopped, equal 6 in one go; a prompt may follow too
  const a = await m.generate('Once upon a time', { maxTokens: 3 });
  const b = await m.generate('', { keepContext: true, maxTokens: 3 });
  const whole = await m.generate('Once upon a time', { maxTokens: 6 });
  assert.deepEqual([...a.tokens, ...b.tokens], whole.tokens);
  assert.equal(b.promptTokens, 1);
  const c = await m.generate(' She', { keepContext: true, maxTokens: 2 });
  assert.equal(c.promptTokens, 1 + m.tokenize(' She', false).length);
  await assert.rejects(m.generate(' and'.repeat(10), { keepContext: true }), /do not fit the context/);
  // the async iterator: the same pieces as generate's callbacks; leaving the loop stops the generation
  const pieces = [];
  for await (const text of m.stream('Once upon a time', { maxTokens: 4 })) pieces.push(text);
  const cb = [];
  await m.generate('Once upon a time', { maxTokens: 4, onToken: (t) => cb.push(t) });
  assert.deepEqual(pieces, cb);
  let taken = 0;
  for await (const text of m.stream('Once upon a time', { maxTokens: 50 })) { assert.equal(typeof text, 'string'); if (++taken === 2) break; }
  assert.equal(m.busy, false, 'the generation ended when the loop was left');
  assert.equal((await m.generate('Once upon a time', { maxTokens: 2 })).tokens.length, 2);
  const [first, second] = await Promise.allSettled([m.generate('a', { maxTokens: 2 }), m.generate('b', { maxTokens: 2 })]);
  assert.equal(first.status, 'fulfilled');
  assert.match(String(second.reason), /already running/);
});

test('sampling on the GPU: one seed gives one text; temperature 0 is greedy', { skip: skip || (!lw.canSample && 'this build cannot sample (no setSampling)'), timeout: 60000 }, async () => {
  const m = storiesModel;
  const greedy = await m.generate('Once upon a time', { maxTokens: 6 });
  const s = { temp: 1.0, topK: 40, topP: 0.95, minP: 0.05, seed: 1234 };
  const a = await m.generate('Once upon a time', { maxTokens: 6, sampling: s });
  const b = await m.generate('Once upon a time', { maxTokens: 6, sampling: s });
  const z = await m.generate('Once upon a time', { maxTokens: 6, sampling: { ...s, temp: 0 } });
  console.log(`# sampled (seed 1234): ${JSON.stringify(a.text)}; greedy: ${JSON.stringify(greedy.text)}`);
  assert.deepEqual(a.tokens, b.tokens, 'the same seed draws the same tokens');
  assert.deepEqual(z.tokens, greedy.tokens);
  assert.ok(a.tokens.every((id) => id >= 0 && id < 512));
});

// The native CLI writes a model with phi-3's vocabulary and chat template (llamaweb synth); without it the chat
// test skips.
const cli = [process.env.LW_CLI, ...['build/release', 'build', 'build-model', 'build-demo'].map((d) => path.join(repoRoot(), d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const phi3Vocab = path.join(shared, 'vocab/ggml-vocab-phi-3.gguf');
const chatSkip = skip || (!cli ? 'no native llamaweb CLI (scripts/build.sh) to write a chat model' :
  !existsSync(phi3Vocab) ? `no ${phi3Vocab}` :
    typeof ctx.Module._lw_wasm_chat_new !== 'function' ? 'this wasm build has no chat templates' :
      slowDriver ? 'SwiftShader: a phi-3-vocab model compiles its pipelines slowly (LW_TEST_SLOW=1 runs it)' : false);

test('chat: the GGUF chat template renders a conversation; control tokens as llama.cpp tokenizes them', { skip: chatSkip, timeout: 60000 }, async () => {
  assert.equal(storiesModel.chatTemplate, false);
  assert.throws(() => storiesModel.renderChat([{ role: 'user', content: 'x' }]), /no chat template/);
  const tmp = mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-chat-'));
  try {
    const file = path.join(tmp, 'tiny-phi3.gguf');
    execFileSync(cli, ['synth', '--preset', 'tiny-phi3', '--type', 'f32', '--vocab', phi3Vocab, '-o', file], { stdio: 'ignore' });
    const m = await lw.open(new Blob([readFileSync(file)]), { nCtx: 64 });
    assert.equal(m.chatTemplate, true, m.chatError);
    const msgs = [{ role: 'user', content: 'Hello' }];
    const text = m.renderChat(msgs);
    // phi-3's template (the one in the vocab file), rendered by hand for one user message
    assert.equal(text, '<s><|user|>\nHello<|end|>\n<|assistant|>\n');
    assert.equal(m.renderChat(msgs, false), '<s><|user|>\nHello<|end|>\n<|assistant|>\n'); // phi-3 writes the header per user turn
    // llama.cpp's ids for that text in this file (node-llama-cpp 3.21.1: model.tokenize(text, true), control
    // tokens parsed; general.name is "llamaweb synth", so llama.cpp's phi-3 rule that strips the newline after
    // a control token does not apply: 29871 13 stay)
    const want = [1, 32010, 29871, 13, 10994, 32007, 29871, 13, 32001, 29871, 13];
    assert.deepEqual(m.tokenizeSpecial(text), want);
    assert.ok(m.tokenize(text, false).length > want.length, 'without parsing, control texts are split into pieces');
    const r = await m.chat(msgs, { maxTokens: 3 });
    console.log(`# chat (random weights): ${r.promptTokens} prompt tokens, ${r.tokens.length} generated (${r.reason})`);
    assert.equal(r.promptTokens, want.length);
    assert.ok(r.reason === 'length' ? r.tokens.length === 3 : r.reason === 'eog', JSON.stringify(r));
    m.free();
    assert.throws(() => m.renderChat(msgs), /freed/);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

test('URL source over web/serve.mjs: range requests in bounded chunks; server ranges and headers', { skip, timeout: 60000 }, async () => {
  const ranges = [];
  const srv = await startServer({ port: 0, modelsDir: path.dirname(stories), log: (l) => ranges.push(l) });
  try {
    const base = `http://127.0.0.1:${srv.port}`;
    const m = await lw.open(`${base}/models/stories260K.gguf`, { nCtx: 24 });
    const r = await m.generate('Once upon a time', { maxTokens: 8 });
    m.free();
    const model = ranges.filter((l) => l.includes('/models/stories260K.gguf'));
    console.log(`# URL: ${JSON.stringify(r.text)} after ${model.length} range requests`);
    assert.ok(r.text.startsWith(', there was a little girl'), r.text);
    assert.ok(model.length >= 3 && model.every((l) => /bytes=\d+-\d+$/.test(l)), model.join('\n'));
    for (const l of model) {
      const [, a, b] = /bytes=(\d+)-(\d+)$/.exec(l).map(Number);
      assert.ok(b - a + 1 <= ctx.Module.lwGpu.chunkBytes, l);
    }
    // the server itself
    const size = readFileSync(stories).length;
    const get = (p, range) => fetch(base + p, { headers: range ? { Range: range } : {} });
    let res = await get('/models/stories260K.gguf', 'bytes=10-19');
    assert.equal(res.status, 206);
    assert.equal(res.headers.get('content-range'), `bytes 10-19/${size}`);
    assert.deepEqual(new Uint8Array(await res.arrayBuffer()), new Uint8Array(readFileSync(stories).subarray(10, 20)));
    res = await get('/models/stories260K.gguf', 'bytes=-4');
    assert.equal(res.headers.get('content-range'), `bytes ${size - 4}-${size - 1}/${size}`);
    assert.equal((await res.arrayBuffer()).byteLength, 4);
    res = await get('/models/stories260K.gguf', `bytes=${size - 2}-`);
    assert.equal((await res.arrayBuffer()).byteLength, 2);
    res = await get('/models/stories260K.gguf', `bytes=${size}-`);
    assert.equal(res.status, 416);
    await res.arrayBuffer();
    res = await get('/demo/');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cross-origin-opener-policy'), 'same-origin');
    assert.equal(res.headers.get('cross-origin-embedder-policy'), 'require-corp');
    assert.match(await res.text(), /<script type="module" src="demo.js">/);
    for (const p of ['/../package.json', '/%2e%2e/package.json', '/models/..%2fstories260K.gguf/../../../package.json', '/wasm/../lw-model.mjs']) {
      res = await get(p);
      const body = await res.text();
      assert.ok(res.status === 404 || !body.includes('"devDependencies"'), `${p}: ${res.status}`);
      if (p.startsWith('/%2e')) assert.equal(res.status, 404, p);
    }
    res = await get('/models/');
    assert.ok((await res.json()).some((f) => f.name === 'stories260K.gguf' && f.size === size));
  } finally {
    srv.server.close();
    srv.server.closeAllConnections();
  }
});

test('errors: a server without ranges, a corrupt file; the module works afterwards; free() while generating', { skip, timeout: 60000 }, async () => {
  const bytes = readFileSync(stories);
  // ignores Range: answers 200 with a 256 MiB body, which the client must not read
  let sent = 0;
  const closed = [];
  const plain = createServer(async (req, res) => {
    res.setHeader('Content-Length', 256 << 20);
    const chunk = Buffer.alloc(64 << 10);
    res.on('close', () => closed.push(sent));
    while (sent < 256 << 20 && !res.destroyed) {
      sent += chunk.length;
      if (!res.write(chunk)) await new Promise((r) => { res.once('drain', r); res.once('close', r); });
    }
    res.end();
  });
  await new Promise((r) => plain.listen(0, '127.0.0.1', r));
  try {
    await assert.rejects(urlSource(`http://127.0.0.1:${plain.address().port}/m.gguf`), /does not answer HTTP range requests/);
    const t0 = Date.now();
    while (!closed.length && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 20));
    console.log(`# server without ranges: the client dropped the 200 body after ${(closed[0] / 1048576).toFixed(1)} MiB of 256`);
    assert.ok(closed.length && closed[0] < 64 << 20, `the whole body was read (${closed[0]})`);
  } finally {
    plain.close();
    plain.closeAllConnections();
  }
  // 206 without Content-Range (a cross-origin server that does not expose it): the size comes from HEAD
  const hidden = createServer((req, res) => {
    const m = /bytes=(\d+)-(\d+)/.exec(req.headers.range || '');
    if (req.method === 'HEAD') { res.setHeader('Content-Length', bytes.length); res.end(); return; }
    if (!m) { res.end(bytes); return; }
    res.statusCode = 206;
    res.end(bytes.subarray(Number(m[1]), Number(m[2]) + 1));
  });
  await new Promise((r) => hidden.listen(0, '127.0.0.1', r));
  try {
    const src = await urlSource(`http://127.0.0.1:${hidden.address().port}/m.gguf`);
    assert.equal(src.size, bytes.length);
    assert.deepEqual(await src.read(100, 8), new Uint8Array(bytes.subarray(100, 108)));
  } finally {
    hidden.close();
    hidden.closeAllConnections();
  }
  const bad = new Uint8Array(bytes.subarray(0, 4096));
  bad.set([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]); // absurd tensor count
  await assert.rejects(lw.open(new Blob([bad])), (e) => { console.log(`# corrupt header: ${e.message}`); return e.message.length > 0; });
  await assert.rejects(lw.open(new Blob([bytes.subarray(0, 100000)])), (e) => { console.log(`# truncated file: ${e.message}`); return true; });
  await assert.rejects(lw.open(42), /expected a File\/Blob/);
  const m = storiesModel;
  const r = await m.generate('Once upon a time', { maxTokens: 4 });
  assert.ok(r.text.startsWith(', there was'), r.text);
  // free() during a generation stops it after the current token and releases the model when it ends
  const running = m.generate('Once upon a time', { maxTokens: 8 });
  m.free();
  const last = await running;
  assert.equal(last.reason, 'stopped');
  assert.equal(last.tokens.length, 1);
  assert.equal(m.gpu.h, 0, 'released');
  await assert.rejects(m.generate('x'), /freed/);
});
