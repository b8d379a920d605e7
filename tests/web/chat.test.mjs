// Conversations of the browser package (web/llamaweb.mjs: model.newChat -> Chat, over the wasm chat session
// web/lw-wasm-session.c and lw_chat_session_new_model) under Node + Dawn. Checks, on a synthetic model with a
// ChatML template written by the native CLI (llamaweb synth; runs everywhere the CLI is built) and on
// ../shared/models/stories260K.gguf (no template: the plain "User:/Assistant:" format) when present:
//  - turn 1 decodes its whole rendering from cell 0; turn 2 decodes only the new part at the cell after turn 1's
//    prompt and reply, far fewer ids than the whole conversation (what a fresh conversation given the same
//    messages decodes);
//  - turn 2's greedy reply equals a fresh context's fed the conversation's ids at once (Model.generate with
//    the ids the session says the cache holds); the generate() in between clobbers the GPU cache, so turn 3
//    decodes the reused cells again and still answers as a fresh context;
//  - a message with a NUL character survives (stored whole, tokenized with the byte token, the next turn
//    still reuses the cache);
//  - a full context restarts the conversation from the system prompt and the message (the same reply as a
//    fresh conversation with that message); a message too long even for that is refused and the conversation
//    goes on from its cache;
//  - an AbortSignal (and Model.stop) ends a reply early: the part joins the conversation and the next turn
//    reuses the cache; a decode that fails undoes the turn (the next one decodes from cell 0); reset;
//  - replies sampled on the GPU repeat for one seed (and differ from the greedy one);
//  - with phi-3's vocabulary and template (lavapipe; SwiftShader with LW_TEST_SLOW=1): turn 1's ids are
//    llama.cpp's for the rendering, turn 2's new part carries the template's control tokens as their ids;
//  - a template given to newChat renders the conversation (one that does not parse: the plain format);
//  - no GPU object (buffer, staging buffer, pipeline, bind group) is created per turn or per token.
// Run: LW_WASM_DIR=... LW_CLI=build-NAME/llamaweb VK_ICD_FILENAMES=... node --test tests/web/chat.test.mjs
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setup, repoRoot } from '../../web/lw-node.mjs';
import { Llamaweb } from '../../web/llamaweb.mjs';

const shared = process.env.LW_SHARED || path.resolve(repoRoot(), '../shared');
const stories = path.join(shared, 'models/stories260K.gguf');
const ctx = await setup();
const skip = ctx.skip || (typeof ctx.Module._lw_wasm_session_new !== 'function' ? 'this wasm build has no chat sessions' : false);
if (skip) console.log('SKIP: ' + skip);
const lw = skip ? null : new Llamaweb(ctx.Module, ctx.device);
after(() => setTimeout(() => process.exit(process.exitCode ?? 0), 100)); // Dawn keeps the process alive (web/lw-node.mjs)

// The native CLI writes the synthetic model (llamaweb synth, $LW_CLI or build*/llamaweb).
const cli = [process.env.LW_CLI, ...['build/release', 'build', 'build-model', 'build-demo'].map((d) => path.join(repoRoot(), d, 'llamaweb'))]
  .find((p) => p && existsSync(p));
const synthSkip = skip || (!cli ? 'no native llamaweb CLI (scripts/build.sh, or LW_CLI) to write the synthetic chat model' : false);
const storiesSkip = skip || (!existsSync(stories) ? `no ${stories} (the shared test models)` : false);
if (!skip && synthSkip) console.log('SKIP (synthetic model): ' + synthSkip);
if (!skip && storiesSkip) console.log('SKIP (stories260K): ' + storiesSkip);

const CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
const tmp = mkdtempSync(path.join(process.env.LW_TMP || tmpdir(), 'lw-chat-web-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

// A tiny llama with the built-in byte vocabulary and a ChatML template in its header.
function synthChatModel() {
  const t = path.join(tmp, 'chatml.jinja'), out = path.join(tmp, 'tiny-chatml.gguf');
  writeFileSync(t, CHATML);
  execFileSync(cli, ['synth', '--preset', 'tiny', '--type', 'f32', '--vocab', 'builtin', '--chat-template', t, '-o', out], { stdio: 'ignore' });
  return readFileSync(out);
}

const N = 4; // reply tokens per turn: SwiftShader decodes a few tokens per second under load

// The GPU objects created so far (invariant 2: none per token).
const created = () => {
  const c = ctx.Module.lwGpu.counters;
  return { buffers: c.buffers, stagingBuffers: c.stagingBuffers, pipelines: c.pipelines, bindGroups: c.bindGroups };
};

// Turns 1-3 of a conversation on model m (system prompt sys): cache reuse, equality with fresh contexts.
async function multiTurn(m, sys, label) {
  const chat = m.newChat({ system: sys });
  const u1 = 'Hello there', u2 = 'What is 2+2?', u3 = 'And 3+3?';
  const r1 = await chat.send(u1, { maxTokens: N });
  assert.equal(r1.fromCell, 0, 'turn 1 starts at cell 0');
  assert.ok(r1.tokens.length >= 1 && r1.tokens.length <= N);
  const kept1 = r1.decodedTokens + r1.tokens.length; // an end-of-generation token is not in tokens nor the cache
  assert.deepEqual(chat.tokens().slice(r1.decodedTokens), r1.tokens, 'the cache holds the reply as generated');
  assert.equal(chat.tokens().length, kept1);

  const c0 = created();
  const r2 = await chat.send(u2, { maxTokens: N });
  assert.deepEqual(created(), c0, 'GPU objects created during a turn');
  assert.equal(r2.fromCell, kept1, 'turn 2 goes on after turn 1\'s prompt and reply');
  assert.ok(!r2.restarted && !r2.resumed);
  const ids2 = chat.tokens().slice(0, r2.fromCell + r2.decodedTokens);
  assert.deepEqual(ids2.slice(r1.decodedTokens, kept1), r1.tokens);

  // a fresh conversation given the same messages decodes the whole rendering from cell 0
  const fresh = m.newChat({ system: sys });
  fresh.add('user', u1);
  fresh.add('assistant', r1.text);
  const rf = await fresh.send(u2, { maxTokens: 1 });
  fresh.free();
  console.log(`# ${label}: turn 1 decoded ${r1.decodedTokens} ids, replied ${r1.tokens.length} (${JSON.stringify(r1.text)}); ` +
    `turn 2 decoded ${r2.decodedTokens} ids from cell ${r2.fromCell} (the whole conversation: ${rf.decodedTokens})`);
  assert.equal(rf.fromCell, 0);
  assert.ok(r2.decodedTokens * 2 < rf.decodedTokens, `turn 2 decoded ${r2.decodedTokens} of ${rf.decodedTokens}`);

  // turn 2's greedy reply is a fresh context's fed the same ids at once (generate() clobbers the cache)
  const g2 = await m.generate(ids2, { maxTokens: N });
  assert.deepEqual(r2.tokens, g2.tokens, 'turn 2 = a fresh context fed the conversation\'s ids');
  assert.equal(r2.reason, g2.reason);

  // turn 3 after generate(): the reused cells are decoded again, the reply is still the fresh context's
  const cellsBefore = chat.tokens().length;
  const r3 = await chat.send(u3, { maxTokens: N });
  assert.ok(!r3.restarted && !r3.resumed);
  assert.equal(r3.fromCell, 0, 'the GPU cache was generate()\'s: decoded again from cell 0');
  console.log(`# ${label}: turn 3 after generate(): ${r3.decodedTokens} ids from cell 0 (${cellsBefore} cells held), resumed ${r3.resumed}`);
  assert.equal(r3.decodedTokens, chat.tokens().length - r3.tokens.length);
  assert.ok(r3.decodedTokens > cellsBefore);
  const ids3 = chat.tokens().slice(0, r3.decodedTokens);
  assert.deepEqual(ids3.slice(0, cellsBefore), chat.tokens().slice(0, cellsBefore));
  const g3 = await m.generate(ids3, { maxTokens: N });
  assert.deepEqual(r3.tokens, g3.tokens, 'turn 3 = a fresh context fed the conversation\'s ids');
  const msgs = chat.messages();
  assert.deepEqual(msgs.map((x) => x.role), [...(sys ? ['system'] : []), 'user', 'assistant', 'user', 'assistant', 'user', 'assistant']);
  assert.deepEqual(msgs.filter((x) => x.role === 'user').map((x) => x.content), [u1, u2, u3]);
  assert.deepEqual(msgs.filter((x) => x.role === 'assistant').map((x) => x.content), [r1.text, r2.text, r3.text]);

  // reset: back to the system prompt; turn 1 comes again, from cell 0
  chat.reset();
  assert.equal(chat.messages().length, sys ? 1 : 0);
  const again = await chat.send(u1, { maxTokens: N });
  assert.equal(again.fromCell, 0);
  assert.equal(again.decodedTokens, r1.decodedTokens);
  assert.deepEqual(again.tokens, r1.tokens);
  chat.free();
  assert.throws(() => chat.messages(), /freed/);
  return { r1, r2 };
}

// A message with a NUL character: stored whole, decoded with the NUL's byte token, the next turn reuses the cache.
async function nulMessage(m) {
  const chat = m.newChat();
  const r = await chat.send('a\0b', { maxTokens: 2 });
  const ids = chat.tokens().slice(r.fromCell, r.fromCell + r.decodedTokens);
  const isNul = (id) => { const b = m.gpu.pieceBytes(id); return b.length === 1 && b[0] === 0; };
  assert.ok(ids.some(isNul), `a token of the NUL byte among the prompt's ${ids}`);
  assert.deepEqual(chat.messages()[0], { role: 'user', content: 'a\0b' });
  const r2 = await chat.send('c\0', { maxTokens: 2 });
  assert.equal(r2.fromCell, r.decodedTokens + r.tokens.length, 'the re-rendering with the NUL matched the cache');
  assert.ok(!r2.resumed && !r2.restarted);
  assert.equal(chat.messages()[2].content, 'c\0');
  chat.free();
}

// Stopping a reply early (AbortSignal, Model.stop) keeps the part; a failed decode undoes the turn.
async function stopsAndFailures(m) {
  const chat = m.newChat({ system: 'Be brief.' });
  const ac = new AbortController();
  let seen = 0;
  const r1 = await chat.send('Tell me a story', { maxTokens: 50, signal: ac.signal, onToken: (t, id) => { if (id >= 0 && ++seen === 2) ac.abort(); } });
  assert.equal(r1.reason, 'stopped');
  assert.equal(r1.tokens.length, 2);
  assert.equal(chat.messages()[2].content, r1.text, 'the part of the reply joined the conversation');
  const r2 = await chat.send('Go on', { maxTokens: 50, onToken: (t, id) => { if (id >= 0) m.stop(); } });
  assert.equal(r2.fromCell, r1.decodedTokens + 2, 'the stopped reply stays in the cache (its last token decoded)');
  assert.equal(r2.reason, 'stopped');
  assert.equal(r2.tokens.length, 1);
  // a decode that fails mid-reply: the turn is undone and the next one decodes the conversation from cell 0
  // (the third decode or chained step: the GPU engine's replies run on GpuModel.chain, whose prompt step is a decode)
  const g = m.gpu, decode = g.decode, chain = g.chain;
  let calls = 0;
  g.decode = async function (...a) { if (++calls === 3) throw new Error('injected decode failure'); return decode.apply(this, a); };
  if (chain) g.chain = async function* (...a) { for await (const id of chain.apply(this, a)) { if (++calls === 3) throw new Error('injected decode failure'); yield id; } };
  try {
    await assert.rejects(chat.send('Fail here', { maxTokens: 5 }), /injected/);
  } finally {
    g.decode = decode;
    if (chain) g.chain = chain;
  }
  assert.equal(chat.messages().length, 5, 'the failed turn left no message');
  assert.equal(m.busy, false);
  const r3 = await chat.send('Again', { maxTokens: 2 });
  assert.equal(r3.fromCell, 0);
  assert.equal(r3.decodedTokens, chat.tokens().length - r3.tokens.length);
  // one turn at a time per model
  const [a, b] = await Promise.allSettled([chat.send('x', { maxTokens: 1 }), m.generate('y', { maxTokens: 1 })]);
  assert.equal(a.status, 'fulfilled');
  assert.match(String(b.reason), /already running/);
  chat.free();
}

// A full context: the conversation restarts from the system prompt and the message; too long: refused.
async function contextFull(bytes, nCtx, sys, msg) {
  const m = await lw.open(new Blob([bytes]), { nCtx });
  try {
    const chat = m.newChat({ system: sys });
    let r, turns = 0;
    do {
      r = await chat.send(msg, { maxTokens: N });
      turns++;
    } while (!r.restarted && turns < 20);
    assert.ok(r.restarted, `no restart in ${turns} turns of ${nCtx} cells`);
    assert.equal(r.fromCell, 0);
    assert.deepEqual(chat.messages().map((x) => x.role), ['system', 'user', 'assistant']);
    // refused: the conversation and its cache stay (the next turn goes on from it)
    const cells = chat.tokens().length, n = chat.messages().length;
    await assert.rejects(chat.send('x'.repeat(4 * nCtx)), /does not fit the context/);
    assert.equal(chat.messages().length, n);
    const next = await chat.send('Hi', { maxTokens: 1 });
    assert.equal(next.fromCell, cells);
    assert.ok(!next.restarted);
    // the restarted turn's reply is a fresh conversation's
    const fresh = m.newChat({ system: sys });
    const rf = await fresh.send(msg, { maxTokens: N });
    assert.deepEqual(r.tokens, rf.tokens, 'after a restart: a fresh conversation\'s reply');
    assert.equal(rf.decodedTokens, r.decodedTokens);
    fresh.free();
    console.log(`# ${nCtx} cells: restarted after ${turns} turns; a ${4 * nCtx}-byte message refused`);
    chat.free();
  } finally {
    m.free();
  }
}

test('synthetic ChatML model: turn 2 decodes the new part; fresh-context replies; NUL; stops; context full', { skip: synthSkip, timeout: 180000 }, async () => {
  const bytes = synthChatModel();
  const m = await lw.open(new Blob([bytes]), { nCtx: 512 }); // a byte vocabulary: one id per byte
  try {
    assert.equal(m.chatTemplate, true, m.chatError);
    assert.equal(m.newChat().template, 'model');
    // a template given instead of the model's: its rendering is decoded; one that does not parse falls back to
    // the plain format
    const given = m.newChat({ template: '{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}' });
    assert.equal(given.template, 'given');
    const rg = await given.send('hi', { maxTokens: 1 });
    assert.deepEqual(given.tokens().slice(0, rg.decodedTokens), m.tokenize('[user]hi[assistant]', true), 'the given template\'s rendering');
    given.free();
    assert.equal(m.newChat({ template: '{% for %}' }).template, 'plain');
    await multiTurn(m, 'You are a test.', 'synthetic ChatML');
    await nulMessage(m);
    await stopsAndFailures(m);
  } finally {
    m.free();
  }
  await contextFull(bytes, 192, 'Sys.', 'Hello there');
});

test('stories260K (plain format): turns, fresh-context replies, restart; sampling repeats per seed; free() during a reply', { skip: storiesSkip, timeout: 180000 }, async () => {
  const bytes = readFileSync(stories);
  const m = await lw.open(new Blob([bytes]), { nCtx: 256 });
  const chat = m.newChat({ system: 'Once upon a time' });
  assert.equal(chat.template, 'plain');
  const { r1 } = await multiTurn(m, 'Once upon a time', 'stories260K');
  assert.ok(r1.text.length > 0);
  // (NUL messages, stops and failures are the synthetic model's checks: they do not depend on the vocabulary)
  if (lw.canSample) {
    const s = { temp: 3.0, topK: 40, topP: 0.95, minP: 0.05, seed: 7 }; // hot: far from the greedy reply
    const greedy = await m.newChat().send('Lily', { maxTokens: N });
    const a = await m.newChat().send('Lily', { maxTokens: N, sampling: s });
    const b = await m.newChat().send('Lily', { maxTokens: N, sampling: s });
    console.log(`# sampled reply (temperature 3, seed 7): ${JSON.stringify(a.text)}; greedy: ${JSON.stringify(greedy.text)}`);
    assert.deepEqual(a.tokens, b.tokens, 'one seed, one reply (each send reseeds)');
    assert.notDeepEqual(a.tokens, greedy.tokens, 'the reply was sampled');
  } else {
    console.log('# this build cannot sample on the GPU: sampling not checked');
  }
  // free() of the model during a reply: it ends after the current token, then the model and its chats go
  const running = chat.send('Lily', { maxTokens: 20 });
  m.free();
  const last = await running;
  assert.equal(last.reason, 'stopped');
  assert.equal(m.gpu.h, 0, 'released');
  assert.equal(chat.w, 0, 'the conversation went with the model');
  await assert.rejects(chat.send('x'), /freed/);
  await contextFull(bytes, 64, 'Once upon a time', 'Lily went to the park with her mom.');
});

// phi-3's vocabulary and template (llamaweb synth --vocab ggml-vocab-phi-3.gguf): control tokens in the
// conversation's ids as llama.cpp tokenizes them. SwiftShader compiles this model's pipelines slowly
// (~15 s): there only with LW_TEST_SLOW=1.
const phi3Vocab = path.join(shared, 'vocab/ggml-vocab-phi-3.gguf');
const slowDriver = /swiftshader/i.test(ctx.info && ctx.info.architecture || '') && process.env.LW_TEST_SLOW !== '1';
const phi3Skip = synthSkip || (!existsSync(phi3Vocab) ? `no ${phi3Vocab}` :
  slowDriver ? 'SwiftShader: a phi-3-vocab model compiles its pipelines slowly (LW_TEST_SLOW=1 runs it)' : false);

test('phi-3 template: turn 1 is llama.cpp\'s ids; turn 2 goes on after the reply', { skip: phi3Skip, timeout: 120000 }, async () => {
  const file = path.join(tmp, 'tiny-phi3.gguf');
  execFileSync(cli, ['synth', '--preset', 'tiny-phi3', '--type', 'f32', '--vocab', phi3Vocab, '-o', file], { stdio: 'ignore' });
  const m = await lw.open(new Blob([readFileSync(file)]), { nCtx: 128 });
  try {
    const chat = m.newChat();
    assert.equal(chat.template, 'model');
    const r1 = await chat.send('Hello', { maxTokens: 3 });
    // '<s><|user|>\nHello<|end|>\n<|assistant|>\n': llama.cpp's ids for it in this file (tests/web/package.test.mjs)
    assert.deepEqual(chat.tokens().slice(0, r1.decodedTokens), [1, 32010, 29871, 13, 10994, 32007, 29871, 13, 32001, 29871, 13]);
    const r2 = await chat.send('Bye', { maxTokens: 3 });
    const ids = chat.tokens().slice(r2.fromCell, r2.fromCell + r2.decodedTokens);
    console.log(`# phi-3 template: turn 1 ${r1.decodedTokens} ids (${r1.reason}), turn 2 ${r2.decodedTokens} ids at cell ${r2.fromCell}: ${ids}`);
    assert.equal(r2.fromCell, r1.decodedTokens + r1.tokens.length);
    assert.ok(ids.includes(32007) && ids.includes(32010) && ids.includes(32001), 'the template\'s control tokens as their ids');
    const g2 = await m.generate(chat.tokens().slice(0, r2.fromCell + r2.decodedTokens), { maxTokens: 3 });
    assert.deepEqual(r2.tokens, g2.tokens);
  } finally {
    m.free();
  }
});
