// The OpenAI-shaped API of the browser package (web/lw-openai.mjs: model.chat.completions.create,
// model.completions.create) and its typed errors, under Node on the wasm build's CPU engine (always: no GPU
// needed) and on WebGPU (Node + Dawn, when a Vulkan driver is there). Checks:
//  - a synthetic ChatML model written by the native CLI (llamaweb synth; with ../shared's llama-spm vocabulary
//    when present, so replies are distinct words, else the built-in byte vocabulary): a greedy chat
//    completion equals the native C chat session's reply (`llamaweb chat`; CPU engine only: the GPU sums in
//    other orders); a second request repeating the exchange keeps the cached prompt cells
//    (usage.prompt_tokens_details.cached_tokens) and answers as it does with a cold cache and as a chat
//    session given the same messages; the OpenAI objects' shape and usage counts;
//  - stream: true gives chat.completion.chunk objects whose deltas join to the non-streaming content, the
//    role first, finish_reason and usage in the last; leaving the loop early stops the generation;
//  - stop strings: the content ends before the first one (streamed text never shows it), finish_reason stop;
//  - completions.create on stories260K: greedy text is the native CLI's (`llamaweb run --temp 0`), sampled
//    text is the native CLI's for the same parameters and seed (the same CPU sampler), and streaming equals it;
//  - errors carry codes: BAD_INPUT (bad messages, temperature, stop), ABORTED (a signal already aborted:
//    nothing decoded; an abort mid-stream ends the loop with it), CONTEXT_FULL (a prompt past the context),
//    UNSUPPORTED_MODEL (a corrupt file; the C status rides along), NETWORK (a source whose reads fail),
//    GPU_UNAVAILABLE (device 'webgpu' without a device); the abort listeners are removed after every call.
// Run: LW_WASM_DIR=... LW_CLI=build-NAME/llamaweb [VK_ICD_FILENAMES=...] node --test tests/web/openai.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { getEventListeners } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setup, loadModule, repoRoot } from '../../web/lw-node.mjs';
import { nativeCli, cliRun } from './native-cli.mjs';
import { Llamaweb, LlamawebError, bytesSource } from '../../web/llamaweb.mjs';

const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const spmVocab = path.join(shared, 'vocab/ggml-vocab-llama-spm.gguf');
const cli = nativeCli;

const M = await loadModule();
const skip = !M ? 'the wasm build is missing (scripts/build-wasm.sh, LW_WASM_DIR)' :
  typeof M._lw_wasm_cpum_open !== 'function' ? 'this wasm build has no CPU engine' : !cli ? 'no native llamaweb CLI (scripts/build.sh, or LW_CLI)' : false;
if (skip) console.log('SKIP: ' + skip);
const gpu0 = skip ? { skip } : await setup();
// SwiftShader spends ~30 s of this file compiling pipelines: there, only with LW_TEST_SLOW=1 (lavapipe runs it)
const slowDriver = /swiftshader/i.test(gpu0.info && gpu0.info.architecture || '') && process.env.LW_TEST_SLOW !== '1';
const gpu = slowDriver ? { skip: 'SwiftShader (its pipelines compile slowly; LW_TEST_SLOW=1 runs it, lavapipe does always)' } : gpu0;
if (!skip && gpu.skip) console.log('SKIP (WebGPU part): ' + gpu.skip);
after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100)); // Dawn keeps the process alive (web/lw-node.mjs)
const storiesSkip = skip || (!existsSync(stories) ? `no ${stories} (the shared test models)` : false);
if (!skip && storiesSkip) console.log('SKIP (stories260K): ' + storiesSkip);

const tmp = mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-openai-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
const CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

// A tiny llama with a ChatML template (vocab: a GGUF's, or 'builtin').
function synthChatModel(vocab, name) {
  const t = path.join(tmp, 'chatml.jinja'), out = path.join(tmp, name);
  writeFileSync(t, CHATML);
  execFileSync(cli, ['synth', '--preset', 'tiny', '--type', 'f32', '--vocab', vocab, '--chat-template', t, '-o', out], { stdio: 'ignore' });
  return out;
}

// The native C chat session's greedy replies to user lines (one per turn; `llamaweb chat` prints each reply
// and a newline).
function cliChat(file, system, users, n) {
  return execFileSync(cli, ['chat', '-m', file, '--system', system, '-n', String(n), '--temp', '0', '--ctx', '256', '-t', '1'],
    { input: users.join('\n') + '\n', encoding: 'utf8', stdio: ['pipe', 'pipe', 'ignore'] });
}

const engines = skip ? [] : [['cpu', new Llamaweb(M, null)], ...(gpu.skip ? [] : [['webgpu', new Llamaweb(gpu.Module, gpu.device)]])];

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

for (const [dev, lw] of engines) {
  test(`${dev}: chat completions (result and stream) equal the C chat session; stop strings`, { timeout: 120000 }, async () => {
    // real words where the shared vocabulary is there; the GPU keeps to the byte vocabulary (a 32000-row
    // output costs a software adapter seconds per token)
    const spm = dev === 'cpu' && existsSync(spmVocab);
    if (dev === 'cpu' && !spm) console.log(`# no ${spmVocab}: the byte vocabulary (replies are mostly U+FFFD)`);
    const file = synthChatModel(spm ? spmVocab : 'builtin', spm ? 'chatml-spm.gguf' : 'chatml-bytes.gguf');
    const m = await lw.open(bytesSource(readFileSync(file)), { nCtx: 256, device: dev });
    assert.equal(m.device, dev);
    const sys = 'Be brief.', u1 = 'Hello there', u2 = 'What is 2+2?', N = 12;
    const r1 = await m.chat.completions.create({ messages: [{ role: 'system', content: sys }, { role: 'user', content: u1 }],
      max_tokens: N, temperature: 0 });
    assert.match(r1.id, /^chatcmpl-/);
    assert.equal(r1.object, 'chat.completion');
    assert.ok(Number.isInteger(r1.created) && r1.created > 1.7e9);
    assert.equal(r1.choices.length, 1);
    const c1 = r1.choices[0];
    assert.equal(c1.message.role, 'assistant');
    assert.equal(c1.index, 0);
    assert.ok(c1.finish_reason === 'length' || c1.finish_reason === 'stop', c1.finish_reason);
    assert.equal(r1.usage.total_tokens, r1.usage.prompt_tokens + r1.usage.completion_tokens);
    assert.ok(r1.usage.completion_tokens >= 1 && r1.usage.completion_tokens <= N);
    assert.equal(r1.usage.prompt_tokens_details.cached_tokens, 0);
    if (dev === 'cpu') assert.equal(cliChat(file, sys, [u1], N), c1.message.content + '\n', 'the native chat session\'s reply');
    // the conversation goes on: the cells the cache holds (the prompt of turn 1, and the reply where its text
    // tokenizes back to the ids generated) are kept; the reply is a fresh context's
    const msgs2 = [{ role: 'system', content: sys }, { role: 'user', content: u1 }, { role: 'assistant', content: c1.message.content },
      { role: 'user', content: u2 }];
    const r2 = await m.chat.completions.create({ messages: msgs2, max_tokens: N, temperature: 0 });
    const c2 = r2.choices[0];
    console.log(`# ${dev}: replies ${JSON.stringify(c1.message.content)}, ${JSON.stringify(c2.message.content)}; usage ` +
      `${JSON.stringify(r1.usage)} then ${JSON.stringify(r2.usage)}`);
    assert.ok(r2.usage.prompt_tokens_details.cached_tokens >= r1.usage.prompt_tokens - 2, 'turn 2 kept turn 1\'s prompt cells');
    assert.ok(r2.usage.prompt_tokens > r1.usage.total_tokens);
    await m.completions.create({ prompt: 'zz', max_tokens: 1, temperature: 0 }); // the cache holds something else now
    const cold = await m.chat.completions.create({ messages: msgs2, max_tokens: N, temperature: 0 });
    assert.ok(cold.usage.prompt_tokens_details.cached_tokens < 8, JSON.stringify(cold.usage));
    assert.equal(cold.choices[0].message.content, c2.message.content, 'a reused prefix gives a fresh context\'s reply');
    assert.deepEqual({ ...cold.usage, prompt_tokens_details: null }, { ...r2.usage, prompt_tokens_details: null });
    const fresh = m.newChat({ system: sys });
    fresh.add('user', u1);
    fresh.add('assistant', c1.message.content);
    assert.equal((await fresh.send(u2, { maxTokens: N })).text, c2.message.content, 'a chat session given the same messages');
    fresh.free();

    // the same request streamed: the same text; role first, finish_reason and usage last
    const chunks = await collect(await m.chat.completions.create({ messages: msgs2, max_tokens: N, temperature: 0, stream: true }));
    assert.ok(chunks.length >= 2);
    assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id && c.choices.length === 1));
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    const last = chunks[chunks.length - 1];
    assert.equal(last.choices[0].finish_reason, c2.finish_reason);
    assert.deepEqual(last.choices[0].delta, {});
    assert.equal(last.usage.completion_tokens, r2.usage.completion_tokens);
    assert.ok(chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null));
    assert.equal(chunks.map((c) => c.choices[0].delta.content ?? '').join(''), c2.message.content, 'stream = result');
    // a fresh session (other system prompt) decodes everything again
    const r3 = await m.chat.completions.create({ messages: [{ role: 'user', content: u1 }], max_tokens: 2, temperature: 0 });
    assert.ok(r3.usage.prompt_tokens_details.cached_tokens < r3.usage.prompt_tokens - 4, JSON.stringify(r3.usage));

    // stop strings: cut where the reply first shows one, in the result and in the stream
    const text = c2.message.content;
    const stopAt = [...text].findIndex((ch, i) => i >= 2 && ch.trim() !== '');
    if (stopAt > 0 && text.length > 3) {
      const stop = [...text].slice(stopAt, stopAt + 2).join('');
      const want = text.slice(0, text.indexOf(stop));
      const rs = await m.chat.completions.create({ messages: msgs2, max_tokens: N, temperature: 0, stop: [stop, 'never-in-it'] });
      assert.equal(rs.choices[0].message.content, want);
      assert.equal(rs.choices[0].finish_reason, 'stop');
      const cs = await collect(await m.chat.completions.create({ messages: msgs2, max_tokens: N, temperature: 0, stop, stream: true }));
      const streamed = cs.map((c) => c.choices[0].delta.content ?? '').join('');
      assert.equal(streamed, want);
      assert.equal(cs[cs.length - 1].choices[0].finish_reason, 'stop');
    }

    // leaving the stream early stops the generation; the model takes the next request
    const s = await m.chat.completions.create({ messages: msgs2, max_tokens: 200, temperature: 0, stream: true });
    for await (const c of s) { assert.ok(c); break; }
    assert.equal(m.busy, false, 'the generation ended with the loop');
    const again = await m.chat.completions.create({ messages: msgs2, max_tokens: N, temperature: 0 });
    assert.equal(again.choices[0].message.content, c2.message.content);
    m.free();
  });

  test(`${dev}: errors carry codes; signals; listeners removed`, { timeout: 120000 }, async () => {
    const file = synthChatModel('builtin', 'chatml-bytes.gguf');
    const m = await lw.open(bytesSource(readFileSync(file)), { nCtx: 64, device: dev });
    const code = (c) => (e) => { assert.ok(e instanceof LlamawebError, String(e)); assert.equal(e.code, c, e.message); return true; };
    const user = [{ role: 'user', content: 'Hi' }];
    await assert.rejects(m.chat.completions.create({ messages: [] }), code('BAD_INPUT'));
    await assert.rejects(m.chat.completions.create({ messages: [{ role: 'assistant', content: 'x' }] }), code('BAD_INPUT'));
    await assert.rejects(m.chat.completions.create({ messages: user, temperature: -1 }), code('BAD_INPUT'));
    await assert.rejects(m.chat.completions.create({ messages: user, stop: 3 }), code('BAD_INPUT'));
    await assert.rejects(m.completions.create({ prompt: {} }), code('BAD_INPUT'));
    // a signal already aborted: nothing is decoded
    const ac = new AbortController();
    ac.abort();
    const past = m.engine.nPast;
    await assert.rejects(m.chat.completions.create({ messages: user, signal: ac.signal }), code('ABORTED'));
    await assert.rejects(m.completions.create({ prompt: 'x', signal: ac.signal, stream: true }), code('ABORTED'));
    await assert.rejects(m.generate('x', { signal: ac.signal }), code('ABORTED'));
    await assert.rejects(m.newChat().send('x', { signal: ac.signal }), code('ABORTED'));
    assert.equal(m.engine.nPast, past, 'nothing was decoded');
    // an abort mid-stream ends the loop with ABORTED; its listener is gone afterwards, as after every call
    const live = new AbortController();
    const s = await m.chat.completions.create({ messages: user, max_tokens: 40, temperature: 0, stream: true, signal: live.signal });
    let n = 0;
    await assert.rejects((async () => { for await (const c of s) { assert.ok(c); if (++n === 1) live.abort(); } })(), code('ABORTED'));
    assert.equal(getEventListeners(live.signal, 'abort').length, 0);
    const kept = new AbortController();
    await m.chat.completions.create({ messages: user, max_tokens: 2, temperature: 0, signal: kept.signal });
    await collect(await m.completions.create({ prompt: 'a', max_tokens: 2, temperature: 0, signal: kept.signal, stream: true }));
    assert.equal(getEventListeners(kept.signal, 'abort').length, 0, 'listeners removed after each call');
    // one request at a time
    const first = m.chat.completions.create({ messages: user, max_tokens: 4, temperature: 0 });
    await assert.rejects(m.chat.completions.create({ messages: user }), code('BAD_INPUT'));
    await first;
    // a prompt past the context
    await assert.rejects(m.completions.create({ prompt: 'x'.repeat(200), max_tokens: 1 }), code('CONTEXT_FULL'));
    m.free();
    // a corrupt file, a source whose reads fail, no device
    const bad = new Uint8Array(readFileSync(file).subarray(0, 4096));
    bad.set([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]); // absurd tensor count
    await assert.rejects(lw.open(bytesSource(bad), { device: dev }), (e) => {
      code('UNSUPPORTED_MODEL')(e);
      if (dev === 'cpu') assert.ok(e.status > 0 && typeof e.statusText === 'string', JSON.stringify(e));
      return true;
    });
    const bytes = readFileSync(file);
    const failing = { size: bytes.length, read: async (off, len) => { if (off > 8192) throw new Error('injected read failure'); return bytes.subarray(off, off + len); } };
    await assert.rejects(lw.open(failing, { device: dev, headBytes: 8192, retries: 1 }), code('NETWORK'));
    if (dev === 'cpu') await assert.rejects(lw.open(bytesSource(bytes), { device: 'webgpu' }), code('GPU_UNAVAILABLE'));
  });
}

test('completions on stories260K: greedy and sampled text equal the native CLI; streaming equals the result', { skip: storiesSkip, timeout: 60000 }, async () => {
  const lw = engines[0][1];
  const m = await lw.open(bytesSource(readFileSync(stories)), { nCtx: 128, device: 'cpu' });
  const prompt = 'Once upon a time';
  const greedy = await m.completions.create({ prompt, max_tokens: 24, temperature: 0 });
  assert.equal(greedy.object, 'text_completion');
  assert.equal(greedy.choices[0].text, cliRun(stories, prompt, 24, ['--temp', '0']));
  assert.equal(greedy.usage.prompt_tokens, 5);
  assert.equal(greedy.usage.completion_tokens, 24);
  assert.equal(greedy.choices[0].finish_reason, 'length');
  const params = { temperature: 1, top_k: 40, top_p: 0.95, min_p: 0.05, seed: 1234 };
  const sampled = await m.completions.create({ prompt, max_tokens: 24, ...params });
  console.log(`# greedy ${JSON.stringify(greedy.choices[0].text)}; sampled (seed 1234) ${JSON.stringify(sampled.choices[0].text)}`);
  assert.equal(sampled.choices[0].text, cliRun(stories, prompt, 24, ['--temp', '1', '--top-k', '40', '--top-p', '0.95', '--min-p', '0.05', '--seed', '1234']));
  assert.notEqual(sampled.choices[0].text, greedy.choices[0].text);
  const chunks = await collect(await m.completions.create({ prompt, max_tokens: 24, stream: true, ...params }));
  assert.equal(chunks.map((c) => c.choices[0].text).join(''), sampled.choices[0].text);
  assert.equal(chunks[chunks.length - 1].choices[0].finish_reason, 'length');
  assert.equal(chunks[chunks.length - 1].usage.completion_tokens, 24);
  m.free();
});
